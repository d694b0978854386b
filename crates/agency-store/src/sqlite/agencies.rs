//! Agencies and their published versions on SQLite.

use agency_core::{Agency, AgencyId, Published};
use async_trait::async_trait;
use chrono::Utc;
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};

use super::{SqliteStore, unique_violation};
use crate::shared::agencies::{self, AgencyRow, ListedRow};
use crate::{AgencyState, AgencyStore, Result, StoreError};

#[async_trait]
impl AgencyStore for SqliteStore {
    async fn save_agency(&self, agency: &Agency) -> Result<()> {
        let now = Utc::now();
        let body = agencies::body_of(agency)?;
        let saved = self.with(|conn| {
            conn.prepare_cached(agencies::SAVE_AGENCY)?
                .execute(params![
                    agency.id.0,
                    agency.owner,
                    agency.name,
                    agency.handle,
                    body,
                    now,
                    now
                ])?;
            Ok(())
        });
        match saved {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(agencies::name_taken(agency)),
            other => other,
        }
    }

    async fn agency(&self, id: AgencyId) -> Result<Option<Agency>> {
        let row = self.with(|conn| {
            conn.prepare_cached(agencies::AGENCY_BY_ID)?
                .query_row([id.0], agency_row)
                .optional()
        })?;
        row.map(agencies::agency_of).transpose()
    }

    async fn agency_state(&self, id: AgencyId) -> Result<Option<AgencyState>> {
        let state = self.with(|conn| {
            conn.prepare_cached(agencies::AGENCY_STATE)?
                .query_row([id.0], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
                })
                .optional()
        })?;
        state.map(agencies::agency_state).transpose()
    }

    async fn agency_by_name(&self, owner: &str, name: &str) -> Result<Option<Agency>> {
        let row = self.with(|conn| {
            conn.prepare_cached(agencies::AGENCY_BY_NAME)?
                .query_row(params![owner, name], agency_row)
                .optional()
        })?;
        row.map(agencies::agency_of).transpose()
    }

    async fn list_agencies(&self, owner: &str) -> Result<Vec<(Agency, AgencyState)>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(agencies::AGENCIES_OF_OWNER)?
                .query_map([owner], |r| {
                    Ok(ListedRow {
                        agency: agency_row(r)?,
                        revision: r.get("revision")?,
                        published: r.get("published")?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        agencies::listed(rows)
    }

    async fn delete_agency(&self, id: AgencyId) -> Result<bool> {
        self.with(|conn| Ok(conn.execute(agencies::DELETE_AGENCY, [id.0])? > 0))
    }

    async fn publish(
        &self,
        id: AgencyId,
        body: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<Published> {
        let version = self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if tx.execute(agencies::BUMP_REVISION, [id.0])? == 0 {
                return Ok(None);
            }
            let version: i64 = tx.query_row(agencies::NEXT_VERSION, [id.0], |r| r.get(0))?;
            tx.execute(agencies::INSERT_VERSION, params![id.0, version, body, at])?;
            tx.commit()?;
            Ok(Some(version))
        })?;
        let version = version.ok_or_else(|| StoreError::Conflict(format!("no agency {id}")))?;
        agencies::published(version, at)
    }

    async fn version(&self, id: AgencyId, version: u32) -> Result<Option<(Published, String)>> {
        let row = self.with(|conn| {
            conn.prepare_cached(agencies::VERSION)?
                .query_row(params![id.0, version], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get::<_, String>(2)?))
                })
                .optional()
        })?;
        row.map(|(v, at, body)| Ok((agencies::published(v, at)?, body)))
            .transpose()
    }

    async fn versions(&self, id: AgencyId) -> Result<Vec<Published>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(agencies::VERSIONS)?
                .query_map([id.0], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|(v, at)| agencies::published(v, at))
            .collect()
    }
}

fn agency_row(r: &Row<'_>) -> rusqlite::Result<AgencyRow> {
    Ok(AgencyRow {
        id: r.get("id")?,
        owner: r.get("owner")?,
        name: r.get("name")?,
        body: r.get("body")?,
    })
}
