-- The servers on this database and when each last said it was alive (every few seconds), and
-- which one is answering in a room: an answer in flight is its server's to finish while that
-- server is alive, and a failure to record once it is not.
CREATE TABLE processes (
    id      UUID PRIMARY KEY,
    seen_at TIMESTAMPTZ NOT NULL
);
ALTER TABLE room_answering ADD COLUMN process_id UUID;
