//! The schema, brought up to date when the database opens.

use rusqlite::{Connection, TransactionBehavior};

use crate::{Result, StoreError};

/// Schema versions, applied in order; `PRAGMA user_version` records how many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_init.sql"),
    include_str!("../../migrations/sqlite/0002_memory.sql"),
    include_str!("../../migrations/sqlite/0003_plans.sql"),
    include_str!("../../migrations/sqlite/0004_accounts.sql"),
    include_str!("../../migrations/sqlite/0005_rooms.sql"),
    include_str!("../../migrations/sqlite/0006_bots.sql"),
    include_str!("../../migrations/sqlite/0007_definitions.sql"),
    include_str!("../../migrations/sqlite/0008_turn_cost.sql"),
    include_str!("../../migrations/sqlite/0009_api_threads_conversation.sql"),
    include_str!("../../migrations/sqlite/0010_room_answering.sql"),
    include_str!("../../migrations/sqlite/0011_tools.sql"),
    include_str!("../../migrations/sqlite/0012_room_tools.sql"),
    include_str!("../../migrations/sqlite/0013_api_thread_turns.sql"),
    include_str!("../../migrations/sqlite/0014_api_responses.sql"),
    include_str!("../../migrations/sqlite/0015_message_images.sql"),
    include_str!("../../migrations/sqlite/0016_processes.sql"),
    include_str!("../../migrations/sqlite/0017_login_failures.sql"),
    include_str!("../../migrations/sqlite/0018_spend.sql"),
    include_str!("../../migrations/sqlite/0019_a2a_tasks.sql"),
    include_str!("../../migrations/sqlite/0020_turn_face.sql"),
    include_str!("../../migrations/sqlite/0021_approvals.sql"),
    include_str!("../../migrations/sqlite/0022_leaner_messages.sql"),
    include_str!("../../migrations/sqlite/0023_approval_webhooks.sql"),
    include_str!("../../migrations/sqlite/0024_memory_origin.sql"),
    include_str!("../../migrations/sqlite/0027_api_thread_twins.sql"),
];

pub(super) fn migrate(conn: &mut Connection) -> Result<()> {
    let err = |e: rusqlite::Error| StoreError::Migrate(e.to_string());
    // Take the write lock before reading the version: processes starting together on a new
    // database wait for each other instead of both creating the tables.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let done: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    let done = usize::try_from(done).unwrap_or(usize::MAX);
    if done > MIGRATIONS.len() {
        return Err(StoreError::Migrate(format!(
            "the database is at schema version {done}, newer than this program knows ({}): upgrade agency",
            MIGRATIONS.len()
        )));
    }
    for migration in &MIGRATIONS[done..] {
        tx.execute_batch(migration).map_err(err)?;
    }
    let version = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
    tx.pragma_update(None, "user_version", version)
        .map_err(err)?;
    tx.commit().map_err(err)
}
