//! PostgreSQL, through sqlx: for more than one machine.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

use crate::{Result, StoreError, redact};

mod accounts;
mod agencies;
mod approvals;
mod conversations;
mod group_commit;
mod keys;
mod memory;
pub(crate) mod migrate;
mod rooms;
mod secrets;
mod settings;
mod spend;
mod tasks;

use migrate::MIGRATOR;

pub struct PostgresStore {
    pool: PgPool,
    /// Conversation writes, committed in groups (`group_commit.rs`).
    commits: tokio::sync::mpsc::UnboundedSender<group_commit::Queued>,
}

impl PostgresStore {
    pub async fn open(url: &str) -> Result<Self> {
        let open_err = |source: sqlx::Error| StoreError::Open {
            url: redact(url),
            cause: source.to_string(),
        };
        let options = PgConnectOptions::from_str(url).map_err(open_err)?;
        // One plain connection first: a refused or misconfigured server fails at once with its
        // own error, instead of after the pool's acquire timeout. It brings the schema up to
        // date, then closes.
        let first = options.connect().await.map_err(open_err)?;
        migrate::migrate(first).await?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(open_err)?;
        let commits = group_commit::committer(pool.clone());
        Ok(Self { pool, commits })
    }
}

/// The channel servers on one database tell each other what happens on.
const CHANNEL: &str = "agency_events";

#[async_trait::async_trait]
impl crate::NoticeStore for PostgresStore {
    fn shared(&self) -> bool {
        true
    }

    async fn notify(&self, notices: &[String]) -> Result<()> {
        if !notices.is_empty() {
            sqlx::query("SELECT pg_notify($1, n) FROM unnest($2::text[]) AS n")
                .bind(CHANNEL)
                .bind(notices)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    async fn listen(&self) -> Result<Option<futures::stream::BoxStream<'static, String>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(CHANNEL).await?;
        let notices = futures::stream::unfold(listener, |mut listener| async move {
            loop {
                match listener.recv().await {
                    Ok(n) => return Some((n.payload().to_string(), listener)),
                    Err(sqlx::Error::PoolClosed) => return None,
                    // Reconnects on the next call.
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        });
        Ok(Some(Box::pin(notices)))
    }
}

fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}
