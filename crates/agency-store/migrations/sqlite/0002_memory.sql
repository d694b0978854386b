-- Agents' memories (spec 002): observations and the reflections written from them.
CREATE TABLE memories (
    id         BLOB PRIMARY KEY NOT NULL,
    agency_id  BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    agent_id   INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    content    TEXT NOT NULL,
    importance REAL NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX memories_agent ON memories (agency_id, agent_id, created_at);

-- Which memories a reflection was written from.
CREATE TABLE memory_sources (
    memory_id BLOB NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    source_id BLOB NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    position  INTEGER NOT NULL,
    PRIMARY KEY (memory_id, source_id)
);
