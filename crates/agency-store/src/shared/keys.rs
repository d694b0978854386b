//! API keys, stored as keyed hashes, and the conversations their transcripts continue: the
//! SQL and the rows.

use agency_core::AgencyId;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::u32_of;
use crate::StoreError;

macro_rules! api_key_columns {
    () => {
        "id, agency_id, name, prefix, hash, rate_limit_per_minute, created_at, expires_at, last_used_at, revoked_at, budget_usd, user_budget_usd, budget_period"
    };
}
pub(crate) const INSERT_API_KEY: &str = concat!(
    "INSERT INTO api_keys (",
    api_key_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
);
pub(crate) const API_KEY_BY_HASH: &str = concat!(
    "SELECT ",
    api_key_columns!(),
    " FROM api_keys WHERE hash = $1"
);
pub(crate) const API_KEYS_OF_AGENCY: &str = concat!(
    "SELECT ",
    api_key_columns!(),
    " FROM api_keys WHERE agency_id = $1 ORDER BY created_at, name"
);
pub(crate) const REVOKE_API_KEY: &str =
    "UPDATE api_keys SET revoked_at = $1 WHERE agency_id = $2 AND name = $3 AND revoked_at IS NULL";
pub(crate) const SET_API_KEY_BUDGETS: &str = "UPDATE api_keys SET budget_usd = $1, user_budget_usd = $2, budget_period = $3 WHERE agency_id = $4 AND name = $5 AND revoked_at IS NULL";
pub(crate) const TOUCH_API_KEY: &str = "UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)";
/// The columns of a [`crate::ThreadMatch`]; the hashes' condition follows.
macro_rules! api_threads {
    () => {
        "SELECT t.hash, t.conversation_id, CAST(t.turn_number AS BIGINT), \
         CAST((SELECT COALESCE(MAX(number), 0) FROM turns \
               WHERE conversation_id = t.conversation_id) AS BIGINT) \
         FROM api_threads t WHERE t.key_id = $1 AND "
    };
}
/// SQLite: followed by `t.hash IN (?, …)`, one placeholder a hash.
pub(crate) const API_THREADS: &str = api_threads!();
/// PostgreSQL: the hashes as one array.
pub(crate) const API_THREADS_ANY: &str = concat!(api_threads!(), "t.hash = ANY($2)");

pub(crate) const INSERT_API_RESPONSE: &str = "INSERT INTO api_responses \
     (id, agency_id, conversation_id, turn_number, created_at, body, input) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
pub(crate) const API_RESPONSE: &str = "SELECT id, agency_id, conversation_id, \
     CAST(turn_number AS BIGINT), created_at, body, input \
     FROM api_responses WHERE agency_id = $1 AND id = $2";
pub(crate) const DELETE_API_RESPONSE: &str =
    "DELETE FROM api_responses WHERE agency_id = $1 AND id = $2";

/// A row of [`API_RESPONSE`].
pub(crate) type ApiResponseRow = (String, Uuid, Uuid, i64, DateTime<Utc>, String, String);

pub(crate) fn api_response(
    (id, agency, conversation, turn, created_at, body, input): ApiResponseRow,
) -> crate::ApiResponse {
    crate::ApiResponse {
        id,
        agency: agency_core::AgencyId(agency),
        conversation: agency_core::ConversationId(conversation),
        turn: u32::try_from(turn).unwrap_or(0),
        created_at,
        body,
        input,
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ApiKeyRow {
    pub id: Uuid,
    pub agency_id: Uuid,
    pub name: String,
    pub prefix: String,
    pub hash: String,
    pub rate_limit_per_minute: i64,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub budget_usd: Option<i64>,
    pub user_budget_usd: Option<i64>,
    pub budget_period: String,
}

/// A key's budgets as their columns (`budget_usd`, `user_budget_usd`, `budget_period`).
pub(crate) fn budget_columns(
    b: &agency_core::KeyBudgets,
) -> (Option<i64>, Option<i64>, &'static str) {
    let micro = |v: Option<u64>| v.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
    (micro(b.usd), micro(b.user_usd), b.period.as_str())
}

impl TryFrom<ApiKeyRow> for agency_core::ApiKey {
    type Error = StoreError;
    fn try_from(r: ApiKeyRow) -> Result<Self, StoreError> {
        Ok(agency_core::ApiKey {
            id: r.id,
            agency_id: AgencyId(r.agency_id),
            name: r.name,
            prefix: r.prefix,
            hash: r.hash,
            rate_limit_per_minute: u32_of(r.rate_limit_per_minute, "rate_limit_per_minute")?,
            created_at: r.created_at,
            expires_at: r.expires_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
            budgets: agency_core::KeyBudgets {
                usd: r.budget_usd.and_then(|v| u64::try_from(v).ok()),
                user_usd: r.user_budget_usd.and_then(|v| u64::try_from(v).ok()),
                period: agency_core::Period::parse(&r.budget_period).ok_or_else(|| {
                    StoreError::Corrupt(format!("budget_period `{}`", r.budget_period))
                })?,
            },
        })
    }
}

pub(crate) fn key_name_taken(key: &agency_core::ApiKey) -> StoreError {
    StoreError::Conflict(format!(
        "the agency already has a key named `{}`; revoke it or choose another name",
        key.name
    ))
}

/// A row of [`API_THREADS`].
pub(crate) fn thread_match(
    (hash, conversation, turn, last_turn): (String, Uuid, i64, i64),
) -> crate::ThreadMatch {
    crate::ThreadMatch {
        hash,
        conversation: agency_core::ConversationId(conversation),
        turn: u32::try_from(turn).unwrap_or(0),
        last_turn: u32::try_from(last_turn).unwrap_or(0),
    }
}
