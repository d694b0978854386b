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
    /// For an observation a chat message led to: that message's conversation and turn.
    pub origin: Option<ChatOrigin>,
    pub created_at: DateTime<Utc>,
}

/// Where in a conversation an observation came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatOrigin {
    pub conversation: crate::ConversationId,
    pub turn: crate::TurnId,
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

/// An agent's own reflection settings, as its agency file gives them (unset: the defaults of
/// [`ReflectionPolicy`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemorySettings {
    pub reflection_threshold: Option<f64>,
    pub half_life_hours: Option<f64>,
    /// It checks each chat message it is sent over MQTT for something worth observing.
    pub observe_chats: bool,
}

impl MemorySettings {
    pub fn policy(&self) -> ReflectionPolicy {
        let d = ReflectionPolicy::default();
        ReflectionPolicy {
            threshold: self.reflection_threshold.unwrap_or(d.threshold),
            half_life_hours: self.half_life_hours.unwrap_or(d.half_life_hours),
        }
    }
}

/// Largest reflection threshold or half-life accepted (a bound that keeps the arithmetic sane).
pub const MAX_SETTING: f64 = 1.0e6;

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

/// What a model answers to [`MemoryTask::Check`] when there is nothing to observe.
const NONE: &str = "NONE";

/// The observation in a model's answer to [`MemoryTask::Check`]: `None` when it answered
/// `NONE` (or nothing).
pub fn observation_in(answer: &str) -> Option<String> {
    let text = answer
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '`')
        .trim();
    let first = text
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    (!text.is_empty() && !first.eq_ignore_ascii_case(NONE)).then(|| text.to_string())
}

/// The importance an observation gets when its model's answer holds no number.
pub const FALLBACK_IMPORTANCE: f64 = 0.5;

/// The importance read from a model's answer, or [`FALLBACK_IMPORTANCE`].
pub fn importance_or_fallback(answer: &str) -> f64 {
    parse_importance(answer).unwrap_or(FALLBACK_IMPORTANCE)
}

/// Words that make the built-in rules model rate an observation as important.
const ALERT_WORDS: &[&str] = &[
    "alarm",
    "alert",
    "broken",
    "critical",
    "danger",
    "down",
    "emergency",
    "error",
    "exceed",
    "fail",
    "fault",
    "fire",
    "leak",
    "overheat",
    "stopped",
    "urgent",
];

/// What the memory cycle asks an agent's model. Chat models read [`MemoryTask::prompt`]; the
/// built-in rules model answers [`MemoryTask::rules_answer`], deterministically.
#[derive(Clone, Debug, PartialEq)]
pub enum MemoryTask {
    /// Whether a chat message tells the agent something worth remembering: the observation,
    /// in a sentence, or `NONE`.
    Check { message: String },
    /// How important an observation is, from 0 to 1.
    Importance { observation: String },
    /// Insights from the memories since the last reflection (oldest first).
    Reflect { memories: Vec<(f64, String)> },
    /// Whether a reflection calls for a plan, and which: tasks with actions, as JSON.
    Plan {
        reflection: String,
        memories: Vec<(f64, String)>,
    },
}

impl MemoryTask {
    /// The request as a chat model reads it.
    pub fn prompt(&self) -> String {
        match self {
            MemoryTask::Check { message } => format!(
                "You were sent this message in a conversation. If it states something about your \
                 work worth remembering (an event, a reading, a change, a fact), answer it as one \
                 short observation in your own words; otherwise answer NONE.\n\nMessage: {message}"
            ),
            MemoryTask::Importance { observation } => format!(
                "Rate how important this observation is for your work, from 0 (mundane) to 1 \
                 (critical). Answer with the number alone.\n\nObservation: {observation}"
            ),
            MemoryTask::Reflect { memories } => format!(
                "Here is what you observed since you last reflected, oldest first, each with its \
                 importance. Write the few insights that matter most, briefly.\n\n{}",
                listing(memories)
            ),
            MemoryTask::Plan {
                reflection,
                memories,
            } => format!(
                "You reflected: {reflection}\n\nFrom these observations:\n{}\n\nIf they call \
                 for action, answer a plan as JSON: {{\"tasks\": [{{\"description\": \"...\", \
                 \"actions\": [{{\"name\": \"verb\", \"parameters\": [\"object\"]}}]}}]}} (action \
                 names and parameters are single words, PDDL symbols). If nothing needs doing, \
                 answer {{\"tasks\": []}}. Answer the JSON alone.",
                listing(memories)
            ),
        }
    }

    /// The built-in rules model's answer: a chat message that states something (three words or
    /// more, not a question) is an observation as it stands; an observation with an alert word (`exceeded`,
    /// `failure`, `alarm`, ...) is important (0.9), any other is not (0.3); a reflection lists
    /// what it was written from; a plan has one task per important memory (importance 0.5 or
    /// more): investigate it, then report it to the manager.
    pub fn rules_answer(&self) -> String {
        match self {
            MemoryTask::Check { message } => {
                let message = message.trim();
                if message.ends_with('?') || message.split_whitespace().count() < 3 {
                    NONE.to_string()
                } else {
                    message.to_string()
                }
            }
            MemoryTask::Importance { observation } => {
                let lower = observation.to_lowercase();
                if ALERT_WORDS.iter().any(|w| lower.contains(w)) {
                    "0.9".to_string()
                } else {
                    "0.3".to_string()
                }
            }
            MemoryTask::Reflect { memories } => format!(
                "{} observations to act on: {}",
                memories.len(),
                memories
                    .iter()
                    .map(|(_, m)| m.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            MemoryTask::Plan { memories, .. } => {
                let tasks: Vec<serde_json::Value> = memories
                    .iter()
                    .enumerate()
                    .filter(|(_, (importance, _))| *importance >= 0.5)
                    .map(|(i, (_, text))| {
                        let object = format!("observation-{}", i + 1);
                        serde_json::json!({
                            "description": format!("Follow up: {text}"),
                            "actions": [
                                {"name": "investigate", "parameters": [object]},
                                {"name": "report", "parameters": [object, "manager"]},
                            ],
                        })
                    })
                    .collect();
                serde_json::json!({ "tasks": tasks }).to_string()
            }
        }
    }
}

fn listing(memories: &[(f64, String)]) -> String {
    memories
        .iter()
        .enumerate()
        .map(|(i, (importance, text))| format!("{}. [{importance:.2}] {text}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The system prompt of a memory task: who the agent is, without the routing format.
pub fn system_prompt(agency: &crate::Agency, agent: &crate::Agent) -> String {
    let mut out = format!(
        "You are {}, an agent of the agency \"{}\".",
        agent.name, agency.name
    );
    if let Some(role) = &agent.role {
        out.push_str(&format!(" Your role: {role}."));
    }
    out.push_str(
        " You keep a memory of what you observe. Answer the request plainly, in the form it asks for.",
    );
    out
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
            origin: None,
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
        assert_eq!(importance_or_fallback("no idea"), FALLBACK_IMPORTANCE);
    }

    #[test]
    fn the_rules_model_answers_memory_tasks_deterministically() {
        let rate = |o: &str| {
            MemoryTask::Importance {
                observation: o.into(),
            }
            .rules_answer()
        };
        assert_eq!(rate("Temperature EXCEEDED the normal range"), "0.9");
        assert_eq!(rate("The shift changed"), "0.3");
        let memories = vec![(0.9, "pump leak".to_string()), (0.3, "shift".to_string())];
        let reflect = MemoryTask::Reflect {
            memories: memories.clone(),
        };
        assert_eq!(
            reflect.rules_answer(),
            "2 observations to act on: pump leak; shift"
        );
        assert!(reflect.prompt().contains("1. [0.90] pump leak"));
        let plan = MemoryTask::Plan {
            reflection: "r".into(),
            memories,
        }
        .rules_answer();
        let v: serde_json::Value = serde_json::from_str(&plan).unwrap();
        assert_eq!(v["tasks"].as_array().map(Vec::len), Some(1));
        assert_eq!(v["tasks"][0]["description"], "Follow up: pump leak");
        assert_eq!(v["tasks"][0]["actions"][1]["parameters"][1], "manager");
    }

    #[test]
    fn a_chat_message_is_checked_for_an_observation() {
        let check = |m: &str| MemoryTask::Check { message: m.into() }.rules_answer();
        // The rules model: a statement is an observation as it stands; a question is not.
        assert_eq!(
            check("  Pump 7 pressure exceeded 8 bar "),
            "Pump 7 pressure exceeded 8 bar"
        );
        assert_eq!(check("status of XYZ?"), "NONE");
        assert_eq!(check("hello there"), "NONE");
        for answer in [
            check("status of XYZ?"),
            "none.".into(),
            " \"NONE\" ".into(),
            "".into(),
        ] {
            assert_eq!(observation_in(&answer), None, "{answer:?}");
        }
        assert_eq!(
            observation_in("\"Valve 9 leaks since noon.\""),
            Some("Valve 9 leaks since noon.".to_string())
        );
        // A word that only starts like NONE is an observation.
        assert_eq!(
            observation_in("Nonessential load shed at 4pm"),
            Some("Nonessential load shed at 4pm".to_string())
        );
        assert!(
            MemoryTask::Check {
                message: "m".into()
            }
            .prompt()
            .contains("Message: m")
        );
    }
}
