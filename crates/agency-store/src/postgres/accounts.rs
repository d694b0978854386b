//! Accounts and login sessions on PostgreSQL.

use agency_core::{Email, LoginSession, PasswordHash, User, UserId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{PostgresStore, unique_violation};
use crate::shared::accounts::{self, UserRow, email_taken};
use crate::{AccountStore, Result};

impl PostgresStore {
    async fn one_user(&self, query: &'static str, key: String) -> Result<Option<User>> {
        let row: Option<UserRow> = sqlx::query_as(query)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }
}

#[async_trait]
impl AccountStore for PostgresStore {
    async fn create_user(&self, user: &User) -> Result<()> {
        let created = sqlx::query(accounts::INSERT_USER)
            .bind(user.id.to_string())
            .bind(user.email.as_str())
            .bind(&user.password_hash.0)
            .bind(user.created_at)
            .execute(&self.pool)
            .await;
        match created {
            Err(e) if unique_violation(&e) => Err(email_taken(&user.email)),
            other => other.map(|_| ()).map_err(Into::into),
        }
    }

    async fn user(&self, id: UserId) -> Result<Option<User>> {
        self.one_user(accounts::USER_BY_ID, id.to_string()).await
    }

    async fn user_by_email(&self, email: &Email) -> Result<Option<User>> {
        self.one_user(accounts::USER_BY_EMAIL, email.as_str().to_string())
            .await
    }

    async fn set_password(&self, id: UserId, hash: &PasswordHash) -> Result<()> {
        sqlx::query(accounts::SET_PASSWORD)
            .bind(&hash.0)
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn create_session(&self, s: &LoginSession) -> Result<()> {
        sqlx::query(accounts::INSERT_SESSION)
            .bind(&s.token_hash)
            .bind(s.user.to_string())
            .bind(s.created_at)
            .bind(s.expires_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn session_user(&self, token_hash: &str, now: DateTime<Utc>) -> Result<Option<User>> {
        let row: Option<UserRow> = sqlx::query_as(accounts::SESSION_USER)
            .bind(token_hash)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn delete_session(&self, token_hash: &str) -> Result<()> {
        sqlx::query(accounts::DELETE_SESSION)
            .bind(token_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn login_failure(
        &self,
        key: &str,
        since: DateTime<Utc>,
        nth: u32,
    ) -> Result<Option<DateTime<Utc>>> {
        Ok(sqlx::query_scalar(accounts::LOGIN_FAILURE)
            .bind(key)
            .bind(since)
            .bind(i64::from(nth.saturating_sub(1)))
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn add_login_failure(
        &self,
        keys: &[String],
        at: DateTime<Utc>,
        forget_before: DateTime<Utc>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(accounts::FORGET_LOGIN_FAILURES)
            .bind(forget_before)
            .execute(&mut *tx)
            .await?;
        for key in keys {
            sqlx::query(accounts::ADD_LOGIN_FAILURE)
                .bind(key)
                .bind(at)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_other_sessions(&self, user: UserId, keep: &str) -> Result<()> {
        sqlx::query(accounts::DELETE_OTHER_SESSIONS)
            .bind(user.to_string())
            .bind(keep)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
