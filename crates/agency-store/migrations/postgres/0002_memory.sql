-- Agents' memories (spec 002): observations and the reflections written from them.
CREATE TABLE memories (
    id         UUID PRIMARY KEY NOT NULL,
    agency_id  UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    agent_id   BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    content    TEXT NOT NULL,
    importance DOUBLE PRECISION NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX memories_agent ON memories (agency_id, agent_id, created_at);

-- Which memories a reflection was written from.
CREATE TABLE memory_sources (
    memory_id UUID NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    source_id UUID NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    position  BIGINT NOT NULL,
    PRIMARY KEY (memory_id, source_id)
);
