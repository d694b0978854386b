//! A2A tasks on SQLite.

use agency_core::AgencyId;
use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use crate::shared::tasks::{self, TaskRow};
use crate::{Result, StoredTask, TaskFilter, TaskStore};

fn row(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
        r.get(11)?,
    ))
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn put_task(&self, t: &StoredTask) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(tasks::INSERT_TASK)?.execute(params![
                t.id,
                t.agency.0,
                t.conversation.0,
                t.state,
                t.ended,
                t.turn.map(i64::from),
                t.message_id,
                t.request,
                t.answer,
                t.note,
                t.created_at,
                t.updated_at
            ])
        })
        .map(|_| ())
    }

    async fn update_task(&self, t: &StoredTask) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(tasks::UPDATE_TASK)?.execute(params![
                t.state,
                t.ended,
                t.turn.map(i64::from),
                t.answer,
                t.note,
                t.updated_at,
                t.id
            ])
        })?;
        Ok(n > 0)
    }

    async fn task(&self, agency: AgencyId, id: uuid::Uuid) -> Result<Option<StoredTask>> {
        let found = self.with(|conn| {
            conn.prepare_cached(tasks::TASK)?
                .query_row(params![agency.0, id], row)
                .optional()
        })?;
        Ok(found.map(tasks::task))
    }

    async fn tasks(&self, agency: AgencyId, filter: &TaskFilter) -> Result<(Vec<StoredTask>, u64)> {
        let conversation = filter.conversation.map(|c| c.0);
        self.with(|conn| {
            let found = conn
                .prepare_cached(tasks::TASKS)?
                .query_map(
                    params![
                        agency.0,
                        conversation,
                        filter.state,
                        i64::from(filter.limit),
                        i64::from(filter.offset)
                    ],
                    row,
                )?
                .map(|r| r.map(tasks::task))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let total: i64 = conn
                .prepare_cached(tasks::COUNT_TASKS)?
                .query_row(params![agency.0, conversation, filter.state], |r| r.get(0))?;
            Ok((found, u64::try_from(total).unwrap_or(0)))
        })
    }
}
