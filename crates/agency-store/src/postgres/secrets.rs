//! Provider keys, sealed, on PostgreSQL.

use async_trait::async_trait;

use super::PostgresStore;
use crate::shared::secrets;
use crate::{Result, SealedKey, SecretStore};

#[async_trait]
impl SecretStore for PostgresStore {
    async fn put_provider_key(&self, k: &SealedKey) -> Result<()> {
        sqlx::query(secrets::PUT_PROVIDER_KEY)
            .bind(&k.owner)
            .bind(&k.provider)
            .bind(&k.nonce)
            .bind(&k.sealed)
            .bind(&k.suffix)
            .bind(k.created_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn add_provider_key(&self, k: &SealedKey) -> Result<bool> {
        let done = sqlx::query(secrets::ADD_PROVIDER_KEY)
            .bind(&k.owner)
            .bind(&k.provider)
            .bind(&k.nonce)
            .bind(&k.sealed)
            .bind(&k.suffix)
            .bind(k.created_at)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn provider_key(&self, owner: &str, provider: &str) -> Result<Option<SealedKey>> {
        let row: Option<secrets::SealedKeyRow> = sqlx::query_as(secrets::PROVIDER_KEY)
            .bind(owner)
            .bind(provider)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn provider_keys(&self, owner: &str) -> Result<Vec<SealedKey>> {
        let rows: Vec<secrets::SealedKeyRow> = sqlx::query_as(secrets::PROVIDER_KEYS_OF_OWNER)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn all_provider_keys(&self) -> Result<Vec<SealedKey>> {
        let rows: Vec<secrets::SealedKeyRow> = sqlx::query_as(secrets::ALL_PROVIDER_KEYS)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn reseal_provider_keys(&self, keys: &[SealedKey]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for k in keys {
            sqlx::query(secrets::RESEAL_PROVIDER_KEY)
                .bind(&k.nonce)
                .bind(&k.sealed)
                .bind(&k.owner)
                .bind(&k.provider)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_provider_key(&self, owner: &str, provider: &str) -> Result<bool> {
        let done = sqlx::query(secrets::DELETE_PROVIDER_KEY)
            .bind(owner)
            .bind(provider)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
