//! The memory store on PostgreSQL.

use agency_core::AgentId;
use agency_core::memory::{Memory, MemoryId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PostgresStore;
use crate::memory::MemoryRow;
use crate::{MemoryStore, Result, memory_sql as sql};

impl PostgresStore {
    async fn sources_of(&self, id: uuid::Uuid) -> Result<Vec<uuid::Uuid>> {
        let rows: Vec<(uuid::Uuid,)> = sqlx::query_as(sql::SOURCES_OF)
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|(s,)| s).collect())
    }
}

#[async_trait]
impl MemoryStore for PostgresStore {
    async fn save_memory(&self, memory: &Memory) -> Result<()> {
        let row = MemoryRow::of(memory);
        let mut tx = self.pool.begin().await?;
        sqlx::query(sql::INSERT_MEMORY)
            .bind(row.id)
            .bind(row.agency_id)
            .bind(row.agent_id)
            .bind(&row.kind)
            .bind(&row.content)
            .bind(row.importance)
            .bind(row.created_at)
            .execute(&mut *tx)
            .await?;
        for (position, source) in (0i64..).zip(&memory.sources) {
            sqlx::query(sql::INSERT_SOURCE)
                .bind(row.id)
                .bind(source.0)
                .bind(position)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn memory(&self, id: MemoryId) -> Result<Option<Memory>> {
        let row: Option<MemoryRow> = sqlx::query_as(sql::MEMORY_BY_ID)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            None => Ok(None),
            Some(row) => {
                let sources = self.sources_of(row.id).await?;
                row.into_memory(sources).map(Some)
            }
        }
    }

    async fn memories_since(
        &self,
        agency: agency_core::AgencyId,
        agent: AgentId,
        since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Memory>> {
        let rows: Vec<MemoryRow> = sqlx::query_as(sql::MEMORIES_SINCE)
            .bind(agency.0)
            .bind(i64::from(agent.get()))
            .bind(since)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let sources = self.sources_of(row.id).await?;
            out.push(row.into_memory(sources)?);
        }
        Ok(out)
    }
}
