//! The memory store on SQLite.

use agency_core::AgentId;
use agency_core::memory::{Memory, MemoryId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::memory::{MemoryRow, sqlite_row};
use crate::{MemoryStore, Result, memory_sql as sql};

fn sources(conn: &rusqlite::Connection, id: uuid::Uuid) -> rusqlite::Result<Vec<uuid::Uuid>> {
    conn.prepare_cached(sql::SOURCES_OF)?
        .query_map([id], |r| r.get(0))?
        .collect()
}

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn save_memory(&self, memory: &Memory) -> Result<()> {
        let row = MemoryRow::of(memory);
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                sql::INSERT_MEMORY,
                params![
                    row.id,
                    row.agency_id,
                    row.agent_id,
                    row.kind,
                    row.content,
                    row.importance,
                    row.created_at
                ],
            )?;
            for (position, source) in (0i64..).zip(&memory.sources) {
                tx.execute(sql::INSERT_SOURCE, params![row.id, source.0, position])?;
            }
            tx.commit()
        })
    }

    async fn memory(&self, id: MemoryId) -> Result<Option<Memory>> {
        let found = self.with(|conn| {
            let row = conn
                .prepare_cached(sql::MEMORY_BY_ID)?
                .query_row([id.0], sqlite_row)
                .optional()?;
            match row {
                None => Ok(None),
                Some(row) => Ok(Some((sources(conn, row.id)?, row))),
            }
        })?;
        found
            .map(|(sources, row)| row.into_memory(sources))
            .transpose()
    }

    async fn memories_since(
        &self,
        agency: agency_core::AgencyId,
        agent: AgentId,
        since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Memory>> {
        let rows = self.with_long(|conn| {
            let rows = conn
                .prepare_cached(sql::MEMORIES_SINCE)?
                .query_map(
                    params![agency.0, i64::from(agent.get()), since, i64::from(limit)],
                    sqlite_row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            rows.into_iter()
                .map(|r| Ok((sources(conn, r.id)?, r)))
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|(sources, row)| row.into_memory(sources))
            .collect()
    }
}
