//! Small server-wide facts on SQLite.

use async_trait::async_trait;
use chrono::Utc;
use rusqlite::params;

use super::SqliteStore;
use crate::shared::settings;
use crate::{Result, SettingsStore};

#[async_trait]
impl SettingsStore for SqliteStore {
    async fn claim_once(&self, key: &str) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(settings::CLAIM_SETTING)?
                .execute(params![key, Utc::now().to_rfc3339()])
        })?;
        Ok(n == 1)
    }

    async fn is_claimed(&self, key: &str) -> Result<bool> {
        self.with(|conn| conn.prepare_cached(settings::SETTING_EXISTS)?.exists([key]))
    }

    async fn alive(&self, process: uuid::Uuid, at: chrono::DateTime<Utc>) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(settings::ALIVE)?
                .execute(params![process, at])?;
            conn.prepare_cached(settings::FORGET_PROCESSES)?
                .execute(params![at - chrono::Duration::days(1)])
        })?;
        Ok(())
    }

    async fn ready(&self) -> Result<()> {
        let version: i64 =
            self.with(|conn| conn.query_row("PRAGMA user_version", [], |r| r.get(0)))?;
        settings::schema_is(version, super::migrate::MIGRATIONS.len())
    }
}
