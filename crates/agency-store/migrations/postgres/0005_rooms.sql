-- Roundtable rooms (spec 004): a person and several agents.
CREATE TABLE rooms (
    id         UUID PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL,
    agency_id  UUID REFERENCES agencies (id) ON DELETE SET NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX rooms_owner ON rooms (owner);

CREATE TABLE room_participants (
    id           UUID PRIMARY KEY NOT NULL,
    room_id      UUID NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    -- Lower-cased: names are unique without regard to case, as mentions match them.
    name_key     TEXT NOT NULL,
    model        TEXT NOT NULL,
    role         TEXT,
    personality  TEXT,
    instructions TEXT,
    enabled      BOOLEAN NOT NULL,
    position     BIGINT NOT NULL,
    colour       TEXT NOT NULL,
    UNIQUE (room_id, name_key)
);

-- Read by room in seq order: that is their key.
CREATE TABLE room_messages (
    room_id        UUID NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    seq            BIGINT NOT NULL,
    id             UUID NOT NULL,
    -- person, agent or error
    kind           TEXT NOT NULL,
    participant_id UUID,
    author_name    TEXT,
    text           TEXT NOT NULL,
    included       BOOLEAN NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (room_id, seq)
);
CREATE UNIQUE INDEX room_messages_id ON room_messages (id);
