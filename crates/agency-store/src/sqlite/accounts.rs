//! Accounts and login sessions on SQLite.

use agency_core::{Email, LoginSession, PasswordHash, User, UserId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};

use super::{SqliteStore, unique_violation};
use crate::shared::accounts::{self, UserRow};
use crate::{AccountStore, Result, StoreError};

impl SqliteStore {
    fn one_user(&self, query: &str, key: &str) -> Result<Option<User>> {
        let row: Option<UserRow> = self.with(|conn| {
            conn.prepare_cached(query)?
                .query_row([key], user_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }
}

#[async_trait]
impl AccountStore for SqliteStore {
    async fn create_user(&self, user: &User) -> Result<()> {
        let created = self.with(|conn| {
            conn.execute(
                accounts::INSERT_USER,
                params![
                    user.id.to_string(),
                    user.email.as_str(),
                    user.password_hash.0,
                    user.created_at
                ],
            )
        });
        match created {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => {
                Err(accounts::email_taken(&user.email))
            }
            other => other.map(|_| ()),
        }
    }

    async fn user(&self, id: UserId) -> Result<Option<User>> {
        self.one_user(accounts::USER_BY_ID, &id.to_string())
    }

    async fn user_by_email(&self, email: &Email) -> Result<Option<User>> {
        self.one_user(accounts::USER_BY_EMAIL, email.as_str())
    }

    async fn set_password(&self, id: UserId, hash: &PasswordHash) -> Result<()> {
        self.with(|conn| conn.execute(accounts::SET_PASSWORD, params![hash.0, id.to_string()]))
            .map(|_| ())
    }

    async fn create_session(&self, s: &LoginSession) -> Result<()> {
        self.with(|conn| {
            conn.execute(
                accounts::INSERT_SESSION,
                params![s.token_hash, s.user.to_string(), s.created_at, s.expires_at],
            )
        })
        .map(|_| ())
    }

    async fn session_user(&self, token_hash: &str, now: DateTime<Utc>) -> Result<Option<User>> {
        let row: Option<UserRow> = self.with(|conn| {
            conn.prepare_cached(accounts::SESSION_USER)?
                .query_row(params![token_hash, now], user_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn delete_session(&self, token_hash: &str) -> Result<()> {
        self.with(|conn| conn.execute(accounts::DELETE_SESSION, [token_hash]))
            .map(|_| ())
    }

    async fn login_failure(
        &self,
        key: &str,
        since: DateTime<Utc>,
        nth: u32,
    ) -> Result<Option<DateTime<Utc>>> {
        Ok(self.with(|conn| {
            conn.prepare_cached(accounts::LOGIN_FAILURE)?
                .query_row(params![key, since, nth.saturating_sub(1)], |r| {
                    super::timestamp(r, 0)
                })
                .optional()
        })?)
    }

    async fn add_login_failure(
        &self,
        keys: &[String],
        at: DateTime<Utc>,
        forget_before: DateTime<Utc>,
    ) -> Result<()> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.prepare_cached(accounts::FORGET_LOGIN_FAILURES)?
                .execute(params![forget_before])?;
            for key in keys {
                tx.prepare_cached(accounts::ADD_LOGIN_FAILURE)?
                    .execute(params![key, at])?;
            }
            tx.commit()
        })?;
        Ok(())
    }

    async fn delete_other_sessions(&self, user: UserId, keep: &str) -> Result<()> {
        self.with(|conn| {
            conn.execute(
                accounts::DELETE_OTHER_SESSIONS,
                params![user.to_string(), keep],
            )
        })
        .map(|_| ())
    }
}

fn user_row(r: &Row<'_>) -> rusqlite::Result<UserRow> {
    Ok(UserRow {
        id: r.get(0)?,
        email: r.get(1)?,
        password_hash: r.get(2)?,
        created_at: r.get(3)?,
    })
}
