//! A conversation's entries, as spec 002's content query returns them: one per turn, with the
//! user's query, what the agents made of it, the answer, a summary, the time and the cost.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::ids::TurnId;
use crate::message::{Message, MessageKind, StopReason, TurnRecord};
use crate::price::Usage;
use crate::{AgentId, Roster};

/// One turn of a conversation, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub turn: TurnId,
    /// 1 for the first turn.
    pub number: u32,
    /// The text the entry agent's model was given (the user's message, as delivered).
    pub prompt: String,
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
}

/// The entries of a conversation from its turn records and its messages (in `seq` order).
/// A turn without a record (still running, or interrupted by a crash) has an entry too.
pub fn entries(turns: &[TurnRecord], messages: &[Message], roster: &Roster) -> Vec<Entry> {
    let records: HashMap<TurnId, &TurnRecord> = turns.iter().map(|t| (t.id, t)).collect();
    let mut answers: HashMap<TurnId, &str> = HashMap::new();
    let mut workers: HashMap<TurnId, Vec<AgentId>> = HashMap::new();
    for m in messages {
        let Some(turn) = m.turn_id else { continue };
        match m.kind {
            MessageKind::Answer => {
                answers.insert(turn, &m.text);
            }
            MessageKind::Reply => {
                if let Some(agent) = m.agent {
                    let w = workers.entry(turn).or_default();
                    if !w.contains(&agent) {
                        w.push(agent);
                    }
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
            let ending = match record {
                None => "in progress".to_string(),
                Some(r) => match (&r.error, r.stopped_by) {
                    (Some(_), _) => "failed".to_string(),
                    (None, Some(s)) => s.as_str().to_string(),
                    (None, None) => "in progress".to_string(),
                },
            };
            Some(Entry {
                turn,
                number: record.map_or(0, |r| r.number),
                prompt: input.text.clone(),
                response: answers.get(&turn).map(|a| (*a).to_string()),
                summary: format!(
                    "{hops} hop{} by {}; {ending}",
                    if hops == 1 { "" } else { "s" },
                    if names.is_empty() {
                        "no agent".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
                user_query: input.text.clone(),
                timestamp: input.created_at,
                usage: record.map(|r| r.usage).unwrap_or_default(),
                response_time_ms: record.and_then(|r| {
                    let ms = (r.finished_at? - r.started_at).num_milliseconds();
                    u64::try_from(ms).ok()
                }),
                stopped_by: record.and_then(|r| r.stopped_by),
                error: record.and_then(|r| r.error.clone()),
            })
        })
        .collect()
}
