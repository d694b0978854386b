-- Two conversations of one key may reach the same transcript (two end users whose first
-- exchanges were the same): each keeps its own row, so that a continuation can take the one
-- whose end the history still is, not the one another end user went on with. The key is the
-- table (no rowid): a lookup by key and hash reads it alone.
CREATE TABLE api_threads_twins (
    key_id          BLOB NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    hash            TEXT NOT NULL,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_number     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, hash, conversation_id)
) WITHOUT ROWID;
INSERT INTO api_threads_twins (key_id, hash, conversation_id, turn_number)
    SELECT key_id, hash, conversation_id, turn_number FROM api_threads;
DROP TABLE api_threads;
ALTER TABLE api_threads_twins RENAME TO api_threads;
CREATE INDEX api_threads_conversation ON api_threads (conversation_id);
