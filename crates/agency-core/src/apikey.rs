//! API keys: who may call an agency's endpoint. The key itself is never here — only its
//! keyed hash and a prefix to recognise it by.

use chrono::{DateTime, Utc};

use crate::ids::AgencyId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: uuid::Uuid,
    pub agency_id: AgencyId,
    /// The owner's name for it (`dev`, `prod`); unique among the agency's unrevoked keys.
    pub name: String,
    /// The key's first characters, shown in lists (`agk_3fa9c2e1`).
    pub prefix: String,
    /// Keyed hash (HMAC-SHA256, hex) of the whole key.
    pub hash: String,
    /// Requests per minute this key may make.
    pub rate_limit_per_minute: u32,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// What the key and its end users may spend.
    pub budgets: KeyBudgets,
}

/// What a key may spend, all its end users together, and what each end user of it may (the
/// end user a request names), both per the same period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyBudgets {
    /// Micro-dollars for the whole key.
    pub usd: Option<u64>,
    /// Micro-dollars for each end user.
    pub user_usd: Option<u64>,
    pub period: crate::spend::Period,
}

impl KeyBudgets {
    pub fn is_none(&self) -> bool {
        self.usd.is_none() && self.user_usd.is_none()
    }

    pub fn key(&self) -> Option<crate::spend::Budget> {
        self.usd.map(|usd| crate::spend::Budget {
            usd,
            period: self.period,
        })
    }

    pub fn user(&self) -> Option<crate::spend::Budget> {
        self.user_usd.map(|usd| crate::spend::Budget {
            usd,
            period: self.period,
        })
    }
}

/// Whether a key may be used now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    Active,
    Expired,
    Revoked,
}

impl ApiKey {
    pub const DEFAULT_RATE_LIMIT: u32 = 600;

    pub fn state(&self, now: DateTime<Utc>) -> KeyState {
        if self.revoked_at.is_some_and(|t| t <= now) {
            KeyState::Revoked
        } else if self.expires_at.is_some_and(|t| t <= now) {
            KeyState::Expired
        } else {
            KeyState::Active
        }
    }
}

/// `1s`, `15m`, `2h`, `30d`, `1w`: a duration as people write it.
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok().filter(|n| *n > 0)?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return None,
    };
    n.checked_mul(secs).map(std::time::Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("1s"),
            Some(std::time::Duration::from_secs(1))
        );
        assert_eq!(
            parse_duration("15m"),
            Some(std::time::Duration::from_secs(900))
        );
        assert_eq!(
            parse_duration("30d"),
            Some(std::time::Duration::from_secs(2_592_000))
        );
        for bad in [
            "",
            "5",
            "m",
            "0s",
            "1y",
            "-1d",
            "1.5h",
            "99999999999999999999s",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn states() {
        let now = Utc::now();
        let mut k = ApiKey {
            id: uuid::Uuid::now_v7(),
            agency_id: AgencyId::new(),
            name: "dev".into(),
            prefix: "agk_".into(),
            hash: String::new(),
            rate_limit_per_minute: 1,
            created_at: now,
            expires_at: None,
            last_used_at: None,
            revoked_at: None,
            budgets: KeyBudgets::default(),
        };
        assert_eq!(k.state(now), KeyState::Active);
        k.expires_at = Some(now);
        assert_eq!(k.state(now), KeyState::Expired);
        k.revoked_at = Some(now);
        assert_eq!(k.state(now), KeyState::Revoked);
    }
}
