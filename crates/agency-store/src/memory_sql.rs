//! The SQL of the memory store, shared by both backends ($N placeholders work in both).

pub(crate) const INSERT_MEMORY: &str = "INSERT INTO memories (id, agency_id, agent_id, kind, content, importance, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
pub(crate) const INSERT_SOURCE: &str =
    "INSERT INTO memory_sources (memory_id, source_id, position) VALUES ($1, $2, $3)";
pub(crate) const MEMORY_BY_ID: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at FROM memories WHERE id = $1";
pub(crate) const SOURCES_OF: &str =
    "SELECT source_id FROM memory_sources WHERE memory_id = $1 ORDER BY position";
/// The newest `$4` memories of an agent since `$3`, newest first.
pub(crate) const MEMORIES_SINCE: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at FROM memories WHERE agency_id = $1 AND agent_id = $2 AND created_at > $3 ORDER BY created_at DESC, id DESC LIMIT $4";
