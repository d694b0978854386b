-- People with accounts. Their id, as text, is the owner of what they make.
CREATE TABLE users (
    id            TEXT PRIMARY KEY NOT NULL,
    -- Trimmed and lower-cased.
    email         TEXT NOT NULL UNIQUE,
    -- argon2id, as a PHC string.
    password_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

-- Browsers' logins: the SHA-256 of each session token, never the token.
CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Published versions of agencies, frozen as agency files. The newest is the one served.
CREATE TABLE agency_versions (
    agency_id    BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    body         TEXT NOT NULL,
    published_at TEXT NOT NULL,
    PRIMARY KEY (agency_id, version)
);

-- NULL: the conversation runs on its agency's draft; otherwise on its published versions,
-- from this one on.
ALTER TABLE conversations ADD COLUMN version INTEGER;
