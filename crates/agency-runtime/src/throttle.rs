//! Failed log-ins, counted per email and per client address in a sliding window, in memory.
//! Past the limit a log-in is refused before its password is checked, until the oldest
//! failure leaves the window. Successful log-ins count nothing, so one person's typos do not
//! lock out anyone else, and other people's failures block an email only through the
//! address they come from.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How many failures are allowed in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    pub per_email: usize,
    pub per_address: usize,
    pub window: Duration,
}

impl Default for LoginLimits {
    /// 5 failures per email and 30 per address in 15 minutes.
    fn default() -> Self {
        Self {
            per_email: 5,
            per_address: 30,
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

impl LoginThrottle {
    pub(crate) fn new(limits: LoginLimits) -> Self {
        Self {
            limits,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn keys(&self, email: &str, client: Option<IpAddr>) -> Vec<(String, usize)> {
        let mut keys = vec![(
            format!("email:{}", email.trim().to_lowercase()),
            self.limits.per_email,
        )];
        if let Some(ip) = client {
            keys.push((format!("addr:{ip}"), self.limits.per_address));
        }
        keys
    }

    /// `Err(wait)` when the email or the address is past its limit: the time until the
    /// oldest failure that keeps it there leaves the window.
    pub(crate) fn check(&self, email: &str, client: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        let mut failures = self.lock();
        let mut wait = Duration::ZERO;
        for (key, limit) in self.keys(email, client) {
            if let Some(times) = failures.get_mut(&key) {
                expire(times, now, self.limits.window);
                if times.len() >= limit {
                    let oldest = times.len() - limit;
                    let until = times[oldest] + self.limits.window;
                    wait = wait.max(until.saturating_duration_since(now));
                }
            }
        }
        if wait.is_zero() {
            Ok(())
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
            per_email: 3,
            per_address: 5,
            window: Duration::from_secs(60),
        })
    }

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[tokio::test(start_paused = true)]
    async fn an_email_is_refused_past_its_failures_until_the_oldest_expires() {
        let t = throttle();
        for _ in 0..3 {
            assert_eq!(t.check(ADA, ip("10.0.0.1")), Ok(()));
            t.failed(ADA, ip("10.0.0.1"));
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        // Failures at 0 s, 10 s and 20 s; now 30 s: the first leaves the window at 60 s.
        assert_eq!(
            t.check(" ADA@example.com", ip("10.0.0.2")),
            Err(Duration::from_secs(30))
        );
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(t.check(ADA, ip("10.0.0.1")), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_refused_past_its_failures_for_every_email() {
        let t = throttle();
        for i in 0..5 {
            t.failed(&format!("user{i}@example.com"), ip("10.0.0.9"));
        }
        assert!(t.check("someone@example.com", ip("10.0.0.9")).is_err());
        // The same emails from elsewhere are not blocked (each failed once).
        assert_eq!(t.check("user1@example.com", ip("10.0.0.8")), Ok(()));
        // Without an address, only the email counts.
        assert_eq!(t.check("someone@example.com", None), Ok(()));
    }
}
