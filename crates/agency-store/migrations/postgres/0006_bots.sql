-- Webhook bots in rooms (spec 003): a participant may be a bot instead of a model, and room
-- messages reply to others and tag participants.
ALTER TABLE room_participants ADD COLUMN bot_endpoint TEXT;
ALTER TABLE room_participants ADD COLUMN bot_emulates TEXT;
ALTER TABLE room_messages ADD COLUMN reply_to UUID;
-- A JSON array of participant ids.
ALTER TABLE room_messages ADD COLUMN tagged TEXT NOT NULL DEFAULT '[]';
