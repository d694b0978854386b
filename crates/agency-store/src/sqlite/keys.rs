//! API keys on SQLite.

use agency_core::AgencyId;
use async_trait::async_trait;
use chrono::Utc;
use rusqlite::{OptionalExtension, Row, params};

use super::{SqliteStore, unique_violation};
use crate::shared::keys::{self, ApiKeyRow};
use crate::{ApiResponse, KeyStore, Result, StoreError, ThreadMatch};

#[async_trait]
impl KeyStore for SqliteStore {
    async fn create_api_key(&self, k: &agency_core::ApiKey) -> Result<()> {
        let budget = keys::budget_columns(&k.budgets);
        let done = self.with(|conn| {
            conn.prepare_cached(keys::INSERT_API_KEY)?.execute(params![
                k.id,
                k.agency_id.0,
                k.name,
                k.prefix,
                k.hash,
                i64::from(k.rate_limit_per_minute),
                k.created_at,
                k.expires_at,
                k.last_used_at,
                k.revoked_at,
                budget.0,
                budget.1,
                budget.2
            ])
        });
        match done {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(keys::key_name_taken(k)),
            other => other.map(|_| ()),
        }
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<agency_core::ApiKey>> {
        let row = self.with(|conn| {
            conn.prepare_cached(keys::API_KEY_BY_HASH)?
                .query_row([hash], api_key_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn api_keys(&self, agency: AgencyId) -> Result<Vec<agency_core::ApiKey>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(keys::API_KEYS_OF_AGENCY)?
                .query_map([agency.0], api_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn revoke_api_key(
        &self,
        agency: AgencyId,
        name: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(keys::REVOKE_API_KEY)?
                .execute(params![at, agency.0, name])
        })?;
        Ok(n > 0)
    }

    async fn api_threads(&self, key: uuid::Uuid, hashes: &[String]) -> Result<Vec<ThreadMatch>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "{}t.hash IN ({})",
            keys::API_THREADS,
            vec!["?"; hashes.len()].join(", ")
        );
        let rows: Vec<(String, uuid::Uuid, i64, i64)> = self.with(|conn| {
            let mut stmt = conn.prepare_cached(&sql)?;
            let params = std::iter::once(&key as &dyn rusqlite::ToSql)
                .chain(hashes.iter().map(|h| h as &dyn rusqlite::ToSql));
            stmt.query_map(rusqlite::params_from_iter(params), |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect()
        })?;
        Ok(rows.into_iter().map(keys::thread_match).collect())
    }

    async fn put_api_response(&self, r: &ApiResponse) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(keys::INSERT_API_RESPONSE)?
                .execute(params![
                    r.id,
                    r.agency.0,
                    r.conversation.0,
                    i64::from(r.turn),
                    r.created_at,
                    r.body,
                    r.input
                ])
        })
        .map(|_| ())
    }

    async fn api_response(&self, agency: AgencyId, id: &str) -> Result<Option<ApiResponse>> {
        let row: Option<keys::ApiResponseRow> = self.with(|conn| {
            conn.prepare_cached(keys::API_RESPONSE)?
                .query_row(params![agency.0, id], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                    ))
                })
                .optional()
        })?;
        Ok(row.map(keys::api_response))
    }

    async fn delete_api_response(&self, agency: AgencyId, id: &str) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(keys::DELETE_API_RESPONSE)?
                .execute(params![agency.0, id])
        })?;
        Ok(n > 0)
    }

    async fn count_key_request(
        &self,
        _key: uuid::Uuid,
        _limit: u32,
    ) -> Result<Option<crate::KeyRate>> {
        Ok(None)
    }

    async fn set_api_key_budgets(
        &self,
        agency: AgencyId,
        name: &str,
        budgets: &agency_core::KeyBudgets,
    ) -> Result<bool> {
        let (usd, user, period) = keys::budget_columns(budgets);
        let n = self.with(|conn| {
            conn.prepare_cached(keys::SET_API_KEY_BUDGETS)?
                .execute(params![usd, user, period, agency.0, name])
        })?;
        Ok(n > 0)
    }

    async fn touch_api_keys(&self, used: &[(uuid::Uuid, chrono::DateTime<Utc>)]) -> Result<()> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            {
                let mut touch = tx.prepare_cached(keys::TOUCH_API_KEY)?;
                for (id, at) in used {
                    touch.execute(params![at, id])?;
                }
            }
            tx.commit()
        })
    }
}

fn api_key_row(r: &Row<'_>) -> rusqlite::Result<ApiKeyRow> {
    Ok(ApiKeyRow {
        id: r.get("id")?,
        agency_id: r.get("agency_id")?,
        name: r.get("name")?,
        prefix: r.get("prefix")?,
        hash: r.get("hash")?,
        rate_limit_per_minute: r.get("rate_limit_per_minute")?,
        created_at: r.get("created_at")?,
        expires_at: r.get("expires_at")?,
        last_used_at: r.get("last_used_at")?,
        revoked_at: r.get("revoked_at")?,
        budget_usd: r.get("budget_usd")?,
        user_budget_usd: r.get("user_budget_usd")?,
        budget_period: r.get("budget_period")?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

    use super::*;

    /// A request's history is looked up at each of its answers: index lookups by key and
    /// hash, and the latest turn of each match by its conversation, never a scan of the key's
    /// threads or of the turns.
    #[tokio::test]
    async fn looking_up_transcripts_scans_nothing() {
        let store = SqliteStore::open("sqlite::memory:").await.unwrap();
        let sql = format!("EXPLAIN QUERY PLAN {}t.hash IN (?, ?)", keys::API_THREADS);
        let plan: Vec<String> = store
            .with(|c| {
                c.prepare(&sql)?
                    .query_map(params![b"k".to_vec(), "h1", "h2"], |r| r.get(3))?
                    .collect()
            })
            .unwrap();
        assert!(plan.iter().all(|l| !l.starts_with("SCAN")), "{plan:?}");
        assert!(
            plan.iter()
                .any(|l| l.contains("api_threads") && l.contains("key_id=? AND hash=?")),
            "{plan:?}"
        );
        assert!(
            plan.iter()
                .any(|l| l.contains("turns") && l.contains("conversation_id=?")),
            "{plan:?}"
        );
    }
}
