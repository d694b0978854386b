-- One turn at a time in a conversation, across every server on this database: the holder
-- of each conversation's lock and when its lease ends (a dead server's lock frees by itself).
-- Unlogged: locks need not outlive the database server, and are written on every turn.
CREATE UNLOGGED TABLE turn_locks (
    conversation_id UUID PRIMARY KEY,
    holder UUID NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
