//! A conversation's entries, as spec 002's content query returns them: one per turn, with the
//! user's query, what the entry agent was sent and replied, the answer, a summary, the time and
//! the cost, the tools the turn used, and the observations its message led to.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::ids::TurnId;
use crate::message::{Message, MessageKind, StopReason, TurnRecord};
use crate::price::Usage;
use crate::tool::ToolPart;
use crate::{AgentId, Protocol, Roster};

/// The most of a tool's result an entry keeps (its summary).
const RESULT_SUMMARY_CHARS: usize = 200;

/// A tool call of a turn, as its entry tells it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolUse {
    /// The agent that called it, by name.
    pub agent: String,
    /// `server/tool`.
    pub name: String,
    pub arguments: String,
    /// The start of its result (`None` while it runs), and whether it was an error.
    pub result: Option<String>,
    pub is_error: bool,
    /// How long the call took, once it answered.
    pub latency_ms: Option<u32>,
}

/// One turn of a conversation, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub turn: TurnId,
    /// 1 for the first turn.
    pub number: u32,
    /// What the entry agent's model was sent: the user's message, framed as its protocol
    /// frames it.
    pub prompt: String,
    /// What the entry agent's model last replied in the turn, as it wrote it (before routing
    /// took the answer out of it); `None` before it replied.
    pub reply: Option<String>,
    /// The answer; `None` while the turn runs or when it failed.
    pub response: Option<String>,
    /// Who worked on it and how it ended, in one line.
    pub summary: String,
    /// The user's message as sent.
    pub user_query: String,
    pub timestamp: DateTime<Utc>,
    /// Every model call of the turn.
    pub usage: Usage,
    /// From the user's message to the answer; `None` while the turn runs.
    pub response_time_ms: Option<u64>,
    pub stopped_by: Option<StopReason>,
    pub error: Option<String>,
    /// Replies it took, and the tools its agents called, in order.
    pub hops: u32,
    pub tools: Vec<ToolUse>,
    /// What the agent observed from the user's message (see `observe_chats`), oldest first.
    pub observations: Vec<crate::memory::Memory>,
}

/// A turn in words: `3 hops by lead, helper; answered`.
fn summary(record: Option<&TurnRecord>, names: &[&str]) -> String {
    let hops = record.map_or(0, |r| r.hops);
    let ending = match record {
        Some(r) if r.error.is_some() => "failed",
        Some(TurnRecord {
            stopped_by: Some(s),
            ..
        }) => s.as_str(),
        _ => "in progress",
    };
    format!(
        "{hops} hop{} by {}; {ending}",
        if hops == 1 { "" } else { "s" },
        if names.is_empty() {
            "no agent".to_string()
        } else {
            names.join(", ")
        }
    )
}

/// The entries of a conversation from its turn records and its messages (in `seq` order).
/// A turn without a record (still running, or interrupted by a crash) has an entry too.
/// `manager` is the entry agent, `protocol` how its messages are framed; `observations` are
/// the conversation's observations (each names its turn).
pub fn entries(
    turns: &[TurnRecord],
    messages: &[Message],
    observations: &[crate::memory::Memory],
    roster: &Roster,
    (manager, protocol): (AgentId, Protocol),
) -> Vec<Entry> {
    let records: HashMap<TurnId, &TurnRecord> = turns.iter().map(|t| (t.id, t)).collect();
    let mut answers: HashMap<TurnId, &str> = HashMap::new();
    let mut replies: HashMap<TurnId, &str> = HashMap::new();
    let mut workers: HashMap<TurnId, Vec<AgentId>> = HashMap::new();
    // Each call with its id, which its result names.
    let mut tools: HashMap<TurnId, Vec<(&str, ToolUse)>> = HashMap::new();
    for m in messages {
        let Some(turn) = m.turn_id else { continue };
        match (m.kind, &m.tool) {
            (MessageKind::Answer, _) => {
                answers.insert(turn, &m.text);
            }
            (MessageKind::Reply, tool) => {
                if let Some(agent) = m.agent {
                    let w = workers.entry(turn).or_default();
                    if !w.contains(&agent) {
                        w.push(agent);
                    }
                }
                if m.agent == Some(manager) && !m.text.is_empty() {
                    replies.insert(turn, &m.text);
                }
                if let Some(ToolPart::Calls(calls)) = tool {
                    tools.entry(turn).or_default().extend(calls.iter().map(|c| {
                        let used = ToolUse {
                            agent: roster.display(m.agent).to_string(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                            result: None,
                            is_error: false,
                            latency_ms: None,
                        };
                        (c.id.as_str(), used)
                    }));
                }
            }
            (MessageKind::ToolResult, Some(ToolPart::Result(r))) => {
                // Its call: the latest of its id in the turn without a result yet.
                if let Some((_, call)) = tools.get_mut(&turn).and_then(|t| {
                    t.iter_mut()
                        .rev()
                        .find(|(id, c)| *id == r.call_id && c.result.is_none())
                }) {
                    call.result = Some(m.text.chars().take(RESULT_SUMMARY_CHARS).collect());
                    call.is_error = r.is_error;
                    call.latency_ms = m.latency_ms;
                }
            }
            _ => {}
        }
    }
    messages
        .iter()
        .filter(|m| m.kind == MessageKind::Input)
        .filter_map(|input| {
            let turn = input.turn_id?;
            let record = records.get(&turn).copied();
            let names: Vec<&str> = workers
                .get(&turn)
                .map(|w| w.iter().map(|a| roster.display(Some(*a))).collect())
                .unwrap_or_default();
            let hops = record.map_or(0, |r| r.hops);
            Some(Entry {
                turn,
                number: record.map_or(0, |r| r.number),
                prompt: crate::protocol::frame(protocol, None, &input.text, roster),
                reply: replies.get(&turn).map(|r| (*r).to_string()),
                response: answers.get(&turn).map(|a| (*a).to_string()),
                summary: summary(record, &names),
                user_query: input.text.clone(),
                timestamp: input.created_at,
                usage: record.map(|r| r.usage).unwrap_or_default(),
                response_time_ms: record.and_then(|r| {
                    let ms = (r.finished_at? - r.started_at).num_milliseconds();
                    u64::try_from(ms).ok()
                }),
                stopped_by: record.and_then(|r| r.stopped_by),
                error: record.and_then(|r| r.error.clone()),
                hops,
                tools: tools
                    .remove(&turn)
                    .map(|t| t.into_iter().map(|(_, used)| used).collect())
                    .unwrap_or_default(),
                observations: observations
                    .iter()
                    .filter(|o| o.origin.is_some_and(|o| o.turn == turn))
                    .cloned()
                    .collect(),
            })
        })
        .collect()
}
