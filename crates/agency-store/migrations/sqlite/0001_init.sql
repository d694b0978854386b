CREATE TABLE agencies (
    id          BLOB PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    handle      TEXT,
    protocol    TEXT NOT NULL,
    manager     INTEGER NOT NULL,
    max_hops    INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL,
    -- Bumped by every save, so a cached copy can be checked with one small read.
    revision    INTEGER NOT NULL DEFAULT 1,
    providers   TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (owner, name)
);

CREATE TABLE agents (
    agency_id BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    id        INTEGER NOT NULL,
    position  INTEGER NOT NULL,
    name      TEXT NOT NULL,
    handle    TEXT,
    role      TEXT,
    model     TEXT NOT NULL,
    sampling  TEXT NOT NULL DEFAULT '{}',
    blocks    TEXT NOT NULL,
    PRIMARY KEY (agency_id, id),
    UNIQUE (agency_id, name)
);

CREATE TABLE conversations (
    id         BLOB PRIMARY KEY NOT NULL,
    agency_id  BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL
);
CREATE INDEX conversations_agency ON conversations (agency_id);

CREATE TABLE turns (
    id                BLOB PRIMARY KEY NOT NULL,
    conversation_id   BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    number            INTEGER NOT NULL,
    started_at        TEXT NOT NULL,
    finished_at       TEXT,
    stopped_by        TEXT,
    hops              INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    error             TEXT,
    UNIQUE (conversation_id, number)
);

-- Messages are read by conversation in seq order (contexts, traces): that is their key, so a
-- hop's insert touches two b-trees (the table and the id index) and little else.
CREATE TABLE messages (
    id                BLOB NOT NULL,
    conversation_id   BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_id           BLOB,
    seq               INTEGER NOT NULL,
    agent_id          INTEGER,
    kind              TEXT NOT NULL,
    role              TEXT NOT NULL,
    linked_message_id BLOB,
    from_agent        INTEGER,
    to_agent          INTEGER,
    text              TEXT NOT NULL,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    latency_ms        INTEGER,
    included          BOOLEAN NOT NULL DEFAULT TRUE,
    created_at        TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX messages_id ON messages (id);

-- Provider API keys a user stored: sealed (XChaCha20-Poly1305) under the server's master key,
-- with the owner and provider as associated data. Only the last characters are kept in clear.
CREATE TABLE provider_keys (
    owner      TEXT NOT NULL,
    provider   TEXT NOT NULL,
    nonce      BLOB NOT NULL,
    sealed     BLOB NOT NULL,
    suffix     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (owner, provider)
);

-- API keys: only a keyed hash of each key, and a prefix to recognise it by.
CREATE TABLE api_keys (
    id                    BLOB PRIMARY KEY NOT NULL,
    agency_id             BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    name                  TEXT NOT NULL,
    prefix                TEXT NOT NULL,
    hash                  TEXT NOT NULL UNIQUE,
    rate_limit_per_minute INTEGER NOT NULL,
    created_at            TEXT NOT NULL,
    expires_at            TEXT,
    last_used_at          TEXT,
    revoked_at            TEXT
);
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (agency_id, name) WHERE revoked_at IS NULL;

-- Conversations held over the stateless Chat Completions API: a hash of the visible
-- transcript (client system message, user messages, answers) so far, per key.
CREATE TABLE api_threads (
    key_id          BLOB NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    hash            TEXT NOT NULL,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    PRIMARY KEY (key_id, hash)
);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
