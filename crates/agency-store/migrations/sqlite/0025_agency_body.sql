-- An agency's definition is kept whole, as the JSON of its draft (`AgencyDraft`, what
-- `Agency::to_draft` gives): one schema for the file, the API and the store, so a field added
-- to an agent needs no column. Text, as written: the draft's mappings (providers, MCP servers)
-- keep their order. The program fills it from the columns and the `agents` table right after
-- this migration (`sqlite/migrate.rs`, `shared/legacy_agencies.rs`); 0026 drops them.
ALTER TABLE agencies ADD COLUMN body TEXT NOT NULL DEFAULT '';
