//! Approvals on SQLite.

use agency_core::approval::Answer;
use agency_core::{AgencyId, Approval, ApprovalId, ApprovalWebhook, TurnId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use crate::shared::approvals::{self as sql, ApprovalRow};
use crate::{ApprovalStore, Result};

fn row(r: &Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok(ApprovalRow {
        id: r.get(0)?,
        agency_id: r.get(1)?,
        conversation_id: r.get(2)?,
        turn_id: r.get(3)?,
        agent_id: r.get(4)?,
        reply_id: r.get(5)?,
        call_id: r.get(6)?,
        tool: r.get(7)?,
        arguments: r.get(8)?,
        asked_at: r.get(9)?,
        expires_at: r.get(10)?,
        on_timeout: r.get(11)?,
        edits: r.get(12)?,
        state: r.get(13)?,
        answered_by: r.get(14)?,
        answered_at: r.get(15)?,
        reason: r.get(16)?,
        started_at: r.get(17)?,
        result: r.get(18)?,
        result_is_error: r.get(19)?,
    })
}

fn all(rows: Vec<ApprovalRow>) -> Result<Vec<Approval>> {
    rows.into_iter().map(Approval::try_from).collect()
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn put_approval(&self, a: &Approval) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(sql::INSERT)?.execute(params![
                a.id.0,
                a.agency.0,
                a.conversation.0,
                a.turn.0,
                i64::from(a.agent.get()),
                a.reply.0,
                a.call.id,
                a.call.name,
                a.call.arguments,
                a.asked_at,
                a.expires_at,
                a.on_timeout.as_str(),
                a.edits
            ])
        })
        .map(|_| ())
    }

    async fn approval(&self, id: ApprovalId) -> Result<Option<Approval>> {
        let found = self.with(|conn| {
            conn.prepare_cached(sql::SELECT_ONE)?
                .query_row(params![id.0], row)
                .optional()
        })?;
        found.map(Approval::try_from).transpose()
    }

    async fn turn_approvals(&self, turn: TurnId) -> Result<Vec<Approval>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(sql::SELECT_TURN)?
                .query_map(params![turn.0], row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        all(rows)
    }

    async fn pending_approvals(&self, owner: &str) -> Result<Vec<Approval>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(sql::SELECT_PENDING)?
                .query_map(params![owner], row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        all(rows)
    }

    async fn answer_approval(
        &self,
        id: ApprovalId,
        answer: &Answer,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let state = answer.state();
        let n = self.with(|conn| {
            conn.prepare_cached(sql::ANSWER)?.execute(params![
                state.as_str(),
                answer.by,
                at,
                answer.reason,
                answer.arguments,
                id.0
            ])
        })?;
        Ok(n > 0)
    }

    async fn start_approved(&self, id: ApprovalId, at: DateTime<Utc>) -> Result<bool> {
        let n = self.with(|conn| conn.prepare_cached(sql::START)?.execute(params![at, id.0]))?;
        Ok(n > 0)
    }

    async fn finish_approved(&self, id: ApprovalId, result: &str, is_error: bool) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(sql::FINISH)?
                .execute(params![result, is_error, id.0])
        })
        .map(|_| ())
    }

    async fn put_approval_webhook(&self, hook: &ApprovalWebhook) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(sql::PUT_WEBHOOK)?.execute(params![
                hook.agency.0,
                hook.id,
                hook.url,
                hook.created_at
            ])
        })
        .map(|_| ())
    }

    async fn approval_webhook(&self, agency: AgencyId) -> Result<Option<ApprovalWebhook>> {
        self.with(|conn| {
            conn.prepare_cached(sql::SELECT_WEBHOOK)?
                .query_row(params![agency.0], |r| {
                    Ok(ApprovalWebhook {
                        agency,
                        id: r.get(0)?,
                        url: r.get(1)?,
                        created_at: r.get(2)?,
                    })
                })
                .optional()
        })
    }

    async fn delete_approval_webhook(&self, agency: AgencyId) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(sql::DELETE_WEBHOOK)?
                .execute(params![agency.0])
        })?;
        Ok(n > 0)
    }
}
