-- A conversation keeps the transcript hash of every answered turn (not only its latest), with
-- the turn it ends at: a request that repeats an earlier turn's transcript forks the
-- conversation there. 0: a hash recorded before, which continues its conversation.
ALTER TABLE api_threads ADD COLUMN turn_number INTEGER NOT NULL DEFAULT 0;
