-- Reusable roles and personalities (spec 004) that room agents point to.
CREATE TABLE room_definitions (
    id         BLOB PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    -- role or personality
    kind       TEXT NOT NULL,
    name       TEXT NOT NULL,
    name_key   TEXT NOT NULL,
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (owner, kind, name_key)
);
-- A participant pointing to a definition has its text; its own column is then empty.
ALTER TABLE room_participants ADD COLUMN role_id BLOB;
ALTER TABLE room_participants ADD COLUMN personality_id BLOB;
CREATE INDEX room_participants_role ON room_participants (role_id);
CREATE INDEX room_participants_personality ON room_participants (personality_id);
