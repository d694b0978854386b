//! An agent's memory (spec 002's observe → reflect cycle): observations it was given and
//! reflections its model wrote from them, each with an importance from 0 to 1.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{AgencyId, AgentId};

/// A memory's id (uuid v7, made by the service layer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryId(pub Uuid);

impl MemoryId {
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for MemoryId {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Display for MemoryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for MemoryId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    Observation,
    Reflection,
}

impl MemoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Observation => "observation",
            MemoryKind::Reflection => "reflection",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "observation" => Some(MemoryKind::Observation),
            "reflection" => Some(MemoryKind::Reflection),
            _ => None,
        }
    }
}

/// One memory of one agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
    pub id: MemoryId,
    pub agency_id: AgencyId,
    pub agent: AgentId,
    pub kind: MemoryKind,
    pub content: String,
    /// 0 to 1, as the agent's model judged it.
    pub importance: f64,
    /// For a reflection: the memories it was written from.
    pub sources: Vec<MemoryId>,
    pub created_at: DateTime<Utc>,
}

/// When an agent reflects. Defaults: reflect once the decayed importance of what it observed
/// since its last reflection passes 2.0, an observation's weight halving every 24 hours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReflectionPolicy {
    pub threshold: f64,
    pub half_life_hours: f64,
}

impl Default for ReflectionPolicy {
    fn default() -> Self {
        Self {
            threshold: 2.0,
            half_life_hours: 24.0,
        }
    }
}

impl ReflectionPolicy {
    /// The decayed sum of the observations' importance at `now`.
    pub fn pressure(&self, observations: &[Memory], now: DateTime<Utc>) -> f64 {
        observations
            .iter()
            .filter(|m| m.kind == MemoryKind::Observation)
            .map(|m| {
                let hours = (now - m.created_at).num_milliseconds().max(0) as f64 / 3.6e6;
                m.importance * 0.5f64.powf(hours / self.half_life_hours.max(f64::MIN_POSITIVE))
            })
            .sum()
    }

    pub fn should_reflect(&self, observations: &[Memory], now: DateTime<Utc>) -> bool {
        self.pressure(observations, now) >= self.threshold
    }
}

/// An importance from a model's answer: the first number in it, clamped to 0..=1 (a number
/// above 1 is read on a scale of 10). `None` when the answer has no number.
pub fn parse_importance(answer: &str) -> Option<f64> {
    let start = answer.find(|c: char| c.is_ascii_digit())?;
    let number: String = answer[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v: f64 = number.trim_end_matches('.').parse().ok()?;
    let v = if v > 1.0 { v / 10.0 } else { v };
    Some(v.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(importance: f64, hours_ago: i64, now: DateTime<Utc>) -> Memory {
        Memory {
            id: MemoryId::new(),
            agency_id: AgencyId::new(),
            agent: AgentId::first_free(1, |_| false),
            kind: MemoryKind::Observation,
            content: "x".into(),
            importance,
            sources: Vec::new(),
            created_at: now - chrono::Duration::hours(hours_ago),
        }
    }

    #[test]
    fn pressure_decays_by_half_life() {
        let now = Utc::now();
        let p = ReflectionPolicy::default();
        let fresh = p.pressure(&[obs(1.0, 0, now)], now);
        let old = p.pressure(&[obs(1.0, 24, now)], now);
        assert!((fresh - 1.0).abs() < 1e-6);
        assert!((old - 0.5).abs() < 1e-6);
        assert!(!p.should_reflect(&[obs(1.0, 0, now)], now));
        assert!(p.should_reflect(&[obs(1.0, 0, now), obs(1.0, 0, now)], now));
    }

    #[test]
    fn importance_reads_from_prose() {
        assert_eq!(parse_importance("0.8"), Some(0.8));
        assert_eq!(parse_importance("Importance: 7/10"), Some(0.7));
        assert_eq!(parse_importance("about 1."), Some(1.0));
        assert_eq!(parse_importance("none"), None);
    }
}
