//! The memory store on SQLite.

use agency_core::AgentId;
use agency_core::memory::{Memory, MemoryId};
use agency_core::plan::Plan;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};

use super::{SqliteStore, unique_violation};
use crate::shared::memory::{self, ActionRow, MemoryRow, PlanRow, PlanRows, TaskRow, plan_of};
use crate::{MemoryStore, Result, StoreError};

fn sources(conn: &rusqlite::Connection, id: uuid::Uuid) -> rusqlite::Result<Vec<uuid::Uuid>> {
    conn.prepare_cached(memory::SOURCES_OF)?
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
                memory::INSERT_MEMORY,
                params![
                    row.id,
                    row.agency_id,
                    row.agent_id,
                    row.kind,
                    row.content,
                    row.importance,
                    row.created_at,
                    row.conversation_id,
                    row.turn_id
                ],
            )?;
            for (position, source) in (0i64..).zip(&memory.sources) {
                tx.execute(memory::INSERT_SOURCE, params![row.id, source.0, position])?;
            }
            tx.commit()
        })
    }

    async fn memory(&self, id: MemoryId) -> Result<Option<Memory>> {
        let found = self.with(|conn| {
            let row = conn
                .prepare_cached(memory::MEMORY_BY_ID)?
                .query_row([id.0], memory_row)
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
                .prepare_cached(memory::MEMORIES_SINCE)?
                .query_map(
                    params![agency.0, i64::from(agent.get()), since, i64::from(limit)],
                    memory_row,
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

    async fn memories_of_conversation(
        &self,
        conversation: agency_core::ConversationId,
    ) -> Result<Vec<Memory>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(memory::MEMORIES_OF_CONVERSATION)?
                .query_map([conversation.0], memory_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|row| row.into_memory(Vec::new()))
            .collect()
    }

    async fn save_plan(&self, plan: &Plan) -> Result<()> {
        let rows = PlanRows::of(plan);
        let p = &rows.plan;
        let saved = self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                memory::UPSERT_PLAN,
                params![
                    p.id,
                    p.agency_id,
                    p.agent_id,
                    p.reflection_id,
                    p.status,
                    p.active,
                    rows.pddl,
                    p.created_at,
                    p.updated_at
                ],
            )?;
            tx.execute(memory::DELETE_PLAN_ACTIONS, [p.id])?;
            tx.execute(memory::DELETE_PLAN_TASKS, [p.id])?;
            for (id, position, description, status) in &rows.tasks {
                tx.execute(
                    memory::INSERT_PLAN_TASK,
                    params![id, p.id, position, description, status],
                )?;
            }
            for (task, position, name, parameters) in &rows.actions {
                tx.execute(
                    memory::INSERT_PLAN_ACTION,
                    params![task, position, name, parameters],
                )?;
            }
            tx.commit()
        });
        match saved {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(StoreError::Conflict(
                format!("agent #{} already has an active plan", plan.agent.get()),
            )),
            other => other,
        }
    }

    async fn active_plan(
        &self,
        agency: agency_core::AgencyId,
        agent: AgentId,
    ) -> Result<Option<Plan>> {
        let found = self.with(|conn| {
            let row = conn
                .prepare_cached(memory::ACTIVE_PLAN)?
                .query_row(params![agency.0, i64::from(agent.get())], plan_row)
                .optional()?;
            let Some(row) = row else {
                return Ok(None);
            };
            let tasks = conn
                .prepare_cached(memory::PLAN_TASKS)?
                .query_map([row.id], task_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let actions = conn
                .prepare_cached(memory::PLAN_ACTIONS)?
                .query_map([row.id], action_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Some((row, tasks, actions)))
        })?;
        found
            .map(|(row, tasks, actions)| plan_of(row, tasks, actions))
            .transpose()
    }
}

fn memory_row(r: &Row<'_>) -> rusqlite::Result<MemoryRow> {
    Ok(MemoryRow {
        id: r.get(0)?,
        agency_id: r.get(1)?,
        agent_id: r.get(2)?,
        kind: r.get(3)?,
        content: r.get(4)?,
        importance: r.get(5)?,
        created_at: r.get(6)?,
        conversation_id: r.get(7)?,
        turn_id: r.get(8)?,
    })
}

fn plan_row(r: &Row<'_>) -> rusqlite::Result<PlanRow> {
    Ok(PlanRow {
        id: r.get(0)?,
        agency_id: r.get(1)?,
        agent_id: r.get(2)?,
        reflection_id: r.get(3)?,
        status: r.get(4)?,
        active: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

fn task_row(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        id: r.get(0)?,
        description: r.get(1)?,
        status: r.get(2)?,
    })
}

fn action_row(r: &Row<'_>) -> rusqlite::Result<ActionRow> {
    Ok(ActionRow {
        task_id: r.get(0)?,
        name: r.get(1)?,
        parameters: r.get(2)?,
    })
}
