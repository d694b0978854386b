-- An agency's definition is kept whole, as the JSON of its draft (`AgencyDraft`, what
-- `Agency::to_draft` gives): one schema for the file, the API and the store, so a field added
-- to an agent needs no column. TEXT, as written, not JSONB: the draft's mappings (providers,
-- MCP servers) keep their order. The program runs this statement itself, in the transaction
-- that writes every agency's body from the columns and the `agents` table
-- (`postgres/migrate.rs`, `shared/legacy_agencies.rs`), before this migration; 0028 drops
-- them.
ALTER TABLE agencies ADD COLUMN IF NOT EXISTS body TEXT;
