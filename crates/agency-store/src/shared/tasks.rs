//! A2A tasks: the SQL.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::StoredTask;

pub(crate) const INSERT_TASK: &str = "INSERT INTO a2a_tasks \
     (id, agency_id, conversation_id, state, ended, turn_number, message_id, request, answer, \
     note, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
/// (SQLite numbers `$N` parameters in the order they first appear: they are written in order.)
pub(crate) const UPDATE_TASK: &str = "UPDATE a2a_tasks SET state = $1, ended = $2, \
     turn_number = $3, answer = $4, note = $5, updated_at = $6 WHERE id = $7 AND NOT ended";
pub(crate) const TASK: &str = "SELECT id, agency_id, conversation_id, state, ended, \
     CAST(turn_number AS BIGINT), message_id, request, answer, note, created_at, updated_at \
     FROM a2a_tasks WHERE agency_id = $1 AND id = $2";
/// `$2` a conversation or null, `$3` a state or null; `$4` the limit, `$5` the offset.
pub(crate) const TASKS: &str = "SELECT id, agency_id, conversation_id, state, ended, \
     CAST(turn_number AS BIGINT), message_id, request, answer, note, created_at, updated_at \
     FROM a2a_tasks WHERE agency_id = $1 AND ($2 IS NULL OR conversation_id = $2) \
     AND ($3 IS NULL OR state = $3) \
     ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5";
pub(crate) const COUNT_TASKS: &str = "SELECT COUNT(*) FROM a2a_tasks \
     WHERE agency_id = $1 AND ($2 IS NULL OR conversation_id = $2) \
     AND ($3 IS NULL OR state = $3)";

/// A row of the task queries.
pub(crate) type TaskRow = (
    Uuid,
    Uuid,
    Uuid,
    String,
    bool,
    Option<i64>,
    String,
    String,
    String,
    String,
    DateTime<Utc>,
    DateTime<Utc>,
);

pub(crate) fn task(
    (
        id,
        agency,
        conversation,
        state,
        ended,
        turn,
        message_id,
        request,
        answer,
        note,
        created_at,
        updated_at,
    ): TaskRow,
) -> StoredTask {
    StoredTask {
        id,
        agency: agency_core::AgencyId(agency),
        conversation: agency_core::ConversationId(conversation),
        state,
        ended,
        turn: turn.and_then(|t| u32::try_from(t).ok()),
        message_id,
        request,
        answer,
        note,
        created_at,
        updated_at,
    }
}
