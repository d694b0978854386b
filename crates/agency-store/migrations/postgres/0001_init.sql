CREATE TABLE agencies (
    id          UUID PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    handle      TEXT,
    protocol    TEXT NOT NULL,
    manager     BIGINT NOT NULL,
    max_hops    BIGINT NOT NULL,
    deadline_ms BIGINT NOT NULL,
    -- Bumped by every save, so a cached copy can be checked with one small read.
    revision    BIGINT NOT NULL DEFAULT 1,
    providers   TEXT NOT NULL DEFAULT '[]',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (owner, name)
);

CREATE TABLE agents (
    agency_id UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    id        BIGINT NOT NULL,
    position  BIGINT NOT NULL,
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
    id         UUID PRIMARY KEY NOT NULL,
    agency_id  UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX conversations_agency ON conversations (agency_id);

CREATE TABLE turns (
    id                UUID PRIMARY KEY NOT NULL,
    conversation_id   UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    number            BIGINT NOT NULL,
    started_at        TIMESTAMPTZ NOT NULL,
    finished_at       TIMESTAMPTZ,
    stopped_by        TEXT,
    hops              BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    error             TEXT,
    UNIQUE (conversation_id, number)
);

CREATE TABLE messages (
    id                UUID NOT NULL,
    conversation_id   UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_id           UUID,
    seq               BIGINT NOT NULL,
    agent_id          BIGINT,
    kind              TEXT NOT NULL,
    role              TEXT NOT NULL,
    linked_message_id UUID,
    from_agent        BIGINT,
    to_agent          BIGINT,
    text              TEXT NOT NULL,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    latency_ms        BIGINT,
    included          BOOLEAN NOT NULL DEFAULT TRUE,
    created_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE UNIQUE INDEX messages_id ON messages (id);

-- Provider API keys a user stored: sealed (XChaCha20-Poly1305) under the server's master key,
-- with the owner and provider as associated data. Only the last characters are kept in clear.
CREATE TABLE provider_keys (
    owner      TEXT NOT NULL,
    provider   TEXT NOT NULL,
    nonce      BYTEA NOT NULL,
    sealed     BYTEA NOT NULL,
    suffix     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner, provider)
);

-- API keys: only a keyed hash of each key, and a prefix to recognise it by.
CREATE TABLE api_keys (
    id                    UUID PRIMARY KEY NOT NULL,
    agency_id             UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    name                  TEXT NOT NULL,
    prefix                TEXT NOT NULL,
    hash                  TEXT NOT NULL UNIQUE,
    rate_limit_per_minute BIGINT NOT NULL,
    created_at            TIMESTAMPTZ NOT NULL,
    expires_at            TIMESTAMPTZ,
    last_used_at          TIMESTAMPTZ,
    revoked_at            TIMESTAMPTZ
);
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (agency_id, name) WHERE revoked_at IS NULL;

-- Conversations held over the stateless Chat Completions API: a hash of the visible
-- transcript (client system message, user messages, answers) so far, per key.
CREATE TABLE api_threads (
    key_id          UUID NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    hash            TEXT NOT NULL,
    conversation_id UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    PRIMARY KEY (key_id, hash)
);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
