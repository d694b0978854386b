//! Accounts: sign-up, login sessions, password changes.
//!
//! Passwords are hashed with argon2id (its default, OWASP's parameters), on a blocking thread:
//! a hash takes tens of milliseconds on purpose. A session token is 32 random bytes shown to
//! the browser once (its cookie) and kept only as its SHA-256; the CSRF token of a session is
//! derived from it, so a page that cannot read the cookie cannot make it.

use agency_core::account::password_problem;
use agency_core::{Email, LoginSession, PasswordHash, User, UserId};
use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, SaltString};
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use sha2::{Digest, Sha256};

use crate::{Runtime, RuntimeError};

/// How long a login lasts.
pub const SESSION_DAYS: i64 = 30;

/// A login just made: the token goes to the browser once.
pub struct NewSession {
    pub user: User,
    pub token: SecretString,
    pub expires_at: DateTime<Utc>,
}

/// The SHA-256 of a session token, as stored.
fn token_hash(token: &str) -> String {
    crate::hex::sha256(token)
}

/// The CSRF token of the session whose token is `session_token`.
pub fn csrf_token(session_token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"agency-csrf\0");
    h.update(session_token.as_bytes());
    crate::hex::encode(&h.finalize())
}

/// Whether `given` is the CSRF token of the session, compared in constant time.
pub fn csrf_matches(session_token: &str, given: &str) -> bool {
    let want = csrf_token(session_token);
    want.len() == given.len()
        && want
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn hash_password(password: String) -> Result<PasswordHash, RuntimeError> {
    let salt = SaltString::encode_b64(&crate::secrets::random32()[..16])
        .map_err(|e| RuntimeError::Invalid(format!("cannot make a salt: {e}")))?;
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| PasswordHash(h.to_string()))
            .map_err(|e| RuntimeError::Invalid(format!("cannot hash the password: {e}")))
    })
    .await
    .map_err(|e| RuntimeError::Invalid(format!("cannot hash the password: {e}")))?
}

/// Checks a password against a stored hash (false for a damaged hash).
async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        argon2::password_hash::PasswordHash::new(&hash).is_ok_and(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false)
}

/// A hash of no one's password: checked when the email is unknown, so that the answer takes as
/// long as for a known one.
const DECOY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3/Q6zjq8VNY0bWzXBtnEVsHfg1CZjGQ8t1Yhc3rNVHg";

/// Accounts: signing up and in, sessions and passwords (log-ins throttled per email and per address).
/// Reached through [`Runtime::accounts`].
pub struct Accounts<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Accounts<'_> {
    /// Makes an account and logs it in. Problems name the field (`email`, `password`).
    ///
    /// An email that has an account already is not said to have one: the sign-up answers as
    /// a log-in with that password would (it logs in with the right one, and a wrong one is
    /// a failed log-in, counted and throttled as one), so sign-up tells no one more, or
    /// faster, than log-in does.
    pub async fn sign_up(
        &self,
        email: &str,
        password: &str,
        client: Option<std::net::IpAddr>,
    ) -> Result<NewSession, RuntimeError> {
        let parsed = Email::parse(email).map_err(|m| RuntimeError::field("email", m))?;
        if let Some(m) = password_problem(password) {
            return Err(RuntimeError::field("password", m));
        }
        if self.rt.store.user_by_email(&parsed).await?.is_some() {
            return self.log_in(email, password, client).await;
        }
        let user = User {
            id: UserId::new(),
            email: parsed,
            password_hash: hash_password(password.to_string()).await?,
            created_at: Utc::now(),
        };
        // Two sign-ups racing for one address: the store's unique email decides.
        match self.rt.store.create_user(&user).await {
            Err(agency_store::StoreError::Conflict(_)) => {
                self.log_in(email, password, client).await
            }
            Err(other) => Err(other.into()),
            Ok(()) => self.new_session(user).await,
        }
    }

    /// Logs in; a wrong email and a wrong password get the same answer. Past the failures
    /// allowed for the email from the `client` address, or for the address (see
    /// [`crate::throttle`]), the password is not even checked; past those for the email from
    /// anywhere, it is checked after a wait.
    pub async fn log_in(
        &self,
        email: &str,
        password: &str,
        client: Option<std::net::IpAddr>,
    ) -> Result<NewSession, RuntimeError> {
        let now = chrono::Utc::now();
        match self
            .rt
            .logins
            .check(&*self.rt.store, email, client, now)
            .await?
        {
            Err(wait) => return Err(RuntimeError::TooManyAttempts(wait)),
            Ok(delay) if !delay.is_zero() => tokio::time::sleep(delay).await,
            Ok(_) => {}
        }
        let user = match Email::parse(email) {
            Ok(e) => self.rt.store.user_by_email(&e).await?,
            Err(_) => None,
        };
        let hash = user
            .as_ref()
            .map_or(DECOY_HASH.to_string(), |u| u.password_hash.0.clone());
        let ok = verify_password(password.to_string(), hash).await;
        match user {
            Some(user) if ok => self.new_session(user).await,
            _ => {
                self.rt
                    .logins
                    .failed(&*self.rt.store, email, client, chrono::Utc::now())
                    .await?;
                Err(RuntimeError::Unauthorized("wrong email or password".into()))
            }
        }
    }

    async fn new_session(&self, user: User) -> Result<NewSession, RuntimeError> {
        let token = format!("ags_{}", crate::hex::encode(&crate::secrets::random32()));
        let now = Utc::now();
        let expires_at = now + chrono::Duration::days(SESSION_DAYS);
        self.rt
            .store
            .create_session(&LoginSession {
                token_hash: token_hash(&token),
                user: user.id,
                created_at: now,
                expires_at,
            })
            .await?;
        Ok(NewSession {
            user,
            token: SecretString::from(token),
            expires_at,
        })
    }

    /// The owner of what the account with this email makes: how the CLI (`--owner EMAIL`),
    /// which works on the database directly, reaches an account's agencies.
    pub async fn owner_of_email(&self, email: &str) -> Result<String, RuntimeError> {
        let parsed = Email::parse(email)
            .map_err(|m| RuntimeError::Invalid(format!("`{email}` is not an email: {m}")))?;
        match self.rt.store.user_by_email(&parsed).await? {
            Some(user) => Ok(user.owner()),
            None => Err(RuntimeError::NotFound(format!("no account `{email}`"))),
        }
    }

    /// The user a session token belongs to, while it lasts.
    pub async fn session_user(&self, token: &str) -> Result<Option<User>, RuntimeError> {
        Ok(self
            .rt
            .store
            .session_user(&token_hash(token), Utc::now())
            .await?)
    }

    pub async fn log_out(&self, token: &str) -> Result<(), RuntimeError> {
        Ok(self.rt.store.delete_session(&token_hash(token)).await?)
    }

    /// Changes the password after checking the current one, and ends the user's other
    /// sessions (`token` is the one making the change).
    pub async fn change_password(
        &self,
        user: &User,
        token: &str,
        current: &str,
        new: &str,
    ) -> Result<(), RuntimeError> {
        if !verify_password(current.to_string(), user.password_hash.0.clone()).await {
            return Err(RuntimeError::field(
                "current_password",
                "this is not your current password",
            ));
        }
        if let Some(m) = password_problem(new) {
            return Err(RuntimeError::field("new_password", m));
        }
        let hash = hash_password(new.to_string()).await?;
        self.rt.store.set_password(user.id, &hash).await?;
        self.rt
            .store
            .delete_other_sessions(user.id, &token_hash(token))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_tokens_belong_to_their_session() {
        let t = csrf_token("ags_one");
        assert!(csrf_matches("ags_one", &t));
        assert!(!csrf_matches("ags_two", &t));
        assert!(!csrf_matches("ags_one", ""));
        assert!(!csrf_matches("ags_one", &t[1..]));
    }

    #[tokio::test]
    async fn passwords_verify_against_their_hash_only() {
        let h = hash_password("correct horse".into()).await.unwrap();
        assert!(h.0.starts_with("$argon2id$"));
        assert!(verify_password("correct horse".into(), h.0.clone()).await);
        assert!(!verify_password("wrong horse".into(), h.0).await);
        assert!(!verify_password("x".into(), "not a hash".into()).await);
        // The decoy is a real hash, so checking it costs what checking a user's does.
        assert!(argon2::password_hash::PasswordHash::new(DECOY_HASH).is_ok());
    }
}
