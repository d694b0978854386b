//! A2A tasks on PostgreSQL.

use agency_core::AgencyId;
use async_trait::async_trait;

use super::PostgresStore;
use crate::shared::tasks::{self, TaskRow};
use crate::{Result, StoredTask, TaskFilter, TaskStore};

#[async_trait]
impl TaskStore for PostgresStore {
    async fn put_task(&self, t: &StoredTask) -> Result<()> {
        sqlx::query(tasks::INSERT_TASK)
            .bind(t.id)
            .bind(t.agency.0)
            .bind(t.conversation.0)
            .bind(&t.state)
            .bind(t.ended)
            .bind(t.turn.map(i64::from))
            .bind(&t.message_id)
            .bind(&t.request)
            .bind(&t.answer)
            .bind(&t.note)
            .bind(t.created_at)
            .bind(t.updated_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn update_task(&self, t: &StoredTask) -> Result<bool> {
        let done = sqlx::query(tasks::UPDATE_TASK)
            .bind(&t.state)
            .bind(t.ended)
            .bind(t.turn.map(i64::from))
            .bind(&t.answer)
            .bind(&t.note)
            .bind(t.updated_at)
            .bind(t.id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn task(&self, agency: AgencyId, id: uuid::Uuid) -> Result<Option<StoredTask>> {
        let row: Option<TaskRow> = sqlx::query_as(tasks::TASK)
            .bind(agency.0)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(tasks::task))
    }

    async fn tasks(&self, agency: AgencyId, filter: &TaskFilter) -> Result<(Vec<StoredTask>, u64)> {
        let conversation = filter.conversation.map(|c| c.0);
        let rows: Vec<TaskRow> = sqlx::query_as(tasks::TASKS)
            .bind(agency.0)
            .bind(conversation)
            .bind(&filter.state)
            .bind(i64::from(filter.limit))
            .bind(i64::from(filter.offset))
            .fetch_all(&self.pool)
            .await?;
        let total: i64 = sqlx::query_scalar(tasks::COUNT_TASKS)
            .bind(agency.0)
            .bind(conversation)
            .bind(&filter.state)
            .fetch_one(&self.pool)
            .await?;
        Ok((
            rows.into_iter().map(tasks::task).collect(),
            u64::try_from(total).unwrap_or(0),
        ))
    }
}
