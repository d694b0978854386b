-- The face a turn came from (chat_completions, responses, playground, mqtt, cli, mcp, a2a);
-- NULL for turns recorded before it was kept.
ALTER TABLE turns ADD COLUMN face TEXT;
