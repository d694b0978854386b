//! API keys on PostgreSQL.

use agency_core::AgencyId;
use async_trait::async_trait;
use chrono::Utc;

use super::{PostgresStore, unique_violation};
use crate::shared::keys;
use crate::{ApiResponse, KeyStore, Result, ThreadMatch};

#[async_trait]
impl KeyStore for PostgresStore {
    async fn create_api_key(&self, k: &agency_core::ApiKey) -> Result<()> {
        let budget = keys::budget_columns(&k.budgets);
        let done = sqlx::query(keys::INSERT_API_KEY)
            .bind(k.id)
            .bind(k.agency_id.0)
            .bind(&k.name)
            .bind(&k.prefix)
            .bind(&k.hash)
            .bind(i64::from(k.rate_limit_per_minute))
            .bind(k.created_at)
            .bind(k.expires_at)
            .bind(k.last_used_at)
            .bind(k.revoked_at)
            .bind(budget.0)
            .bind(budget.1)
            .bind(budget.2)
            .execute(&self.pool)
            .await;
        match done {
            Err(e) if unique_violation(&e) => Err(keys::key_name_taken(k)),
            other => other.map(|_| ()).map_err(Into::into),
        }
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<agency_core::ApiKey>> {
        let row: Option<keys::ApiKeyRow> = sqlx::query_as(keys::API_KEY_BY_HASH)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn api_keys(&self, agency: AgencyId) -> Result<Vec<agency_core::ApiKey>> {
        let rows: Vec<keys::ApiKeyRow> = sqlx::query_as(keys::API_KEYS_OF_AGENCY)
            .bind(agency.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn revoke_api_key(
        &self,
        agency: AgencyId,
        name: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(keys::REVOKE_API_KEY)
            .bind(at)
            .bind(agency.0)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn api_threads(&self, key: uuid::Uuid, hashes: &[String]) -> Result<Vec<ThreadMatch>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, uuid::Uuid, i64, i64)> = sqlx::query_as(keys::API_THREADS_ANY)
            .bind(key)
            .bind(hashes)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(keys::thread_match).collect())
    }

    async fn put_api_response(&self, r: &ApiResponse) -> Result<()> {
        sqlx::query(keys::INSERT_API_RESPONSE)
            .bind(&r.id)
            .bind(r.agency.0)
            .bind(r.conversation.0)
            .bind(i64::from(r.turn))
            .bind(r.created_at)
            .bind(&r.body)
            .bind(&r.input)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn api_response(&self, agency: AgencyId, id: &str) -> Result<Option<ApiResponse>> {
        let row: Option<keys::ApiResponseRow> = sqlx::query_as(keys::API_RESPONSE)
            .bind(agency.0)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(keys::api_response))
    }

    async fn delete_api_response(&self, agency: AgencyId, id: &str) -> Result<bool> {
        let done = sqlx::query(keys::DELETE_API_RESPONSE)
            .bind(agency.0)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn count_key_request(
        &self,
        key: uuid::Uuid,
        limit: u32,
    ) -> Result<Option<crate::KeyRate>> {
        let (allowed, current, previous, weight): (bool, i32, i32, f64) =
            sqlx::query_as(COUNT_KEY_REQUEST)
                .bind(key)
                .bind(i64::from(limit))
                .fetch_one(&self.pool)
                .await?;
        Ok(Some(crate::KeyRate {
            allowed,
            current: u32::try_from(current).unwrap_or_default(),
            previous: u32::try_from(previous).unwrap_or_default(),
            weight,
        }))
    }

    async fn set_api_key_budgets(
        &self,
        agency: AgencyId,
        name: &str,
        budgets: &agency_core::KeyBudgets,
    ) -> Result<bool> {
        let (usd, user, period) = keys::budget_columns(budgets);
        let done = sqlx::query(keys::SET_API_KEY_BUDGETS)
            .bind(usd)
            .bind(user)
            .bind(period)
            .bind(agency.0)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn touch_api_keys(&self, used: &[(uuid::Uuid, chrono::DateTime<Utc>)]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for (id, at) in used {
            sqlx::query(keys::TOUCH_API_KEY)
                .bind(at)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Counts a key's request unless the estimated rate would pass the limit (see
/// `KeyStore::count_key_request`), and forgets the key's minutes before the previous one. Two
/// servers counting at once take turns on the row: the later sees the earlier's count.
const COUNT_KEY_REQUEST: &str = "WITH w AS ( \
     SELECT floor(t / 60)::bigint AS minute, 1 - (t - floor(t / 60) * 60) / 60 AS weight \
     FROM (SELECT extract(epoch FROM clock_timestamp()) AS t) now), \
     prev AS (SELECT coalesce((SELECT r.count FROM key_requests r, w \
     WHERE r.key_id = $1 AND r.minute = w.minute - 1), 0) AS n), \
     gone AS (DELETE FROM key_requests r USING w \
     WHERE r.key_id = $1 AND r.minute < w.minute - 1), \
     counted AS (INSERT INTO key_requests (key_id, minute, count) \
     SELECT $1, w.minute, 1 FROM w, prev WHERE prev.n * w.weight + 1 <= $2 \
     ON CONFLICT (key_id, minute) DO UPDATE SET count = key_requests.count + 1 \
     WHERE key_requests.count + 1 + (SELECT n FROM prev) * (SELECT weight FROM w) <= $2 \
     RETURNING 1) \
     SELECT EXISTS (SELECT 1 FROM counted), \
     coalesce((SELECT r.count FROM key_requests r, w \
     WHERE r.key_id = $1 AND r.minute = w.minute), 0), \
     (SELECT n FROM prev), (SELECT weight FROM w)::float8";
