-- An observation a chat message led to (spec 002's "observations triggered by the
-- conversation"): that message's conversation and turn.
ALTER TABLE memories ADD COLUMN conversation_id UUID REFERENCES conversations (id) ON DELETE SET NULL;
ALTER TABLE memories ADD COLUMN turn_id UUID;
CREATE INDEX memories_conversation ON memories (conversation_id) WHERE conversation_id IS NOT NULL;
