-- Roundtable rooms (spec 004): a person and several agents.
CREATE TABLE rooms (
    id         BLOB PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL,
    agency_id  BLOB REFERENCES agencies (id) ON DELETE SET NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX rooms_owner ON rooms (owner);

CREATE TABLE room_participants (
    id           BLOB PRIMARY KEY NOT NULL,
    room_id      BLOB NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    -- Lower-cased: names are unique without regard to case, as mentions match them.
    name_key     TEXT NOT NULL,
    model        TEXT NOT NULL,
    role         TEXT,
    personality  TEXT,
    instructions TEXT,
    enabled      BOOLEAN NOT NULL,
    position     INTEGER NOT NULL,
    colour       TEXT NOT NULL,
    UNIQUE (room_id, name_key)
);

-- Read by room in seq order: that is their key.
CREATE TABLE room_messages (
    room_id        BLOB NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    id             BLOB NOT NULL,
    -- person, agent or error
    kind           TEXT NOT NULL,
    participant_id BLOB,
    author_name    TEXT,
    text           TEXT NOT NULL,
    included       BOOLEAN NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (room_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX room_messages_id ON room_messages (id);
