//! Failed log-ins, counted in a sliding window, in the store (so every server on one database
//! counts the same failures), three ways:
//!
//! - per email *and* client address: past the limit that address may not try that email again
//!   until the oldest failure leaves the window (the password is not even checked);
//! - per client address, whatever the email: likewise, so one address cannot try many
//!   accounts;
//! - per email, from any address: past the limit every attempt for it waits a moment first,
//!   which slows an attacker spread over many addresses without refusing anyone.
//!
//! So the account's owner is never locked out by someone else's failures: those count against
//! the other addresses, and only slow the owner down. Successful log-ins count nothing.

use std::net::IpAddr;
use std::time::Duration;

use agency_store::{Store, StoreError};
use chrono::{DateTime, Utc};

/// How many failures are allowed in the window, and what happens past them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failures for one email from one address before that address is refused for it.
    pub per_email_and_address: usize,
    /// Failures from one address, any email, before it is refused.
    pub per_address: usize,
    /// Failures for one email, from anywhere, before every attempt for it is slowed.
    pub slow_email_after: usize,
    /// How long a slowed attempt waits before its password is checked.
    pub slow_by: Duration,
    pub window: Duration,
}

impl Default for LoginLimits {
    /// In 15 minutes: 5 failures per email from one address, 30 per address; past 10 failures
    /// for an email, each attempt for it waits 2 seconds.
    fn default() -> Self {
        Self {
            per_email_and_address: 5,
            per_address: 30,
            slow_email_after: 10,
            slow_by: Duration::from_secs(2),
            window: Duration::from_secs(15 * 60),
        }
    }
}

pub(crate) struct LoginThrottle {
    limits: LoginLimits,
}

/// What a counted failure limits.
enum Limit {
    Refuse(usize),
    Slow(usize),
}

impl LoginThrottle {
    pub(crate) fn new(limits: LoginLimits) -> Self {
        Self { limits }
    }

    /// The keys a failure counts under, each with what it limits: hashed, so that the store
    /// keeps no addresses or emails in clear. Without an address (a log-in not over the
    /// network) the email alone is refused past its limit.
    fn keys(&self, email: &str, client: Option<IpAddr>) -> Vec<(String, Limit)> {
        let email = email.trim().to_lowercase();
        let l = &self.limits;
        let keys = match client {
            Some(ip) => vec![
                (
                    format!("pair:{ip}:{email}"),
                    Limit::Refuse(l.per_email_and_address),
                ),
                (format!("addr:{ip}"), Limit::Refuse(l.per_address)),
                (format!("email:{email}"), Limit::Slow(l.slow_email_after)),
            ],
            None => vec![(
                format!("email:{email}"),
                Limit::Refuse(l.per_email_and_address),
            )],
        };
        keys.into_iter()
            .map(|(key, limit)| (crate::hex::sha256(&key), limit))
            .collect()
    }

    /// `Err(wait)` when this address (or, without one, the email) is past a limit at `now`:
    /// the time until the oldest failure that keeps it there leaves the window. Else
    /// `Ok(delay)`: how long the attempt waits before its password is checked (zero unless the
    /// email is past its limit for slowing).
    pub(crate) async fn check(
        &self,
        store: &dyn Store,
        email: &str,
        client: Option<IpAddr>,
        now: DateTime<Utc>,
    ) -> Result<Result<Duration, Duration>, StoreError> {
        let window = self.window();
        let since = now - window;
        let mut wait = Duration::ZERO;
        let mut delay = Duration::ZERO;
        for (key, limit) in self.keys(email, client) {
            let (Limit::Refuse(n) | Limit::Slow(n)) = limit;
            let nth = u32::try_from(n).unwrap_or(u32::MAX).max(1);
            let Some(at) = store.login_failure(&key, since, nth).await? else {
                continue;
            };
            match limit {
                Limit::Refuse(_) => {
                    let until = (at + window - now).to_std().unwrap_or_default();
                    wait = wait.max(until);
                }
                Limit::Slow(_) => delay = self.limits.slow_by,
            }
        }
        Ok(if wait.is_zero() {
            Ok(delay)
        } else {
            Err(wait.max(Duration::from_secs(1)))
        })
    }

    /// Counts a failed log-in at `now`.
    pub(crate) async fn failed(
        &self,
        store: &dyn Store,
        email: &str,
        client: Option<IpAddr>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let keys: Vec<String> = self
            .keys(email, client)
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        store
            .add_login_failure(&keys, now, now - self.window())
            .await
    }

    fn window(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.limits.window).unwrap_or(chrono::Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const ADA: &str = "ada@example.com";

    async fn throttle() -> (LoginThrottle, Arc<dyn Store>) {
        let t = LoginThrottle::new(LoginLimits {
            per_email_and_address: 3,
            per_address: 5,
            slow_email_after: 4,
            slow_by: Duration::from_secs(2),
            window: Duration::from_secs(60),
        });
        (t, agency_store::open("sqlite::memory:").await.unwrap())
    }

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + chrono::Duration::seconds(1_800_000_000 + secs)
    }

    #[tokio::test]
    async fn an_address_is_refused_an_email_past_its_failures_until_the_oldest_expires() {
        let (t, s) = throttle().await;
        for i in 0..3 {
            let now = at(10 * i);
            assert_eq!(
                t.check(&*s, ADA, ip("10.0.0.1"), now).await.unwrap(),
                Ok(Duration::ZERO)
            );
            t.failed(&*s, ADA, ip("10.0.0.1"), now).await.unwrap();
        }
        // Failures at 0 s, 10 s and 20 s; now 30 s: the first leaves the window at 60 s.
        assert_eq!(
            t.check(&*s, " ADA@example.com", ip("10.0.0.1"), at(30))
                .await
                .unwrap(),
            Err(Duration::from_secs(30))
        );
        // The owner, elsewhere, is not locked out.
        assert_eq!(
            t.check(&*s, ADA, ip("10.0.0.2"), at(30)).await.unwrap(),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            t.check(&*s, ADA, ip("10.0.0.1"), at(60)).await.unwrap(),
            Ok(Duration::ZERO)
        );
    }

    #[tokio::test]
    async fn failures_for_an_email_from_many_addresses_slow_it_without_refusing_it() {
        let (t, s) = throttle().await;
        for i in 0..4 {
            t.failed(&*s, ADA, ip(&format!("10.0.1.{i}")), at(0))
                .await
                .unwrap();
        }
        // Every address, the owner's too, waits before its password is checked; none is
        // refused.
        assert_eq!(
            t.check(&*s, ADA, ip("10.0.0.7"), at(1)).await.unwrap(),
            Ok(Duration::from_secs(2))
        );
        assert_eq!(
            t.check(&*s, ADA, ip("10.0.1.0"), at(1)).await.unwrap(),
            Ok(Duration::from_secs(2))
        );
        assert_eq!(
            t.check(&*s, "bob@example.com", ip("10.0.0.7"), at(1))
                .await
                .unwrap(),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            t.check(&*s, ADA, ip("10.0.0.7"), at(60)).await.unwrap(),
            Ok(Duration::ZERO)
        );
    }

    #[tokio::test]
    async fn an_address_is_refused_past_its_failures_for_every_email() {
        let (t, s) = throttle().await;
        for i in 0..5 {
            t.failed(&*s, &format!("user{i}@example.com"), ip("10.0.0.9"), at(0))
                .await
                .unwrap();
        }
        assert!(
            t.check(&*s, "someone@example.com", ip("10.0.0.9"), at(1))
                .await
                .unwrap()
                .is_err()
        );
        // The same emails from elsewhere are not blocked (each failed once).
        assert_eq!(
            t.check(&*s, "user1@example.com", ip("10.0.0.8"), at(1))
                .await
                .unwrap(),
            Ok(Duration::ZERO)
        );
        // Without an address, only the email counts.
        assert_eq!(
            t.check(&*s, "someone@example.com", None, at(1))
                .await
                .unwrap(),
            Ok(Duration::ZERO)
        );
        for _ in 0..3 {
            t.failed(&*s, "someone@example.com", None, at(1))
                .await
                .unwrap();
        }
        assert!(
            t.check(&*s, "someone@example.com", None, at(2))
                .await
                .unwrap()
                .is_err()
        );
    }

    #[tokio::test]
    async fn the_store_keeps_no_email_or_address_in_clear() {
        let (t, _) = throttle().await;
        for (key, _) in t.keys(ADA, ip("10.0.0.1")) {
            assert_eq!(key.len(), 64);
            assert!(!key.contains("ada") && !key.contains("10.0"));
        }
    }
}
