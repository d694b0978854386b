//! Failed log-ins, counted in a sliding window, in memory, three ways:
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

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

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

/// Past this many keys, a failure also forgets every key whose failures have all expired.
const PRUNE_ABOVE: usize = 10_000;

pub(crate) struct LoginThrottle {
    limits: LoginLimits,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

/// What a counted failure limits.
enum Limit {
    Refuse(usize),
    Slow(usize),
}

impl LoginThrottle {
    pub(crate) fn new(limits: LoginLimits) -> Self {
        Self {
            limits,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The keys a failure counts under, each with what it limits. Without an address (a log-in
    /// not over the network) the email alone is refused past its limit.
    fn keys(&self, email: &str, client: Option<IpAddr>) -> Vec<(String, Limit)> {
        let email = email.trim().to_lowercase();
        let l = &self.limits;
        match client {
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
        }
    }

    /// `Err(wait)` when this address (or, without one, the email) is past a limit: the time
    /// until the oldest failure that keeps it there leaves the window. Else `Ok(delay)`: how
    /// long the attempt waits before its password is checked (zero unless the email is past
    /// its limit for slowing).
    pub(crate) fn check(&self, email: &str, client: Option<IpAddr>) -> Result<Duration, Duration> {
        let now = Instant::now();
        let mut failures = self.lock();
        let mut wait = Duration::ZERO;
        let mut delay = Duration::ZERO;
        for (key, limit) in self.keys(email, client) {
            let Some(times) = failures.get_mut(&key) else {
                continue;
            };
            expire(times, now, self.limits.window);
            match limit {
                Limit::Refuse(limit) if times.len() >= limit => {
                    let oldest = times.len() - limit;
                    let until = times[oldest] + self.limits.window;
                    wait = wait.max(until.saturating_duration_since(now));
                }
                Limit::Slow(limit) if times.len() >= limit => delay = self.limits.slow_by,
                _ => {}
            }
        }
        if wait.is_zero() {
            Ok(delay)
        } else {
            Err(wait.max(Duration::from_secs(1)))
        }
    }

    /// Counts a failed log-in.
    pub(crate) fn failed(&self, email: &str, client: Option<IpAddr>) {
        let now = Instant::now();
        let window = self.limits.window;
        let mut failures = self.lock();
        if failures.len() > PRUNE_ABOVE {
            failures.retain(|_, times| {
                expire(times, now, window);
                !times.is_empty()
            });
        }
        for (key, _) in self.keys(email, client) {
            let times = failures.entry(key).or_default();
            expire(times, now, window);
            times.push_back(now);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Instant>>> {
        match self.failures.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn expire(times: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= window)
    {
        times.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADA: &str = "ada@example.com";

    fn throttle() -> LoginThrottle {
        LoginThrottle::new(LoginLimits {
            per_email_and_address: 3,
            per_address: 5,
            slow_email_after: 4,
            slow_by: Duration::from_secs(2),
            window: Duration::from_secs(60),
        })
    }

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_refused_an_email_past_its_failures_until_the_oldest_expires() {
        let t = throttle();
        for _ in 0..3 {
            assert_eq!(t.check(ADA, ip("10.0.0.1")), Ok(Duration::ZERO));
            t.failed(ADA, ip("10.0.0.1"));
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        // Failures at 0 s, 10 s and 20 s; now 30 s: the first leaves the window at 60 s.
        assert_eq!(
            t.check(" ADA@example.com", ip("10.0.0.1")),
            Err(Duration::from_secs(30))
        );
        // The owner, elsewhere, is not locked out.
        assert_eq!(t.check(ADA, ip("10.0.0.2")), Ok(Duration::ZERO));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(t.check(ADA, ip("10.0.0.1")), Ok(Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_for_an_email_from_many_addresses_slow_it_without_refusing_it() {
        let t = throttle();
        for i in 0..4 {
            t.failed(ADA, ip(&format!("10.0.1.{i}")));
        }
        // Every address, the owner's too, waits before its password is checked; none is
        // refused.
        assert_eq!(t.check(ADA, ip("10.0.0.7")), Ok(Duration::from_secs(2)));
        assert_eq!(t.check(ADA, ip("10.0.1.0")), Ok(Duration::from_secs(2)));
        assert_eq!(
            t.check("bob@example.com", ip("10.0.0.7")),
            Ok(Duration::ZERO)
        );
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(t.check(ADA, ip("10.0.0.7")), Ok(Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_refused_past_its_failures_for_every_email() {
        let t = throttle();
        for i in 0..5 {
            t.failed(&format!("user{i}@example.com"), ip("10.0.0.9"));
        }
        assert!(t.check("someone@example.com", ip("10.0.0.9")).is_err());
        // The same emails from elsewhere are not blocked (each failed once).
        assert_eq!(
            t.check("user1@example.com", ip("10.0.0.8")),
            Ok(Duration::ZERO)
        );
        // Without an address, only the email counts.
        assert_eq!(t.check("someone@example.com", None), Ok(Duration::ZERO));
        for _ in 0..3 {
            t.failed("someone@example.com", None);
        }
        assert!(t.check("someone@example.com", None).is_err());
    }
}
