//! Provider keys, sealed: the SQL and the rows.

use chrono::{DateTime, Utc};

pub(crate) const PUT_PROVIDER_KEY: &str = "INSERT INTO provider_keys (owner, provider, nonce, sealed, suffix, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner, provider) DO UPDATE SET nonce = excluded.nonce, \
     sealed = excluded.sealed, suffix = excluded.suffix, created_at = excluded.created_at";
pub(crate) const ADD_PROVIDER_KEY: &str = "INSERT INTO provider_keys (owner, provider, nonce, sealed, suffix, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner, provider) DO NOTHING";
pub(crate) const PROVIDER_KEY: &str = "SELECT owner, provider, nonce, sealed, suffix, created_at FROM provider_keys WHERE owner = $1 AND provider = $2";
pub(crate) const PROVIDER_KEYS_OF_OWNER: &str = "SELECT owner, provider, nonce, sealed, suffix, created_at FROM provider_keys WHERE owner = $1 ORDER BY provider";
pub(crate) const ALL_PROVIDER_KEYS: &str = "SELECT owner, provider, nonce, sealed, suffix, created_at FROM provider_keys ORDER BY owner, provider";
pub(crate) const RESEAL_PROVIDER_KEY: &str =
    "UPDATE provider_keys SET nonce = $1, sealed = $2 WHERE owner = $3 AND provider = $4";
pub(crate) const DELETE_PROVIDER_KEY: &str =
    "DELETE FROM provider_keys WHERE owner = $1 AND provider = $2";

#[derive(sqlx::FromRow)]
pub(crate) struct SealedKeyRow {
    pub owner: String,
    pub provider: String,
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
    pub suffix: String,
    pub created_at: DateTime<Utc>,
}

impl From<SealedKeyRow> for crate::SealedKey {
    fn from(r: SealedKeyRow) -> Self {
        crate::SealedKey {
            owner: r.owner,
            provider: r.provider,
            nonce: r.nonce,
            sealed: r.sealed,
            suffix: r.suffix,
            created_at: r.created_at,
        }
    }
}
