-- System prompts, once per agency: every new conversation starts each agent with its system
-- prompt, the same text each time (and long: over SQLite's in-page limit for `messages`, so
-- each took a page of its own). A message of kind `system` keeps the SHA-256 of its text in
-- `prompt` (its `text` left empty) and the text is here, once; the agency takes its prompts
-- with it when it goes.
CREATE TABLE prompts (
    agency_id BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    hash      BLOB NOT NULL,
    text      TEXT NOT NULL,
    PRIMARY KEY (agency_id, hash)
);
ALTER TABLE messages ADD COLUMN prompt BLOB;

-- Every read of a message names its conversation, whose messages are together under the
-- primary key: an index of their ids alone was a tenth of what a conversation kept. Ids stay
-- unique as they are made (UUIDv7), and the primary key refuses a message written twice.
DROP INDEX messages_id;
