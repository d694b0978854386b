//! The JSON this API speaks, converted from the domain explicitly.

use agency_core::{Roster, Usage as CoreUsage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostMessage {
    pub text: String,
}

#[derive(Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

impl From<CoreUsage> for Usage {
    fn from(u: CoreUsage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total(),
        }
    }
}

#[derive(Serialize)]
pub struct Agent {
    pub id: u32,
    pub name: String,
    pub handle: Option<String>,
    pub role: Option<String>,
    pub model: String,
}

#[derive(Serialize)]
pub struct Agency {
    pub id: String,
    pub name: String,
    pub protocol: &'static str,
    pub manager: String,
    pub max_hops: u32,
    pub turn_deadline_secs: u64,
    pub agents: Vec<Agent>,
}

impl From<&agency_core::Agency> for Agency {
    fn from(a: &agency_core::Agency) -> Self {
        Self {
            id: a.id.to_string(),
            name: a.name.clone(),
            protocol: a.protocol.as_str(),
            manager: a.roster().display(Some(a.manager)).to_string(),
            max_hops: a.limits.max_hops,
            turn_deadline_secs: a.limits.turn_deadline.as_secs(),
            agents: a
                .agents
                .iter()
                .map(|g| Agent {
                    id: g.id.get(),
                    name: g.name.clone(),
                    handle: g.handle.clone(),
                    role: g.role.clone(),
                    model: g.model.to_string(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
pub struct Turn {
    pub id: String,
    pub number: u32,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub stopped_by: Option<&'static str>,
    pub hops: u32,
    pub usage: Usage,
    pub error: Option<String>,
}

impl From<&agency_core::TurnRecord> for Turn {
    fn from(t: &agency_core::TurnRecord) -> Self {
        Self {
            id: t.id.to_string(),
            number: t.number,
            started_at: t.started_at,
            finished_at: t.finished_at,
            stopped_by: t.stopped_by.map(|s| s.as_str()),
            hops: t.hops,
            usage: t.usage.into(),
            error: t.error.clone(),
        }
    }
}

#[derive(Serialize)]
pub struct Conversation {
    pub id: String,
    pub agency_id: String,
    pub created_at: DateTime<Utc>,
    pub turns: Vec<Turn>,
}

impl Conversation {
    pub fn new(c: &agency_core::Conversation, turns: Vec<Turn>) -> Self {
        Self {
            id: c.id.to_string(),
            agency_id: c.agency_id.to_string(),
            created_at: c.created_at,
            turns,
        }
    }
}

#[derive(Serialize)]
pub struct TraceEntry {
    pub from: String,
    pub to: String,
    pub kind: &'static str,
    pub text: String,
    pub usage: Option<Usage>,
}

impl TraceEntry {
    pub fn new(e: &agency_core::TraceEntry, roster: &Roster) -> Self {
        Self {
            from: e.from_name(roster).to_string(),
            to: e.to_name(roster).to_string(),
            kind: e.kind.as_str(),
            text: e.text.clone(),
            usage: e.usage.map(Into::into),
        }
    }
}

#[derive(Serialize)]
pub struct TurnResult {
    pub conversation_id: String,
    pub turn_id: String,
    pub number: u32,
    pub answer: String,
    pub stopped_by: &'static str,
    pub hops: u32,
    pub usage: Usage,
    pub trace: Vec<TraceEntry>,
}

impl From<&agency_runtime::TurnOutcome> for TurnResult {
    fn from(o: &agency_runtime::TurnOutcome) -> Self {
        Self {
            conversation_id: o.conversation_id.to_string(),
            turn_id: o.turn_id.to_string(),
            number: o.number,
            answer: o.answer.clone(),
            stopped_by: o.stopped_by.as_str(),
            hops: o.hops,
            usage: o.usage.into(),
            trace: o
                .trace
                .iter()
                .map(|e| TraceEntry::new(e, &o.roster))
                .collect(),
        }
    }
}

#[derive(Serialize)]
pub struct TurnTrace {
    pub turn: Turn,
    pub trace: Vec<TraceEntry>,
}

/// A message in some agent's context (or, with `agent: null`, the user's transcript).
#[derive(Serialize)]
pub struct Message {
    pub id: String,
    pub seq: i64,
    pub agent: Option<String>,
    pub role: &'static str,
    pub kind: &'static str,
    pub linked_message_id: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub text: String,
    pub usage: Option<Usage>,
    pub latency_ms: Option<u32>,
    pub included: bool,
    pub created_at: DateTime<Utc>,
}

impl Message {
    pub fn new(m: &agency_core::Message, roster: &Roster) -> Self {
        let name = |a: Option<agency_core::AgentId>| a.map(|a| roster.display(Some(a)).to_string());
        Self {
            id: m.id.to_string(),
            seq: m.seq,
            agent: name(m.agent),
            role: m.role().as_str(),
            kind: m.kind.as_str(),
            linked_message_id: m.linked.map(|l| l.to_string()),
            from: name(m.from),
            to: name(m.to),
            text: m.text.clone(),
            usage: m.usage.map(Into::into),
            latency_ms: m.latency_ms,
            included: m.included,
            created_at: m.created_at,
        }
    }
}
