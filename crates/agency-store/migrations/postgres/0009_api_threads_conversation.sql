-- A conversation's transcript hashes by conversation: replacing them on every answer (and deleting
-- a conversation) must not scan every thread of its key.
CREATE INDEX api_threads_conversation ON api_threads (conversation_id);
