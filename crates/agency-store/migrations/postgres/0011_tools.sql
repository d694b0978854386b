-- A reply's tool calls, or what a tool result answers (JSON; NULL for every other message).
ALTER TABLE messages ADD COLUMN tool TEXT;
