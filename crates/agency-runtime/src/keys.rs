//! API keys: made here and shown once, kept only as HMAC-SHA256 under a server secret. That
//! secret is itself stored sealed under the master key (beside provider keys), so rotating the
//! master key carries it along and a copy of the database alone cannot test guesses.
//! Authentication and rate limits run in memory; last use is written in batches.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agency_core::{Agency, ApiKey, KeyBudgets, KeyState};
use agency_store::Store;
use chrono::{Datelike, Utc};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretBox, SecretString};
use sha2::Sha256;

use crate::RuntimeError;
use crate::secrets::{self, MasterKey, MasterKeySource};

/// What every key starts with, so people and secret scanners recognise it.
pub const KEY_PREFIX: &str = "agk_";
/// How long a key's record is trusted before it is read again (so revocation by another
/// process takes effect within this).
const CACHE_FOR: Duration = Duration::from_secs(1);
/// Where the HMAC secret is kept among the sealed secrets (an owner no user can have).
const SECRET_OWNER: &str = "";
const SECRET_NAME: &str = "api-key-hmac";

/// The server secret API keys are hashed with.
pub struct Keyring {
    secret: SecretBox<[u8; 32]>,
}

impl Keyring {
    /// Loads the secret, making it the first time (processes starting together agree on one).
    pub async fn load(
        store: &dyn Store,
        master_key: &MasterKeySource,
    ) -> Result<Self, RuntimeError> {
        if let Some(hex) =
            secrets::provider_key(store, master_key, SECRET_OWNER, SECRET_NAME).await?
        {
            return Self::from_hex(hex.expose_secret());
        }
        let fresh = crate::hex::encode(&secrets::random32());
        let master = MasterKey::load_or_create(master_key)?;
        store
            .add_provider_key(&master.seal(
                SECRET_OWNER,
                SECRET_NAME,
                &SecretString::from(fresh),
            )?)
            .await?;
        let stored = secrets::provider_key(store, master_key, SECRET_OWNER, SECRET_NAME)
            .await?
            .ok_or_else(|| {
                RuntimeError::Invalid("the API key secret could not be stored".into())
            })?;
        Self::from_hex(stored.expose_secret())
    }

    fn from_hex(hex: &str) -> Result<Self, RuntimeError> {
        let bytes = crate::hex::decode32(hex)
            .ok_or_else(|| RuntimeError::Invalid("the stored API key secret is damaged".into()))?;
        Ok(Self {
            secret: SecretBox::new(Box::new(bytes)),
        })
    }

    /// The keyed hash of a key, in hex.
    pub fn hash(&self, key: &str) -> String {
        // HMAC takes a key of any length, so this never fails; an empty hash matches nothing.
        let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(self.secret.expose_secret()) else {
            return String::new();
        };
        mac.update(key.as_bytes());
        crate::hex::encode(&mac.finalize().into_bytes())
    }
}

/// Makes a key for `agency` with its budgets (`KeyBudgets::default()`: none): the plain key
/// (show it once) and what is stored of it.
pub async fn create_key(
    store: &dyn Store,
    keyring: &Keyring,
    agency: &Agency,
    name: &str,
    expires_in: Option<Duration>,
    rate_limit_per_minute: Option<u32>,
    budgets: KeyBudgets,
) -> Result<(ApiKey, SecretString), RuntimeError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(RuntimeError::Invalid(
            "a key's name must be 1 to 64 characters, e.g. `dev` or `prod`".into(),
        ));
    }
    if rate_limit_per_minute == Some(0) {
        return Err(RuntimeError::Invalid(
            "the rate limit must be at least 1 request a minute".into(),
        ));
    }
    let plain = format!("{KEY_PREFIX}{}", crate::hex::encode(&secrets::random32()));
    let now = Utc::now();
    let expires_at = match expires_in {
        None => None,
        // Past the year 9999 a time has no RFC 3339 text to store; far sooner than `+`
        // would overflow (and panic).
        Some(d) => Some(
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
                .filter(|t| t.year() <= 9999)
                .ok_or_else(|| RuntimeError::Invalid("that expiry is too far away".into()))?,
        ),
    };
    let key = ApiKey {
        id: uuid::Uuid::now_v7(),
        agency_id: agency.id,
        name: name.to_string(),
        prefix: plain[..KEY_PREFIX.len() + 8].to_string(),
        hash: keyring.hash(&plain),
        rate_limit_per_minute: rate_limit_per_minute.unwrap_or(ApiKey::DEFAULT_RATE_LIMIT),
        created_at: now,
        expires_at,
        last_used_at: None,
        revoked_at: None,
        budgets,
    };
    store.create_api_key(&key).await?;
    Ok((key, SecretString::from(plain)))
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("You didn't provide an API key. Send it as `Authorization: Bearer agk_...`.")]
    Missing,
    #[error("Incorrect API key provided: {0}")]
    Invalid(String),
    #[error("This API key expired: {0}. Create a new one with `agency keys create`.")]
    Expired(String),
    #[error("This API key was revoked: {0}.")]
    Revoked(String),
    #[error("Rate limit reached for this API key ({limit} requests per minute). Try again in {}s.", .retry_after.as_secs().max(1))]
    RateLimited { limit: u32, retry_after: Duration },
}

/// Checks keys and their limits in memory.
pub struct Authenticator {
    store: Arc<dyn Store>,
    keyring: Keyring,
    cache: Mutex<HashMap<String, (Instant, Option<ApiKey>)>>,
    limiters: Mutex<HashMap<uuid::Uuid, (u32, Arc<DefaultDirectRateLimiter>)>>,
    used: Mutex<HashMap<uuid::Uuid, chrono::DateTime<Utc>>>,
}

/// A key shown in errors: its first characters only.
fn masked(key: &str) -> String {
    let shown: String = key.chars().take(KEY_PREFIX.len() + 4).collect();
    format!("{shown}…")
}

impl Authenticator {
    pub fn new(store: Arc<dyn Store>, keyring: Keyring) -> Self {
        Self {
            store,
            keyring,
            cache: Mutex::new(HashMap::new()),
            limiters: Mutex::new(HashMap::new()),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// Makes a key for `agency` with its budgets (see [`create_key`]).
    pub async fn create_key(
        &self,
        agency: &Agency,
        name: &str,
        expires_in: Option<Duration>,
        rate_limit_per_minute: Option<u32>,
        budgets: KeyBudgets,
    ) -> Result<(ApiKey, SecretString), RuntimeError> {
        create_key(
            &*self.store,
            &self.keyring,
            agency,
            name,
            expires_in,
            rate_limit_per_minute,
            budgets,
        )
        .await
    }

    /// Sets the budgets of the agency's live key `name`, at once on this server (others read
    /// keys again within [`CACHE_FOR`]); the key as it is now, `None` when there is no such
    /// key.
    pub async fn set_budgets(
        &self,
        agency: agency_core::AgencyId,
        name: &str,
        budgets: KeyBudgets,
    ) -> Result<Option<ApiKey>, RuntimeError> {
        if !self
            .store
            .set_api_key_budgets(agency, name, &budgets)
            .await?
        {
            return Ok(None);
        }
        self.forget(agency);
        let keys = self.store.api_keys(agency).await?;
        Ok(keys
            .into_iter()
            .find(|k| k.name == name && k.revoked_at.is_none()))
    }

    /// The agency's keys, revoked ones too (their records: never the keys).
    pub async fn keys(&self, agency: agency_core::AgencyId) -> Result<Vec<ApiKey>, RuntimeError> {
        Ok(self.store.api_keys(agency).await?)
    }

    /// Revokes the agency's live key named `name`: refused from now on, on this server at
    /// once, on others within [`CACHE_FOR`]. False when it has no live key of that name.
    pub async fn revoke(
        &self,
        agency: agency_core::AgencyId,
        name: &str,
    ) -> Result<bool, RuntimeError> {
        let revoked = self.store.revoke_api_key(agency, name, Utc::now()).await?;
        self.forget(agency);
        Ok(revoked)
    }

    /// Forgets the cached keys of an agency, so that a revocation takes effect at once.
    fn forget(&self, agency: agency_core::AgencyId) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|_, (_, key)| key.as_ref().is_none_or(|k| k.agency_id != agency));
        }
    }

    /// The key behind an `Authorization` header's bearer token, if it may make a request now
    /// (the request is counted against its rate limit).
    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<ApiKey, AuthError> {
        let key = self.verify(bearer).await?;
        self.check_rate(&key).await?;
        if let Ok(mut used) = self.used.lock() {
            used.insert(key.id, Utc::now());
        }
        Ok(key)
    }

    /// The key behind a bearer token, if it is live (neither expired nor revoked); nothing is
    /// counted. For a connection that proved its key once and is checked again now and then.
    pub async fn verify(&self, bearer: Option<&str>) -> Result<ApiKey, AuthError> {
        let token = bearer
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Missing)?;
        if !token.starts_with(KEY_PREFIX) {
            return Err(AuthError::Invalid(masked(token)));
        }
        let hash = self.keyring.hash(token);
        let cached = self.cache.lock().ok().and_then(|c| {
            c.get(&hash)
                .filter(|(at, _)| at.elapsed() < CACHE_FOR)
                .map(|(_, k)| k.clone())
        });
        let key = match cached {
            Some(key) => key,
            None => {
                let key = self.store.api_key_by_hash(&hash).await.map_err(|e| {
                    tracing::error!(error = %e, "cannot read API keys");
                    AuthError::Invalid(masked(token))
                })?;
                if let Ok(mut c) = self.cache.lock() {
                    if c.len() > 100_000 {
                        c.clear();
                    }
                    c.insert(hash, (Instant::now(), key.clone()));
                }
                key
            }
        };
        let key = key.ok_or_else(|| AuthError::Invalid(masked(token)))?;
        match key.state(Utc::now()) {
            KeyState::Active => Ok(key),
            KeyState::Expired => Err(AuthError::Expired(key.prefix.clone())),
            KeyState::Revoked => Err(AuthError::Revoked(key.prefix.clone())),
        }
    }

    /// Counts the request against the key's limit: in the database where several servers share
    /// it (see [`agency_store::KeyStore::count_key_request`]), else in memory.
    async fn check_rate(&self, key: &ApiKey) -> Result<(), AuthError> {
        let limit = key.rate_limit_per_minute;
        match self.store.count_key_request(key.id, limit).await {
            Ok(Some(rate)) if rate.allowed => return Ok(()),
            Ok(Some(rate)) => {
                return Err(AuthError::RateLimited {
                    limit,
                    retry_after: retry_after(&rate, limit),
                });
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot count a key's request in the database; counting in memory");
            }
        }
        let limiter = {
            let Ok(mut limiters) = self.limiters.lock() else {
                return Ok(());
            };
            let entry = limiters
                .entry(key.id)
                .or_insert_with(|| (0, Arc::new(limiter(key.rate_limit_per_minute))));
            if entry.0 != key.rate_limit_per_minute {
                *entry = (
                    key.rate_limit_per_minute,
                    Arc::new(limiter(key.rate_limit_per_minute)),
                );
            }
            entry.1.clone()
        };
        limiter.check().map_err(|not_until| AuthError::RateLimited {
            limit: key.rate_limit_per_minute,
            retry_after: not_until.wait_time_from(DefaultClock::default().now()),
        })
    }

    /// Writes when keys were last used, in one batch.
    pub async fn flush_usage(&self) -> Result<(), RuntimeError> {
        let used: Vec<_> = match self.used.lock() {
            Ok(mut u) => u.drain().collect(),
            Err(_) => return Ok(()),
        };
        if !used.is_empty() {
            self.store.touch_api_keys(&used).await?;
        }
        Ok(())
    }
}

impl crate::Runtime {
    /// The API keys of this server's agencies: made, listed, revoked and checked.
    pub async fn authenticator(&self) -> Result<Authenticator, RuntimeError> {
        let master = self.master_key.as_ref().ok_or_else(|| {
            RuntimeError::Invalid("this server has no master key to keep API keys with".into())
        })?;
        let keyring = Keyring::load(&*self.store, master).await?;
        Ok(Authenticator::new(self.store.clone(), keyring))
    }
}

/// How long until a request refused at `rate` would be counted. Within this minute the
/// estimate falls as the previous minute's weight does (1/60 a second); after it, this minute's
/// count is the previous one's and falls the same way.
fn retry_after(rate: &agency_store::KeyRate, limit: u32) -> Duration {
    let (limit, current, previous) = (
        f64::from(limit),
        f64::from(rate.current),
        f64::from(rate.previous),
    );
    let rest_of_minute = 60.0 * rate.weight.clamp(0.0, 1.0);
    let within = (previous > 0.0)
        .then(|| 60.0 * (previous * rate.weight + current + 1.0 - limit) / previous)
        .filter(|dt| *dt <= rest_of_minute);
    let secs = within.unwrap_or_else(|| {
        let after = if current > 0.0 {
            60.0 * (1.0 - (limit - 1.0) / current).max(0.0)
        } else {
            0.0
        };
        rest_of_minute + after
    });
    // Whole seconds (Retry-After), after rounding away floating-point noise.
    let secs = (secs * 1000.0).round() / 1000.0;
    Duration::from_secs_f64(secs.clamp(1.0, 120.0).ceil())
}

fn limiter(per_minute: u32) -> DefaultDirectRateLimiter {
    let n = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
    RateLimiter::direct(Quota::per_minute(n))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agency_store::KeyRate;

    fn rate(current: u32, previous: u32, weight: f64) -> KeyRate {
        KeyRate {
            allowed: false,
            current,
            previous,
            weight,
        }
    }

    #[test]
    fn a_refused_request_is_told_when_one_would_be_counted() {
        // 60 this minute, none before, a quarter of the minute left: the next minute's estimate
        // is 60 × (1 − elapsed), under 60 after one second of it.
        assert_eq!(
            super::retry_after(&rate(60, 0, 0.25), 60),
            Duration::from_secs(16)
        );
        // 30 + 60 × 0.5 = 60: one more fits once the previous minute weighs 29/60 (after 1 s).
        assert_eq!(
            super::retry_after(&rate(30, 60, 0.5), 60),
            Duration::from_secs(1)
        );
        // 59 + 60 × 0.9 = 113: one more fits only once the previous minute is out (54 s).
        assert_eq!(
            super::retry_after(&rate(59, 60, 0.9), 60),
            Duration::from_secs(54)
        );
        // 60 this minute and 60 before: this minute full, wait past its end too.
        assert_eq!(
            super::retry_after(&rate(60, 60, 0.5), 60),
            Duration::from_secs(31)
        );
    }
}
