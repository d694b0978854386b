//! The memory store on PostgreSQL.

use agency_core::AgentId;
use agency_core::memory::{Memory, MemoryId};
use agency_core::plan::Plan;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{PostgresStore, unique_violation};
use crate::shared::memory::{self, ActionRow, MemoryRow, PlanRow, PlanRows, TaskRow, plan_of};
use crate::{MemoryStore, Result, StoreError};

impl PostgresStore {
    async fn sources_of(&self, id: uuid::Uuid) -> Result<Vec<uuid::Uuid>> {
        let rows: Vec<(uuid::Uuid,)> = sqlx::query_as(memory::SOURCES_OF)
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
        sqlx::query(memory::INSERT_MEMORY)
            .bind(row.id)
            .bind(row.agency_id)
            .bind(row.agent_id)
            .bind(&row.kind)
            .bind(&row.content)
            .bind(row.importance)
            .bind(row.created_at)
            .bind(row.conversation_id)
            .bind(row.turn_id)
            .execute(&mut *tx)
            .await?;
        for (position, source) in (0i64..).zip(&memory.sources) {
            sqlx::query(memory::INSERT_SOURCE)
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
        let row: Option<MemoryRow> = sqlx::query_as(memory::MEMORY_BY_ID)
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
        let rows: Vec<MemoryRow> = sqlx::query_as(memory::MEMORIES_SINCE)
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

    async fn memories_of_conversation(
        &self,
        conversation: agency_core::ConversationId,
    ) -> Result<Vec<Memory>> {
        let rows: Vec<MemoryRow> = sqlx::query_as(memory::MEMORIES_OF_CONVERSATION)
            .bind(conversation.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|row| row.into_memory(Vec::new()))
            .collect()
    }

    async fn save_plan(&self, plan: &Plan) -> Result<()> {
        let rows = PlanRows::of(plan);
        let p = &rows.plan;
        let mut tx = self.pool.begin().await?;
        let upsert = sqlx::query(memory::UPSERT_PLAN)
            .bind(p.id)
            .bind(p.agency_id)
            .bind(p.agent_id)
            .bind(p.reflection_id)
            .bind(&p.status)
            .bind(p.active)
            .bind(&rows.pddl)
            .bind(p.created_at)
            .bind(p.updated_at)
            .execute(&mut *tx)
            .await;
        match upsert {
            Err(e) if unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "agent #{} already has an active plan",
                    plan.agent.get()
                )));
            }
            other => other?,
        };
        sqlx::query(memory::DELETE_PLAN_ACTIONS)
            .bind(p.id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(memory::DELETE_PLAN_TASKS)
            .bind(p.id)
            .execute(&mut *tx)
            .await?;
        for (id, position, description, status) in &rows.tasks {
            sqlx::query(memory::INSERT_PLAN_TASK)
                .bind(id)
                .bind(p.id)
                .bind(position)
                .bind(description)
                .bind(status)
                .execute(&mut *tx)
                .await?;
        }
        for (task, position, name, parameters) in &rows.actions {
            sqlx::query(memory::INSERT_PLAN_ACTION)
                .bind(task)
                .bind(position)
                .bind(name)
                .bind(parameters)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn active_plan(
        &self,
        agency: agency_core::AgencyId,
        agent: AgentId,
    ) -> Result<Option<Plan>> {
        let row: Option<PlanRow> = sqlx::query_as(memory::ACTIVE_PLAN)
            .bind(agency.0)
            .bind(i64::from(agent.get()))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let tasks: Vec<TaskRow> = sqlx::query_as(memory::PLAN_TASKS)
            .bind(row.id)
            .fetch_all(&self.pool)
            .await?;
        let actions: Vec<ActionRow> = sqlx::query_as(memory::PLAN_ACTIONS)
            .bind(row.id)
            .fetch_all(&self.pool)
            .await?;
        plan_of(row, tasks, actions).map(Some)
    }
}
