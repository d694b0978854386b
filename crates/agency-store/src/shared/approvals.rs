//! Approvals (issue 36): the SQL, and the row.

use agency_core::{
    AgencyId, Approval, ApprovalId, ApprovalState, ConversationId, MessageId, OnTimeout, ToolCall,
    TurnId,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{agent_id, corrupt};
use crate::StoreError;

macro_rules! columns {
    () => {
        "SELECT id, agency_id, conversation_id, turn_id, agent_id, reply_id, call_id, tool, \
         arguments, asked_at, expires_at, on_timeout, edits, state, answered_by, answered_at, \
         reason, started_at, result, result_is_error FROM approvals "
    };
}

pub(crate) const INSERT: &str = "INSERT INTO approvals (id, agency_id, conversation_id, turn_id, \
     agent_id, reply_id, call_id, tool, arguments, asked_at, expires_at, on_timeout, edits, \
     state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending')";

pub(crate) const SELECT_ONE: &str = concat!(columns!(), "WHERE id = $1");

pub(crate) const SELECT_TURN: &str =
    concat!(columns!(), "WHERE turn_id = $1 ORDER BY asked_at, id");

/// The pending approvals of the agencies `$1` owns, oldest first.
pub(crate) const SELECT_PENDING: &str = concat!(
    columns!(),
    "WHERE state = 'pending' AND agency_id IN (SELECT id FROM agencies WHERE owner = $1) \
     ORDER BY asked_at, id"
);

/// The first answer wins: only a pending row changes. `$5` new arguments, or null.
pub(crate) const ANSWER: &str = "UPDATE approvals SET state = $1, answered_by = $2, \
     answered_at = $3, reason = $4, arguments = COALESCE($5, arguments) \
     WHERE id = $6 AND state = 'pending'";

/// An approved call goes out once: only the first to mark it started runs it.
pub(crate) const START: &str = "UPDATE approvals SET started_at = $1 \
     WHERE id = $2 AND state = 'approved' AND started_at IS NULL";

pub(crate) const FINISH: &str = "UPDATE approvals SET result = $1, result_is_error = $2 \
     WHERE id = $3 AND result IS NULL";

#[derive(sqlx::FromRow)]
pub(crate) struct ApprovalRow {
    pub id: Uuid,
    pub agency_id: Uuid,
    pub conversation_id: Uuid,
    pub turn_id: Uuid,
    pub agent_id: i64,
    pub reply_id: Uuid,
    pub call_id: String,
    pub tool: String,
    pub arguments: String,
    pub asked_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub on_timeout: String,
    pub edits: bool,
    pub state: String,
    pub answered_by: Option<String>,
    pub answered_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub result: Option<String>,
    pub result_is_error: Option<bool>,
}

impl TryFrom<ApprovalRow> for Approval {
    type Error = StoreError;
    fn try_from(r: ApprovalRow) -> Result<Self, StoreError> {
        Ok(Approval {
            id: ApprovalId(r.id),
            agency: AgencyId(r.agency_id),
            conversation: ConversationId(r.conversation_id),
            turn: TurnId(r.turn_id),
            agent: agent_id(r.agent_id)?,
            reply: MessageId(r.reply_id),
            call: ToolCall {
                id: r.call_id,
                name: r.tool,
                arguments: r.arguments,
            },
            asked_at: r.asked_at,
            expires_at: r.expires_at,
            on_timeout: OnTimeout::parse(&r.on_timeout).ok_or_else(|| corrupt(&r.on_timeout))?,
            edits: r.edits,
            state: ApprovalState::parse(&r.state).ok_or_else(|| corrupt(&r.state))?,
            answered_by: r.answered_by,
            answered_at: r.answered_at,
            reason: r.reason,
            started_at: r.started_at,
            result: r.result.map(|t| (t, r.result_is_error.unwrap_or(false))),
        })
    }
}

/// An agency's approval webhook: `agency_id`, `id`, `url`, `created_at` (written anew).
pub(crate) const PUT_WEBHOOK: &str = "INSERT INTO approval_webhooks (agency_id, id, url, created_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (agency_id) DO UPDATE SET id = excluded.id, \
     url = excluded.url, created_at = excluded.created_at";
pub(crate) const SELECT_WEBHOOK: &str =
    "SELECT id, url, created_at FROM approval_webhooks WHERE agency_id = $1";
pub(crate) const DELETE_WEBHOOK: &str = "DELETE FROM approval_webhooks WHERE agency_id = $1";
