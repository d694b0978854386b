//! Rows of the memory store, converted to and from the domain explicitly.

use agency_core::memory::{Memory, MemoryId, MemoryKind};
use agency_core::{AgencyId, AgentId};
use chrono::{DateTime, Utc};

use crate::{Result, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct MemoryRow {
    pub id: uuid::Uuid,
    pub agency_id: uuid::Uuid,
    pub agent_id: i64,
    pub kind: String,
    pub content: String,
    pub importance: f64,
    pub created_at: DateTime<Utc>,
}

impl MemoryRow {
    pub(crate) fn of(m: &Memory) -> Self {
        Self {
            id: m.id.0,
            agency_id: m.agency_id.0,
            agent_id: i64::from(m.agent.get()),
            kind: m.kind.as_str().to_string(),
            content: m.content.clone(),
            importance: m.importance,
            created_at: m.created_at,
        }
    }

    pub(crate) fn into_memory(self, sources: Vec<uuid::Uuid>) -> Result<Memory> {
        let agent = u32::try_from(self.agent_id)
            .ok()
            .and_then(AgentId::new)
            .ok_or_else(|| StoreError::Corrupt(format!("memory {}: agent id", self.id)))?;
        let kind = MemoryKind::parse(&self.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("memory {}: kind", self.id)))?;
        Ok(Memory {
            id: MemoryId(self.id),
            agency_id: AgencyId(self.agency_id),
            agent,
            kind,
            content: self.content,
            importance: self.importance,
            sources: sources.into_iter().map(MemoryId).collect(),
            created_at: self.created_at,
        })
    }
}

pub(crate) fn sqlite_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryRow> {
    Ok(MemoryRow {
        id: r.get(0)?,
        agency_id: r.get(1)?,
        agent_id: r.get(2)?,
        kind: r.get(3)?,
        content: r.get(4)?,
        importance: r.get(5)?,
        created_at: r.get(6)?,
    })
}
