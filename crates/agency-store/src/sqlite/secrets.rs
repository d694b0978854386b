//! Provider keys, sealed, on SQLite.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};

use super::SqliteStore;
use crate::shared::secrets::{self, SealedKeyRow};
use crate::{Result, SealedKey, SecretStore};

#[async_trait]
impl SecretStore for SqliteStore {
    async fn put_provider_key(&self, k: &SealedKey) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(secrets::PUT_PROVIDER_KEY)?
                .execute(params![
                    k.owner,
                    k.provider,
                    k.nonce,
                    k.sealed,
                    k.suffix,
                    k.created_at
                ])
        })?;
        Ok(())
    }

    async fn add_provider_key(&self, k: &SealedKey) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(secrets::ADD_PROVIDER_KEY)?
                .execute(params![
                    k.owner,
                    k.provider,
                    k.nonce,
                    k.sealed,
                    k.suffix,
                    k.created_at
                ])
        })?;
        Ok(n == 1)
    }

    async fn provider_key(&self, owner: &str, provider: &str) -> Result<Option<SealedKey>> {
        let row = self.with(|conn| {
            conn.prepare_cached(secrets::PROVIDER_KEY)?
                .query_row(params![owner, provider], sealed_key_row)
                .optional()
        })?;
        Ok(row.map(Into::into))
    }

    async fn provider_keys(&self, owner: &str) -> Result<Vec<SealedKey>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(secrets::PROVIDER_KEYS_OF_OWNER)?
                .query_map([owner], sealed_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn all_provider_keys(&self) -> Result<Vec<SealedKey>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(secrets::ALL_PROVIDER_KEYS)?
                .query_map([], sealed_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn reseal_provider_keys(&self, keys: &[SealedKey]) -> Result<()> {
        self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut update = tx.prepare_cached(secrets::RESEAL_PROVIDER_KEY)?;
                for k in keys {
                    update.execute(params![k.nonce, k.sealed, k.owner, k.provider])?;
                }
            }
            tx.commit()
        })
    }

    async fn delete_provider_key(&self, owner: &str, provider: &str) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(secrets::DELETE_PROVIDER_KEY)?
                .execute(params![owner, provider])
        })?;
        Ok(n == 1)
    }
}

fn sealed_key_row(r: &Row<'_>) -> rusqlite::Result<SealedKeyRow> {
    Ok(SealedKeyRow {
        owner: r.get("owner")?,
        provider: r.get("provider")?,
        nonce: r.get("nonce")?,
        sealed: r.get("sealed")?,
        suffix: r.get("suffix")?,
        created_at: r.get("created_at")?,
    })
}
