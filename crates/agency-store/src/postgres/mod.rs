//! PostgreSQL, through sqlx: for more than one machine.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

use crate::{Result, StoreError, redact};

mod accounts;
mod agencies;
mod conversations;
mod keys;
mod memory;
mod rooms;
mod secrets;
mod settings;

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    pub async fn open(url: &str) -> Result<Self> {
        let open_err = |source: sqlx::Error| StoreError::Open {
            url: redact(url),
            cause: source.to_string(),
        };
        let options = PgConnectOptions::from_str(url).map_err(open_err)?;
        // One plain connection first: a refused or misconfigured server fails at once with its
        // own error, instead of after the pool's acquire timeout.
        sqlx::Connection::close(options.connect().await.map_err(open_err)?)
            .await
            .map_err(open_err)?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(open_err)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))?;
        Ok(Self { pool })
    }
}

/// The schema's migrations, embedded.
pub(super) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}
