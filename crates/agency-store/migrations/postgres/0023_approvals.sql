-- Tool calls that wait for a person's approval (issue 36). A row is written when the call is
-- asked; `state` leaves `pending` once (the first answer wins: a conditional update); an
-- approved call is marked `started_at` before it goes out and gets its result after, so a
-- call found started without a result is never run again. The conversation is not a foreign
-- key: a new one is written with its turn's first write.
CREATE TABLE approvals (
    id              UUID PRIMARY KEY NOT NULL,
    agency_id       UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    conversation_id UUID NOT NULL,
    turn_id         UUID NOT NULL,
    agent_id        BIGINT NOT NULL,
    reply_id        UUID NOT NULL,
    call_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    asked_at        TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    on_timeout      TEXT NOT NULL,
    edits           BOOLEAN NOT NULL,
    state           TEXT NOT NULL,
    answered_by     TEXT,
    answered_at     TIMESTAMPTZ,
    reason          TEXT,
    started_at      TIMESTAMPTZ,
    result          TEXT,
    result_is_error BOOLEAN
);
CREATE INDEX approvals_agency ON approvals (agency_id, state, asked_at);
CREATE INDEX approvals_turn ON approvals (turn_id);
