//! What both backends share, one file per area: the SQL they run, written once, and the rows
//! as the database holds them, with their conversions to and from the domain.
//!
//! Parameters are `$1, $2, ...` in order of first use, which PostgreSQL and SQLite both read
//! the same way.

use agency_core::AgentId;

use crate::StoreError;

pub(crate) mod accounts;
pub(crate) mod agencies;
pub(crate) mod conversations;
pub(crate) mod keys;
pub(crate) mod memory;
pub(crate) mod rooms;
pub(crate) mod secrets;
pub(crate) mod settings;

/// A stored value this code cannot read back.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn agent_id(n: i64) -> Result<AgentId, StoreError> {
    u32::try_from(n)
        .ok()
        .and_then(AgentId::new)
        .ok_or_else(|| corrupt(format!("agent id {n}")))
}

fn opt_agent(n: Option<i64>) -> Result<Option<AgentId>, StoreError> {
    n.map(agent_id).transpose()
}

fn u32_of(n: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|_| corrupt(format!("{what} {n}")))
}
