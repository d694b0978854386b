-- Tool calls that wait for a person's approval (issue 36). A row is written when the call is
-- asked; `state` leaves `pending` once (the first answer wins: a conditional update); an
-- approved call is marked `started_at` before it goes out and gets its result after, so a
-- call found started without a result is never run again. The conversation is not a foreign
-- key: a new one is written with its turn's first write.
CREATE TABLE approvals (
    id              BLOB PRIMARY KEY NOT NULL,
    agency_id       BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    conversation_id BLOB NOT NULL,
    turn_id         BLOB NOT NULL,
    agent_id        INTEGER NOT NULL,
    reply_id        BLOB NOT NULL,
    call_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    asked_at        TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    on_timeout      TEXT NOT NULL,
    edits           INTEGER NOT NULL,
    state           TEXT NOT NULL,
    answered_by     TEXT,
    answered_at     TEXT,
    reason          TEXT,
    started_at      TEXT,
    result          TEXT,
    result_is_error INTEGER
);
CREATE INDEX approvals_agency ON approvals (agency_id, state, asked_at);
CREATE INDEX approvals_turn ON approvals (turn_id);
