//! Agencies and their published versions on PostgreSQL.

use agency_core::{Agency, AgencyId, Published};
use async_trait::async_trait;
use chrono::Utc;

use super::{PostgresStore, unique_violation};
use crate::shared::agencies::{self, AgencyRow, ListedRow};
use crate::{AgencyState, AgencyStore, Result, StoreError};

#[async_trait]
impl AgencyStore for PostgresStore {
    async fn save_agency(&self, agency: &Agency) -> Result<()> {
        let now = Utc::now();
        let saved = sqlx::query(agencies::SAVE_AGENCY)
            .bind(agency.id.0)
            .bind(&agency.owner)
            .bind(&agency.name)
            .bind(&agency.handle)
            .bind(agencies::body_of(agency)?)
            .bind(now)
            .bind(now)
            .execute(&self.pool)
            .await;
        match saved {
            Err(e) if unique_violation(&e) => Err(agencies::name_taken(agency)),
            other => other.map(drop).map_err(Into::into),
        }
    }

    async fn agency(&self, id: AgencyId) -> Result<Option<Agency>> {
        let row: Option<AgencyRow> = sqlx::query_as(agencies::AGENCY_BY_ID)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(agencies::agency_of).transpose()
    }

    async fn agency_state(&self, id: AgencyId) -> Result<Option<AgencyState>> {
        let state: Option<(i64, Option<i64>)> = sqlx::query_as(agencies::AGENCY_STATE)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        state.map(agencies::agency_state).transpose()
    }

    async fn agency_by_name(&self, owner: &str, name: &str) -> Result<Option<Agency>> {
        let row: Option<AgencyRow> = sqlx::query_as(agencies::AGENCY_BY_NAME)
            .bind(owner)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(agencies::agency_of).transpose()
    }

    async fn list_agencies(&self, owner: &str) -> Result<Vec<(Agency, AgencyState)>> {
        let rows: Vec<ListedRow> = sqlx::query_as(agencies::AGENCIES_OF_OWNER)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        agencies::listed(rows)
    }

    async fn delete_agency(&self, id: AgencyId) -> Result<bool> {
        let done = sqlx::query(agencies::DELETE_AGENCY)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn publish(
        &self,
        id: AgencyId,
        body: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<Published> {
        let mut tx = self.pool.begin().await?;
        let bumped = sqlx::query(agencies::BUMP_REVISION)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        if bumped.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!("no agency {id}")));
        }
        let version: i64 = sqlx::query_scalar(agencies::NEXT_VERSION)
            .bind(id.0)
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(agencies::INSERT_VERSION)
            .bind(id.0)
            .bind(version)
            .bind(body)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        agencies::published(version, at)
    }

    async fn version(&self, id: AgencyId, version: u32) -> Result<Option<(Published, String)>> {
        let row: Option<(i64, chrono::DateTime<Utc>, String)> = sqlx::query_as(agencies::VERSION)
            .bind(id.0)
            .bind(i64::from(version))
            .fetch_optional(&self.pool)
            .await?;
        row.map(|(v, at, body)| Ok((agencies::published(v, at)?, body)))
            .transpose()
    }

    async fn versions(&self, id: AgencyId) -> Result<Vec<Published>> {
        let rows: Vec<(i64, chrono::DateTime<Utc>)> = sqlx::query_as(agencies::VERSIONS)
            .bind(id.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|(v, at)| agencies::published(v, at))
            .collect()
    }
}
