//! People's accounts and their login sessions: the SQL and the rows.

use chrono::{DateTime, Utc};

use super::corrupt;
use crate::StoreError;

pub(crate) const INSERT_USER: &str =
    "INSERT INTO users (id, email, password_hash, created_at) VALUES ($1, $2, $3, $4)";
pub(crate) const USER_BY_ID: &str =
    "SELECT id, email, password_hash, created_at FROM users WHERE id = $1";
pub(crate) const USER_BY_EMAIL: &str =
    "SELECT id, email, password_hash, created_at FROM users WHERE email = $1";
/// SQLite numbers `$N` parameters in the order they first appear: keep them in order.
pub(crate) const SET_PASSWORD: &str = "UPDATE users SET password_hash = $1 WHERE id = $2";
pub(crate) const INSERT_SESSION: &str =
    "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)";
pub(crate) const SESSION_USER: &str = "SELECT users.id, users.email, users.password_hash, \
     users.created_at FROM sessions JOIN users ON users.id = sessions.user_id \
     WHERE sessions.token_hash = $1 AND sessions.expires_at > $2";
pub(crate) const DELETE_SESSION: &str = "DELETE FROM sessions WHERE token_hash = $1";
pub(crate) const DELETE_OTHER_SESSIONS: &str =
    "DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $2";

pub(crate) const LOGIN_FAILURE: &str = "SELECT at FROM login_failures \
     WHERE key = $1 AND at > $2 ORDER BY at DESC LIMIT 1 OFFSET $3";
pub(crate) const ADD_LOGIN_FAILURE: &str = "INSERT INTO login_failures (key, at) VALUES ($1, $2)";
pub(crate) const FORGET_LOGIN_FAILURES: &str = "DELETE FROM login_failures WHERE at < $1";

pub(crate) fn email_taken(email: &agency_core::Email) -> StoreError {
    StoreError::Conflict(format!(
        "an account with {email} exists already: log in instead"
    ))
}

#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    pub id: String,
    pub email: String,
    pub password_hash: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<UserRow> for agency_core::User {
    type Error = StoreError;
    fn try_from(r: UserRow) -> Result<Self, StoreError> {
        Ok(agency_core::User {
            id: r
                .id
                .parse()
                .map_err(|_| corrupt(format!("user id {}", r.id)))?,
            email: agency_core::Email::parse(&r.email).map_err(corrupt)?,
            password_hash: agency_core::PasswordHash(r.password_hash),
            created_at: r.created_at,
        })
    }
}
