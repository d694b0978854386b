//! The schema, brought up to date when the database opens.

use rusqlite::{Connection, Row, Transaction, TransactionBehavior};

use crate::shared::legacy_agencies::{self as legacy, OldAgency, OldAgent};
use crate::{Result, StoreError};

/// One schema version: its SQL, then, for a few, what the program does that SQL cannot.
pub(crate) struct Migration {
    sql: &'static str,
    then: Option<fn(&Transaction<'_>) -> Result<()>>,
}

const fn sql(sql: &'static str) -> Migration {
    Migration { sql, then: None }
}

/// Schema versions, applied in order; `PRAGMA user_version` records how many ran.
pub(crate) const MIGRATIONS: &[Migration] = &[
    sql(include_str!("../../migrations/sqlite/0001_init.sql")),
    sql(include_str!("../../migrations/sqlite/0002_memory.sql")),
    sql(include_str!("../../migrations/sqlite/0003_plans.sql")),
    sql(include_str!("../../migrations/sqlite/0004_accounts.sql")),
    sql(include_str!("../../migrations/sqlite/0005_rooms.sql")),
    sql(include_str!("../../migrations/sqlite/0006_bots.sql")),
    sql(include_str!("../../migrations/sqlite/0007_definitions.sql")),
    sql(include_str!("../../migrations/sqlite/0008_turn_cost.sql")),
    sql(include_str!(
        "../../migrations/sqlite/0009_api_threads_conversation.sql"
    )),
    sql(include_str!(
        "../../migrations/sqlite/0010_room_answering.sql"
    )),
    sql(include_str!("../../migrations/sqlite/0011_tools.sql")),
    sql(include_str!("../../migrations/sqlite/0012_room_tools.sql")),
    sql(include_str!(
        "../../migrations/sqlite/0013_api_thread_turns.sql"
    )),
    sql(include_str!(
        "../../migrations/sqlite/0014_api_responses.sql"
    )),
    sql(include_str!(
        "../../migrations/sqlite/0015_message_images.sql"
    )),
    sql(include_str!("../../migrations/sqlite/0016_processes.sql")),
    sql(include_str!(
        "../../migrations/sqlite/0017_login_failures.sql"
    )),
    sql(include_str!("../../migrations/sqlite/0018_spend.sql")),
    sql(include_str!("../../migrations/sqlite/0019_a2a_tasks.sql")),
    sql(include_str!("../../migrations/sqlite/0020_turn_face.sql")),
    sql(include_str!("../../migrations/sqlite/0021_approvals.sql")),
    sql(include_str!(
        "../../migrations/sqlite/0022_leaner_messages.sql"
    )),
    sql(include_str!(
        "../../migrations/sqlite/0023_approval_webhooks.sql"
    )),
    sql(include_str!(
        "../../migrations/sqlite/0024_memory_origin.sql"
    )),
    Migration {
        sql: include_str!("../../migrations/sqlite/0025_agency_body.sql"),
        then: Some(write_agency_bodies),
    },
    sql(include_str!(
        "../../migrations/sqlite/0026_agency_body_only.sql"
    )),
];

pub(super) fn migrate(conn: &mut Connection) -> Result<()> {
    migrate_to(conn, MIGRATIONS.len())
}

/// The schema up to version `target` (tests start from an older one).
pub(crate) fn migrate_to(conn: &mut Connection, target: usize) -> Result<()> {
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
    let target = target.clamp(done, MIGRATIONS.len());
    for migration in &MIGRATIONS[done..target] {
        tx.execute_batch(migration.sql).map_err(err)?;
        if let Some(then) = migration.then {
            then(&tx)?;
        }
    }
    let version = i64::try_from(target).unwrap_or(i64::MAX);
    tx.pragma_update(None, "user_version", version)
        .map_err(err)?;
    tx.commit().map_err(err)
}

/// Each agency's body (0025), from the columns and the `agents` table that 0026 drops.
fn write_agency_bodies(tx: &Transaction<'_>) -> Result<()> {
    let err = |e: rusqlite::Error| StoreError::Migrate(format!("agencies' bodies: {e}"));
    let agencies = tx
        .prepare(legacy::OLD_AGENCIES)
        .and_then(|mut s| {
            s.query_map([], old_agency)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(err)?;
    let agents = tx
        .prepare(legacy::OLD_AGENTS)
        .and_then(|mut s| {
            s.query_map([], old_agent)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(err)?;
    let mut set = tx.prepare(legacy::SET_BODY).map_err(err)?;
    for (id, body) in legacy::bodies(agencies, agents)? {
        set.execute(rusqlite::params![body, id]).map_err(err)?;
    }
    Ok(())
}

fn old_agency(r: &Row<'_>) -> rusqlite::Result<OldAgency> {
    Ok(OldAgency {
        id: r.get("id")?,
        owner: r.get("owner")?,
        name: r.get("name")?,
        handle: r.get("handle")?,
        protocol: r.get("protocol")?,
        manager: r.get("manager")?,
        max_hops: r.get("max_hops")?,
        deadline_ms: r.get("deadline_ms")?,
        providers: r.get("providers")?,
        mcp_servers: r.get("mcp_servers")?,
        budget_usd: r.get("budget_usd")?,
        budget_period: r.get("budget_period")?,
        max_turn_cost_usd: r.get("max_turn_cost_usd")?,
    })
}

fn old_agent(r: &Row<'_>) -> rusqlite::Result<OldAgent> {
    Ok(OldAgent {
        agency_id: r.get("agency_id")?,
        id: r.get("id")?,
        name: r.get("name")?,
        handle: r.get("handle")?,
        role: r.get("role")?,
        model: r.get("model")?,
        sampling: r.get("sampling")?,
        blocks: r.get("blocks")?,
    })
}
