-- A reply's tool calls, or what a tool result answers (JSON; NULL for every other message).
ALTER TABLE messages ADD COLUMN tool TEXT;
-- An agency's own MCP servers (JSON: names, URLs and the names of server variables).
ALTER TABLE agencies ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
