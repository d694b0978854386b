//! Agencies and their published versions: the SQL and the rows. An agency's definition is
//! one column, `body`: the JSON of its draft ([`AgencyDraft`], what [`Agency::to_draft`]
//! gives), the schema of the agency file and the API. Beside it only what queries need: its
//! owner, name (unique per owner, looked up) and handle, its revision and times.

use agency_core::{Agency, AgencyDraft, AgencyId};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{corrupt, u32_of};
use crate::StoreError;

macro_rules! agency_columns {
    () => {
        "id, owner, name, body"
    };
}
pub(crate) const SAVE_AGENCY: &str = "INSERT INTO agencies \
     (id, owner, name, handle, body, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, name = excluded.name, \
     handle = excluded.handle, body = excluded.body, revision = agencies.revision + 1, \
     updated_at = excluded.updated_at";
pub(crate) const AGENCY_BY_ID: &str =
    concat!("SELECT ", agency_columns!(), " FROM agencies WHERE id = $1");
pub(crate) const AGENCY_STATE: &str = "SELECT revision, \
     (SELECT MAX(version) FROM agency_versions WHERE agency_id = $1) FROM agencies WHERE id = $1";
pub(crate) const DELETE_AGENCY: &str = "DELETE FROM agencies WHERE id = $1";
/// Moves the revision; it also locks the agency's row, so that publications take their
/// numbers ([`NEXT_VERSION`], a statement of its own to see the last one committed) in turn.
pub(crate) const BUMP_REVISION: &str = "UPDATE agencies SET revision = revision + 1 WHERE id = $1";
pub(crate) const NEXT_VERSION: &str =
    "SELECT COALESCE(MAX(version), 0) + 1 FROM agency_versions WHERE agency_id = $1";
pub(crate) const INSERT_VERSION: &str =
    "INSERT INTO agency_versions (agency_id, version, body, published_at) VALUES ($1, $2, $3, $4)";
pub(crate) const VERSION: &str =
    "SELECT version, published_at, body FROM agency_versions WHERE agency_id = $1 AND version = $2";
pub(crate) const VERSIONS: &str = "SELECT version, published_at FROM agency_versions \
     WHERE agency_id = $1 ORDER BY version DESC";
pub(crate) const AGENCY_BY_NAME: &str = concat!(
    "SELECT ",
    agency_columns!(),
    " FROM agencies WHERE owner = $1 AND name = $2"
);
/// The owner's agencies by name, each with its [`AGENCY_STATE`].
pub(crate) const AGENCIES_OF_OWNER: &str = concat!(
    "SELECT ",
    agency_columns!(),
    ", revision, (SELECT MAX(version) FROM agency_versions WHERE agency_id = agencies.id) \
     AS published FROM agencies WHERE owner = $1 ORDER BY name"
);

#[derive(sqlx::FromRow)]
pub(crate) struct AgencyRow {
    pub id: Uuid,
    pub owner: String,
    pub name: String,
    pub body: String,
}

/// A row of [`AGENCIES_OF_OWNER`].
#[derive(sqlx::FromRow)]
pub(crate) struct ListedRow {
    #[sqlx(flatten)]
    pub agency: AgencyRow,
    pub revision: i64,
    pub published: Option<i64>,
}

/// What the `body` column keeps of `agency`: its draft's JSON.
pub(crate) fn body_of(agency: &Agency) -> Result<String, StoreError> {
    serde_json::to_string(&agency.to_draft()).map_err(corrupt)
}

/// The agency a row describes: its body read and validated as the draft it is. A body that
/// no longer reads or validates is [`StoreError::Corrupt`], naming the agency.
pub(crate) fn agency_of(row: AgencyRow) -> Result<Agency, StoreError> {
    let unreadable = |why: String| {
        StoreError::Corrupt(format!(
            "agency `{}` ({}): its stored definition {why}",
            row.name, row.id
        ))
    };
    let draft: AgencyDraft = serde_json::from_str(&row.body)
        .map_err(|e| unreadable(format!("is not an agency draft: {e}")))?;
    // Every model was checked when it was saved, against the providers then: one no longer
    // served fails when it is called, as in a published version. Everything else validates as
    // it did when saved (an agency's MCP servers have always been checked as an account's).
    draft
        .validate(AgencyId(row.id), &row.owner, &|_| true)
        .map_err(|e| {
            let problems: Vec<String> = e.0.iter().map(ToString::to_string).collect();
            unreadable(format!("no longer validates: {}", problems.join("; ")))
        })
}

/// The owner's agencies with their states, as [`AGENCIES_OF_OWNER`] reads them.
pub(crate) fn listed(
    rows: Vec<ListedRow>,
) -> Result<Vec<(Agency, crate::AgencyState)>, StoreError> {
    rows.into_iter()
        .map(|r| {
            let state = agency_state((r.revision, r.published))?;
            Ok((agency_of(r.agency)?, state))
        })
        .collect()
}

pub(crate) fn name_taken(agency: &Agency) -> StoreError {
    StoreError::Conflict(format!("an agency named `{}` already exists", agency.name))
}

pub(crate) fn agency_state(
    (revision, published): (i64, Option<i64>),
) -> Result<crate::AgencyState, StoreError> {
    Ok(crate::AgencyState {
        revision,
        published: published.map(|v| u32_of(v, "version")).transpose()?,
    })
}

pub(crate) fn published(
    version: i64,
    published_at: DateTime<Utc>,
) -> Result<agency_core::Published, StoreError> {
    Ok(agency_core::Published {
        version: u32_of(version, "version")?,
        published_at,
    })
}
