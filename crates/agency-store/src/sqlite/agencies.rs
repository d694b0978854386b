//! Agencies, their agents and their published versions on SQLite.

use agency_core::{Agency, AgencyId, Published};
use async_trait::async_trait;
use chrono::Utc;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::{SqliteStore, unique_violation};
use crate::shared::agencies::{self, AgencyRow, AgentRow, agencies_of, blocks_json};
use crate::{AgencyState, AgencyStore, Result, StoreError};

impl SqliteStore {
    fn one_agency(
        &self,
        conn: &Connection,
        row: Option<AgencyRow>,
    ) -> rusqlite::Result<Option<(AgencyRow, Vec<AgentRow>)>> {
        let Some(row) = row else { return Ok(None) };
        let agents = conn
            .prepare_cached(agencies::AGENTS_OF_AGENCY)?
            .query_map([row.id], agent_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Some((row, agents)))
    }
}

fn one(rows: Option<(AgencyRow, Vec<AgentRow>)>) -> Result<Option<Agency>> {
    match rows {
        None => Ok(None),
        Some((row, agents)) => Ok(agencies_of(vec![row], agents)?.pop()),
    }
}

#[async_trait]
impl AgencyStore for SqliteStore {
    async fn save_agency(&self, agency: &Agency) -> Result<()> {
        let now = Utc::now();
        let spend = agencies::spend_columns(agency);
        let saved = self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                agencies::SAVE_AGENCY,
                params![
                    agency.id.0,
                    agency.owner,
                    agency.name,
                    agency.handle,
                    agency.protocol.as_str(),
                    i64::from(agency.manager.get()),
                    i64::from(agency.limits.max_hops),
                    agencies::deadline_ms(agency),
                    agencies::providers_json(&agency.providers),
                    agencies::mcp_servers_json(&agency.mcp_servers),
                    spend.0,
                    spend.1,
                    spend.2,
                    now,
                    now
                ],
            )?;
            tx.execute(agencies::DELETE_AGENTS, [agency.id.0])?;
            {
                let mut insert = tx.prepare_cached(agencies::INSERT_AGENT)?;
                for (position, a) in (0i64..).zip(&agency.agents) {
                    insert.execute(params![
                        agency.id.0,
                        i64::from(a.id.get()),
                        position,
                        a.name,
                        a.handle,
                        a.role,
                        a.model.to_string(),
                        agencies::settings_json(a),
                        blocks_json(&a.blocks)
                    ])?;
                }
            }
            tx.commit()
        });
        match saved {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(agencies::name_taken(agency)),
            other => other,
        }
    }

    async fn agency(&self, id: AgencyId) -> Result<Option<Agency>> {
        let rows = self.with(|conn| {
            let row = conn
                .prepare_cached(agencies::AGENCY_BY_ID)?
                .query_row([id.0], agency_row)
                .optional()?;
            self.one_agency(conn, row)
        })?;
        one(rows)
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
        let rows = self.with(|conn| {
            let row = conn
                .prepare_cached(agencies::AGENCY_BY_NAME)?
                .query_row(params![owner, name], agency_row)
                .optional()?;
            self.one_agency(conn, row)
        })?;
        one(rows)
    }

    async fn list_agencies(&self, owner: &str) -> Result<Vec<(Agency, AgencyState)>> {
        let (rows, agents, states) = self.with(|conn| {
            let rows = conn
                .prepare_cached(agencies::AGENCIES_OF_OWNER)?
                .query_map([owner], agency_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let agents = conn
                .prepare_cached(agencies::AGENTS_OF_OWNER)?
                .query_map([owner], agent_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let states = conn
                .prepare_cached(agencies::STATES_OF_OWNER)?
                .query_map([owner], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((rows, agents, states))
        })?;
        agencies::with_states(agencies_of(rows, agents)?, states)
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

fn agent_row(r: &Row<'_>) -> rusqlite::Result<AgentRow> {
    Ok(AgentRow {
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
