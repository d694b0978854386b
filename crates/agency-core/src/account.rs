//! Accounts: people who sign up with an email address and a password, and the login sessions
//! their browsers hold. A password exists here only as its hash (made by the runtime); a
//! session only as the hash of its token.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::ids::UserId;

/// An email address, trimmed and lower-cased so that one address is one account.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Email(String);

/// Why a text is not an email address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    #[error("enter your email address")]
    Empty,
    #[error("an email address has at most {EMAIL_MAX} characters")]
    TooLong,
    #[error("an email address has no spaces")]
    Spaces,
    #[error("`{0}` is not an email address like name@example.com")]
    NotAnAddress(String),
}

/// Long enough for any real address (RFC 5321's path limit).
const EMAIL_MAX: usize = 254;
pub const PASSWORD_MIN: usize = 8;
/// Hashing cost grows with the input; nobody types more than this.
pub const PASSWORD_MAX: usize = 1024;

impl Email {
    /// Checks the shape a person would recognise as an address: `name@domain.tld`.
    pub fn parse(s: &str) -> Result<Self, EmailError> {
        let s = s.trim().to_lowercase();
        if s.is_empty() {
            return Err(EmailError::Empty);
        }
        if s.len() > EMAIL_MAX {
            return Err(EmailError::TooLong);
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(EmailError::Spaces);
        }
        let valid = match s.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !domain.contains("..")
            }
            None => false,
        };
        if !valid {
            return Err(EmailError::NotAnAddress(s));
        }
        Ok(Self(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is wrong with a new password, if anything.
pub fn password_problem(password: &str) -> Option<String> {
    let n = password.chars().count();
    if n < PASSWORD_MIN {
        Some(format!(
            "use at least {PASSWORD_MIN} characters (this one has {n})"
        ))
    } else if n > PASSWORD_MAX {
        Some(format!("use at most {PASSWORD_MAX} characters"))
    } else {
        None
    }
}

/// A password's hash as a PHC string (`$argon2id$v=19$...`). Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(pub String);

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(***)")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub email: Email,
    pub password_hash: PasswordHash,
    pub created_at: DateTime<Utc>,
}

impl User {
    /// The owner of the user's agencies, keys and provider keys.
    pub fn owner(&self) -> String {
        self.id.to_string()
    }
}

/// A browser's login: only the SHA-256 of its token is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginSession {
    pub token_hash: String,
    pub user: UserId,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_normalised_and_checked() {
        assert_eq!(
            Email::parse("  Ada@Example.COM ").map(|e| e.0),
            Ok("ada@example.com".to_string())
        );
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "ada@@example.com",
            "a da@example.com",
            "ada@example..com",
            "ada@.example.com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn passwords_have_a_length_range() {
        assert!(password_problem("short").is_some());
        assert!(password_problem("long enough").is_none());
        assert!(password_problem(&"x".repeat(PASSWORD_MAX + 1)).is_some());
        // Characters, not bytes.
        assert!(password_problem("éééééééé").is_none());
    }

    #[test]
    fn hashes_do_not_print() {
        let h = PasswordHash("$argon2id$v=19$secret".into());
        assert!(!format!("{h:?}").contains("secret"));
    }
}
