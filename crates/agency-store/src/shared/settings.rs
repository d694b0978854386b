//! Small server-wide facts: the SQL.

pub(crate) const CLAIM_SETTING: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
pub(crate) const SETTING_EXISTS: &str = "SELECT 1 FROM settings WHERE key = $1";

/// `applied` migrations against the `known` ones: ready when they are the same.
pub(crate) fn schema_is(applied: i64, known: usize) -> crate::Result<()> {
    let known = i64::try_from(known).unwrap_or(i64::MAX);
    if applied == known {
        return Ok(());
    }
    Err(crate::StoreError::Migrate(if applied < known {
        format!(
            "the database schema is at version {applied}; this program needs {known} (it migrates when it starts)"
        )
    } else {
        format!(
            "the database schema is at version {applied}, newer than this program knows ({known}): upgrade agency"
        )
    }))
}

pub(crate) const ALIVE: &str = "INSERT INTO processes (id, seen_at) VALUES ($1, $2) \
     ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at";
pub(crate) const FORGET_PROCESSES: &str = "DELETE FROM processes WHERE seen_at < $1";
