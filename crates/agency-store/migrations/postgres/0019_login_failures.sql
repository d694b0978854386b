-- Failed log-ins, each counted under a few keys (the email and the client's address, each
-- SHA-256-hashed): every server on the database counts the same failures. Rows older than the
-- throttle's window are deleted as new ones come.
CREATE TABLE login_failures (
    key TEXT NOT NULL,
    at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX login_failures_key_at ON login_failures (key, at);
CREATE INDEX login_failures_at ON login_failures (at);
