//! Approvals on PostgreSQL.

use agency_core::approval::Answer;
use agency_core::{AgencyId, Approval, ApprovalId, ApprovalWebhook, TurnId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PostgresStore;
use crate::shared::approvals::{self as sql, ApprovalRow};
use crate::{ApprovalStore, Result};

fn all(rows: Vec<ApprovalRow>) -> Result<Vec<Approval>> {
    rows.into_iter().map(Approval::try_from).collect()
}

#[async_trait]
impl ApprovalStore for PostgresStore {
    async fn put_approval(&self, a: &Approval) -> Result<()> {
        sqlx::query(sql::INSERT)
            .bind(a.id.0)
            .bind(a.agency.0)
            .bind(a.conversation.0)
            .bind(a.turn.0)
            .bind(i64::from(a.agent.get()))
            .bind(a.reply.0)
            .bind(&a.call.id)
            .bind(&a.call.name)
            .bind(&a.call.arguments)
            .bind(a.asked_at)
            .bind(a.expires_at)
            .bind(a.on_timeout.as_str())
            .bind(a.edits)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn approval(&self, id: ApprovalId) -> Result<Option<Approval>> {
        let row: Option<ApprovalRow> = sqlx::query_as(sql::SELECT_ONE)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(Approval::try_from).transpose()
    }

    async fn turn_approvals(&self, turn: TurnId) -> Result<Vec<Approval>> {
        let rows: Vec<ApprovalRow> = sqlx::query_as(sql::SELECT_TURN)
            .bind(turn.0)
            .fetch_all(&self.pool)
            .await?;
        all(rows)
    }

    async fn pending_approvals(&self, owner: &str) -> Result<Vec<Approval>> {
        let rows: Vec<ApprovalRow> = sqlx::query_as(sql::SELECT_PENDING)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        all(rows)
    }

    async fn answer_approval(
        &self,
        id: ApprovalId,
        answer: &Answer,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let state = answer.state();
        let done = sqlx::query(sql::ANSWER)
            .bind(state.as_str())
            .bind(&answer.by)
            .bind(at)
            .bind(&answer.reason)
            .bind(&answer.arguments)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn start_approved(&self, id: ApprovalId, at: DateTime<Utc>) -> Result<bool> {
        let done = sqlx::query(sql::START)
            .bind(at)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn finish_approved(&self, id: ApprovalId, result: &str, is_error: bool) -> Result<()> {
        sqlx::query(sql::FINISH)
            .bind(result)
            .bind(is_error)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn put_approval_webhook(&self, hook: &ApprovalWebhook) -> Result<()> {
        sqlx::query(sql::PUT_WEBHOOK)
            .bind(hook.agency.0)
            .bind(hook.id)
            .bind(&hook.url)
            .bind(hook.created_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn approval_webhook(&self, agency: AgencyId) -> Result<Option<ApprovalWebhook>> {
        let row: Option<(uuid::Uuid, String, DateTime<Utc>)> = sqlx::query_as(sql::SELECT_WEBHOOK)
            .bind(agency.0)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|(id, url, created_at)| ApprovalWebhook {
            agency,
            id,
            url,
            created_at,
        }))
    }

    async fn delete_approval_webhook(&self, agency: AgencyId) -> Result<bool> {
        let done = sqlx::query(sql::DELETE_WEBHOOK)
            .bind(agency.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
