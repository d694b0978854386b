//! The server-sent event streams' wire types: one enum per stream, a variant per event, each
//! with its data. The SSE `event:` name is the variant's and `data:` its payload as JSON; the
//! OpenAPI document lists both enums among its schemas as `{"event": name, "data": payload}`.
//! The runtime's events stay domain types: they are converted here, at the edge.

use agency_core::{ConversationId, Roster};
use agency_runtime::Event;
use agency_runtime::rooms::RoomChange;
use axum::response::sse;
use serde::Serialize;
use utoipa::ToSchema;

use crate::wire;

/// A conversation's events (`GET /api/conversations/{id}/events`), as its turns happen.
#[derive(Serialize, ToSchema)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum ConversationEvent {
    TurnStarted(TurnStarted),
    /// An agent's model was called.
    AgentStarted(AgentStarted),
    /// A message reached a context, or (to `user`) the user; or an agent called a tool
    /// (`tool_call`) and the tool answered (`tool_result`).
    Hop(Hop),
    /// A tool an agent called reported how far it is.
    ToolProgress(ToolProgress),
    TurnFinished(TurnFinished),
    TurnFailed(TurnFailed),
    /// A tool call waits for a person's approval (`state` `pending`), or was answered.
    Approval(wire::Approval),
}

#[derive(Serialize, ToSchema)]
pub struct TurnStarted {
    pub turn: String,
    pub number: u32,
}

#[derive(Serialize, ToSchema)]
pub struct AgentStarted {
    pub turn: String,
    /// The agent's name.
    pub agent: String,
}

#[derive(Serialize, ToSchema)]
pub struct Hop {
    pub turn: String,
    pub hop: wire::TraceEntry,
}

#[derive(Serialize, ToSchema)]
pub struct ToolProgress {
    pub turn: String,
    /// The agent whose call it is.
    pub agent: String,
    /// `server/tool`.
    pub tool: String,
    pub call_id: String,
    /// The tool's own count (steps done, messages received, ...).
    pub progress: f64,
    /// What `progress` counts to, when the tool knows.
    pub total: Option<f64>,
    pub message: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct TurnFinished {
    pub turn: String,
    /// Why the turn ended, as on [`wire::Turn`].
    pub stopped_by: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct TurnFailed {
    pub turn: String,
    pub error: String,
}

impl ConversationEvent {
    /// `event` as an event of `conversation`'s stream; `None` for anything else (another
    /// conversation's, a room's, or one the stream does not send).
    pub fn of(event: &Event, conversation: ConversationId, roster: &Roster) -> Option<Self> {
        Some(match event {
            Event::TurnStarted {
                conversation: c,
                turn,
                number,
            } if *c == conversation => Self::TurnStarted(TurnStarted {
                turn: turn.to_string(),
                number: *number,
            }),
            Event::AgentStarted {
                conversation: c,
                turn,
                agent,
            } if *c == conversation => Self::AgentStarted(AgentStarted {
                turn: turn.to_string(),
                agent: roster.display(Some(*agent)).to_string(),
            }),
            Event::Hop {
                conversation: c,
                turn,
                entry,
            } if *c == conversation => Self::Hop(Hop {
                turn: turn.to_string(),
                hop: wire::TraceEntry::new(entry, roster),
            }),
            Event::ToolProgress {
                conversation: c,
                turn,
                agent,
                tool,
                call_id,
                progress,
            } if *c == conversation => Self::ToolProgress(ToolProgress {
                turn: turn.to_string(),
                agent: roster.display(Some(*agent)).to_string(),
                tool: tool.clone(),
                call_id: call_id.clone(),
                progress: progress.progress,
                total: progress.total,
                message: progress.message.clone(),
            }),
            Event::TurnFinished {
                conversation: c,
                turn,
                stopped_by,
            } if *c == conversation => Self::TurnFinished(TurnFinished {
                turn: turn.to_string(),
                stopped_by: stopped_by.as_str(),
            }),
            Event::TurnFailed {
                conversation: c,
                turn,
                error,
            } if *c == conversation => Self::TurnFailed(TurnFailed {
                turn: turn.to_string(),
                error: error.clone(),
            }),
            Event::Approval {
                conversation: c,
                approval,
                ..
            } if *c == conversation => Self::Approval(wire::Approval::from(&**approval)),
            _ => return None,
        })
    }

    pub fn sse(&self) -> Option<sse::Event> {
        sse_event(self)
    }
}

/// A room's events (`GET /api/rooms/{room}/events`).
#[derive(Serialize, ToSchema)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum RoomEvent {
    /// A message was stored: the person's, an agent's answer, or an agent's failure.
    Message(wire::RoomMessage),
    /// An agent's model was called.
    AgentStarted(RoomAgentStarted),
    /// Text of an agent's answer as its model streams it.
    Delta(AnswerDelta),
    /// A message was put in or taken out of the agents' contexts.
    Included(Included),
    /// Agents were added, removed, enabled or disabled: read the room again.
    Participants(ParticipantsChanged),
    /// An agent's model called a tool while answering.
    ToolCalled(RoomTool),
    /// That tool's result came back.
    ToolDone(RoomTool),
}

#[derive(Serialize, ToSchema)]
pub struct RoomTool {
    /// The participant's id.
    pub agent: String,
    /// `server/tool`.
    pub tool: String,
    /// On `tool_done`: whether the result is an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

#[derive(Serialize, ToSchema)]
pub struct RoomAgentStarted {
    /// The participant's id.
    pub agent: String,
}

#[derive(Serialize, ToSchema)]
pub struct AnswerDelta {
    /// The participant's id.
    pub agent: String,
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct Included {
    /// The message's id.
    pub message: String,
    pub included: bool,
}

/// Nothing: the event itself is the news.
#[derive(Serialize, ToSchema)]
pub struct ParticipantsChanged {}

impl From<&RoomChange> for RoomEvent {
    fn from(change: &RoomChange) -> Self {
        match change {
            RoomChange::Message(m) => Self::Message(wire::RoomMessage::from(m)),
            RoomChange::AgentStarted(a) => Self::AgentStarted(RoomAgentStarted {
                agent: a.to_string(),
            }),
            RoomChange::Delta { agent, text } => Self::Delta(AnswerDelta {
                agent: agent.to_string(),
                text: text.clone(),
            }),
            RoomChange::Included { message, included } => Self::Included(Included {
                message: message.to_string(),
                included: *included,
            }),
            RoomChange::Participants => Self::Participants(ParticipantsChanged {}),
            RoomChange::ToolCalled { agent, tool } => Self::ToolCalled(RoomTool {
                agent: agent.to_string(),
                tool: tool.clone(),
                is_error: None,
            }),
            RoomChange::ToolDone {
                agent,
                tool,
                is_error,
            } => Self::ToolDone(RoomTool {
                agent: agent.to_string(),
                tool: tool.clone(),
                is_error: Some(*is_error),
            }),
        }
    }
}

impl RoomEvent {
    pub fn sse(&self) -> Option<sse::Event> {
        sse_event(self)
    }
}

/// An event's SSE name and its data as JSON text, from its `{"event", "data"}` form. The data
/// goes through `serde_json::Value`, whose objects keep their keys sorted: the streams have
/// always sent them that way, nested objects included.
fn frame(event: &impl Serialize) -> Option<(String, String)> {
    let mut value = match serde_json::to_value(event) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "an event could not be written as JSON");
            return None;
        }
    };
    let name = value.get("event")?.as_str()?.to_string();
    let data = value.get_mut("data")?.take();
    Some((name, data.to_string()))
}

fn sse_event(event: &impl Serialize) -> Option<sse::Event> {
    frame(event).map(|(name, data)| sse::Event::default().event(name).data(data))
}

#[cfg(test)]
mod tests {
    use agency_core::{AgentId, MessageKind, ParticipantId, RoomMessageId, TurnId, Usage};
    use agency_core::{StopReason, TraceEntry};
    use chrono::{TimeZone, Utc};

    use super::*;

    fn conversation(event: &Event, c: ConversationId, roster: &Roster) -> (String, String) {
        frame(&ConversationEvent::of(event, c, roster).unwrap()).unwrap()
    }

    fn room(change: RoomChange) -> (String, String) {
        frame(&RoomEvent::from(&change)).unwrap()
    }

    fn pair(name: &str, data: &str) -> (String, String) {
        (name.to_string(), data.to_string())
    }

    /// Each event's name and data, byte for byte as the streams sent them before they were
    /// typed (from `json!` values: keys sorted, nested objects too).
    #[test]
    fn conversation_events_keep_their_names_and_data() {
        let c = ConversationId::new();
        let turn = TurnId::new();
        let manager = AgentId::new(143).unwrap();
        let roster = Roster::new([(manager, "manager".to_string())]);
        assert_eq!(
            conversation(
                &Event::TurnStarted {
                    conversation: c,
                    turn,
                    number: 2
                },
                c,
                &roster
            ),
            pair(
                "turn_started",
                &format!(r#"{{"number":2,"turn":"{turn}"}}"#)
            )
        );
        assert_eq!(
            conversation(
                &Event::AgentStarted {
                    conversation: c,
                    turn,
                    agent: manager
                },
                c,
                &roster
            ),
            pair(
                "agent_started",
                &format!(r#"{{"agent":"manager","turn":"{turn}"}}"#)
            )
        );
        let entry = TraceEntry {
            from: Some(manager),
            to: None,
            kind: MessageKind::Delivery,
            text: "Done \"quoted\"".into(),
            usage: Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 2,
            }),
            latency_ms: Some(7),
            tool: None,
            at: "2026-11-26T12:00:01.250Z".parse().unwrap(),
        };
        let hop = Event::Hop {
            conversation: c,
            turn,
            entry,
        };
        assert_eq!(
            conversation(&hop, c, &roster),
            pair(
                "hop",
                &format!(
                    r#"{{"hop":{{"at":"2026-11-26T12:00:01.250Z","from":"manager","kind":"delivery","latency_ms":7,"text":"Done \"quoted\"","to":"user","usage":{{"completion_tokens":2,"prompt_tokens":5,"total_tokens":7}}}},"turn":"{turn}"}}"#
                )
            )
        );
        assert_eq!(
            conversation(
                &Event::TurnFinished {
                    conversation: c,
                    turn,
                    stopped_by: StopReason::MaxHops
                },
                c,
                &roster
            ),
            pair(
                "turn_finished",
                &format!(r#"{{"stopped_by":"max_hops","turn":"{turn}"}}"#)
            )
        );
        assert_eq!(
            conversation(
                &Event::TurnFailed {
                    conversation: c,
                    turn,
                    error: "the model failed".into()
                },
                c,
                &roster
            ),
            pair(
                "turn_failed",
                &format!(r#"{{"error":"the model failed","turn":"{turn}"}}"#)
            )
        );
        // Another conversation's events are not this stream's.
        assert!(ConversationEvent::of(&hop, ConversationId::new(), &roster).is_none());
    }

    #[test]
    fn room_events_keep_their_names_and_data() {
        let agent = ParticipantId::new();
        let message = RoomMessageId::new();
        let room_id = agency_core::RoomId::new();
        assert_eq!(
            room(RoomChange::AgentStarted(agent)),
            pair("agent_started", &format!(r#"{{"agent":"{agent}"}}"#))
        );
        assert_eq!(
            room(RoomChange::Delta {
                agent,
                text: "Hel".into()
            }),
            pair("delta", &format!(r#"{{"agent":"{agent}","text":"Hel"}}"#))
        );
        assert_eq!(
            room(RoomChange::Included {
                message,
                included: false
            }),
            pair(
                "included",
                &format!(r#"{{"included":false,"message":"{message}"}}"#)
            )
        );
        assert_eq!(room(RoomChange::Participants), pair("participants", "{}"));
        let stored = agency_core::room::RoomMessage {
            id: message,
            room: room_id,
            seq: 3,
            author: agency_core::room::Author::Person,
            text: "/help".into(),
            included: false,
            reply_to: None,
            tagged: vec![agent],
            created_at: Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap(),
        };
        assert_eq!(
            room(RoomChange::Message(stored)),
            pair(
                "message",
                &format!(
                    r#"{{"agent":null,"agent_id":null,"command":true,"created_at":"2026-11-01T12:00:00Z","id":"{message}","included":false,"kind":"person","reply_to":null,"seq":3,"tagged":["{agent}"],"text":"/help"}}"#
                )
            )
        );
    }
}
