//! The schema, brought up to date when the database opens: sqlx's migrator, and between two of
//! its migrations what SQL cannot do (each agency's body, before 0028 drops what it is made
//! from).

use sqlx::migrate::Migrator;
use sqlx::{Connection, PgConnection};

use crate::shared::legacy_agencies::{self as legacy, OldAgency, OldAgent};
use crate::{Result, StoreError};

/// The schema's migrations, embedded.
pub(crate) static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// The migration that adds agencies' bodies; the program adds the column itself and writes
/// them first.
pub(crate) const AGENCY_BODY: i64 = 27;

/// Held while a process brings the schema up to date: sqlx's own lock covers one run of the
/// migrator, and the bodies are written between two.
const LOCK: i64 = 0x6167_656e_6379_0001;

/// Runs on `conn`, which it closes.
pub(super) async fn migrate(mut conn: PgConnection) -> Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(LOCK)
        .execute(&mut conn)
        .await
        .map_err(failed)?;
    let done = steps(&mut conn).await;
    // The lock is the session's: closing it releases the lock however the steps ended.
    let closed = conn.close().await.map_err(failed);
    done.and(closed)
}

async fn steps(conn: &mut PgConnection) -> Result<()> {
    let migrate = |e: sqlx::migrate::MigrateError| StoreError::Migrate(e.to_string());
    MIGRATOR
        .run_to(AGENCY_BODY - 1, &mut *conn)
        .await
        .map_err(migrate)?;
    write_agency_bodies(conn).await?;
    MIGRATOR.run(&mut *conn).await.map_err(migrate)
}

/// Each agency's body, from the columns and the `agents` table that 0028 drops: the column
/// added (0027's statement, which does nothing when it runs again) and every body written in
/// one transaction, so an agency that cannot be kept stops the upgrade before anything
/// changed. Once 0028 ran there is no `agents` table and nothing to do.
async fn write_agency_bodies(conn: &mut PgConnection) -> Result<()> {
    let mut tx = conn.begin().await.map_err(failed)?;
    let old: bool = sqlx::query_scalar("SELECT to_regclass('agents') IS NOT NULL")
        .fetch_one(&mut *tx)
        .await
        .map_err(failed)?;
    if !old {
        return Ok(());
    }
    sqlx::raw_sql(include_str!(
        "../../migrations/postgres/0027_agency_body.sql"
    ))
    .execute(&mut *tx)
    .await
    .map_err(failed)?;
    let agencies: Vec<OldAgency> = sqlx::query_as(legacy::OLD_AGENCIES)
        .fetch_all(&mut *tx)
        .await
        .map_err(failed)?;
    let agents: Vec<OldAgent> = sqlx::query_as(legacy::OLD_AGENTS)
        .fetch_all(&mut *tx)
        .await
        .map_err(failed)?;
    for (id, body) in legacy::bodies(agencies, agents)? {
        sqlx::query(legacy::SET_BODY)
            .bind(body)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
    }
    tx.commit().await.map_err(failed)
}

fn failed(e: sqlx::Error) -> StoreError {
    StoreError::Migrate(e.to_string())
}
