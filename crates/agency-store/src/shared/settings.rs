//! Small server-wide facts: the SQL.

pub(crate) const CLAIM_SETTING: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
pub(crate) const SETTING_EXISTS: &str = "SELECT 1 FROM settings WHERE key = $1";
