-- Two conversations of one key may reach the same transcript (two end users whose first
-- exchanges were the same): each keeps its own row, so that a continuation can take the one
-- whose end the history still is, not the one another end user went on with.
ALTER TABLE api_threads DROP CONSTRAINT api_threads_pkey;
ALTER TABLE api_threads ADD PRIMARY KEY (key_id, hash, conversation_id);
