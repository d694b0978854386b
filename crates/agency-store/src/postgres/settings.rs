//! Small server-wide facts on PostgreSQL.

use async_trait::async_trait;
use chrono::Utc;

use super::PostgresStore;
use crate::shared::settings;
use crate::{Result, SettingsStore};

#[async_trait]
impl SettingsStore for PostgresStore {
    async fn claim_once(&self, key: &str) -> Result<bool> {
        let done = sqlx::query(settings::CLAIM_SETTING)
            .bind(key)
            .bind(Utc::now().to_rfc3339())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn ready(&self) -> Result<()> {
        let applied: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
                .await?;
        settings::schema_is(applied, super::MIGRATOR.migrations.len())
    }

    async fn alive(&self, process: uuid::Uuid, at: chrono::DateTime<Utc>) -> Result<()> {
        sqlx::query(settings::ALIVE)
            .bind(process)
            .bind(at)
            .execute(&self.pool)
            .await?;
        sqlx::query(settings::FORGET_PROCESSES)
            .bind(at - chrono::Duration::days(1))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn is_claimed(&self, key: &str) -> Result<bool> {
        Ok(sqlx::query(settings::SETTING_EXISTS)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }
}
