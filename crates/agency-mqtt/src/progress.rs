//! The MQTT face's encoder: a turn's events as spec 002's progress updates.

use agency_core::{ConversationId, MessageKind, Roster, StopReason, TraceEntry};
use agency_runtime::Event;
use chrono::Utc;

use crate::wire;

/// One progress update of a conversation's turn.
pub(crate) struct Update {
    status: &'static str,
    message: String,
    operation: &'static str,
    /// Only while a tool runs: its percentage and progress count.
    tool: Option<(Option<u8>, Option<u64>)>,
    /// Only for a call that waits for a person, or was answered: the approval's id.
    approval: Option<String>,
    /// The user's message is stored: its chat message may be acknowledged.
    pub(crate) stored: bool,
}

impl Update {
    fn new(status: &'static str, message: String, operation: &'static str) -> Self {
        Self {
            status,
            message,
            operation,
            tool: None,
            approval: None,
            stored: false,
        }
    }

    /// Spec 002's `observation check`: the agent checks whether the chat message it was sent
    /// is worth observing.
    pub(crate) fn observation_check() -> Self {
        Self::new(
            "observation check",
            "Verifying if an observation is required based on the information received".into(),
            "observation",
        )
    }

    /// The update as spec 002's progress message, of `agent`'s conversation `id`.
    pub(crate) fn wire(self, id: ConversationId, agent: &str) -> wire::Progress {
        wire::Progress {
            conversation_id: id.to_string(),
            agent_id: agent.to_string(),
            status: self.status.to_string(),
            message: Some(self.message),
            timestamp: wire::time(Utc::now()),
            current_operation: Some(self.operation.to_string()),
            progress_percentage: self.tool.and_then(|(p, _)| p),
            message_sequence: self.tool.and_then(|(_, n)| n),
            approval_id: self.approval,
        }
    }
}

/// The update an event of conversation `id` makes, if any.
pub(crate) fn update(event: &Event, id: ConversationId, roster: &Roster) -> Option<Update> {
    if event.conversation() != Some(id) {
        return None;
    }
    let who = |agent| roster.display(Some(agent));
    Some(match event {
        Event::ToolProgress {
            agent,
            tool: name,
            progress,
            ..
        } => {
            let what = progress
                .message
                .clone()
                .unwrap_or_else(|| match progress.total {
                    Some(total) => format!("{name}: {} of {total}", progress.progress),
                    None => format!("{name}: {}", progress.progress),
                });
            Update {
                tool: Some((progress.percent(), Some(progress.progress.max(0.0) as u64))),
                ..Update::new(
                    "processing_tool",
                    format!("{} is running {what}", who(*agent)),
                    "tool_execution",
                )
            }
        }
        Event::TurnStarted { number, .. } => {
            Update::new("processing", format!("Turn {number} started"), "turn")
        }
        Event::AgentStarted { agent, .. } => Update::new(
            "model_call",
            format!("{} is working", who(*agent)),
            "model_call",
        ),
        Event::ModelRetry {
            agent,
            attempt,
            reason,
            ..
        } => Update::new(
            "retry",
            format!(
                "{}'s model call failed ({reason}); trying again (attempt {attempt})",
                who(*agent)
            ),
            "model_call",
        ),
        Event::TurnFinished {
            stopped_by: StopReason::Cancelled,
            ..
        } => Update::new(
            "cancelled",
            "The turn was cancelled; it ended without an answer".to_string(),
            "cancel",
        ),
        Event::Approval { approval: a, .. } => approval(a, roster),
        Event::Hop { entry, .. } => hop(entry, roster)?,
        _ => return None,
    })
}

/// The update a tool call waiting for a person makes (`awaiting_approval`), and its answer
/// (`approved`, `denied`). Metadata only, as every progress update: the call's arguments are
/// not in it.
fn approval(a: &agency_core::Approval, roster: &Roster) -> Update {
    use agency_core::ApprovalState;
    let who = roster.display(Some(a.agent));
    let tool = &a.call.name;
    let (status, message) = match a.state {
        ApprovalState::Pending => (
            "awaiting_approval",
            format!(
                "{who} asks to call {tool}: approve or deny it on CMD/chat_approval (approval_id {})",
                a.id
            ),
        ),
        ApprovalState::Approved => (
            "approved",
            format!(
                "{tool} approved by {}",
                a.answered_by.as_deref().unwrap_or("—")
            ),
        ),
        ApprovalState::Denied => (
            "denied",
            format!(
                "{tool} denied by {}",
                a.answered_by.as_deref().unwrap_or("—")
            ),
        ),
    };
    Update {
        approval: Some(a.id.to_string()),
        ..Update::new(status, message, "approval")
    }
}

/// The update a hop makes: who said what kind of thing to whom.
fn hop(entry: &TraceEntry, roster: &Roster) -> Option<Update> {
    let (from, to) = (entry.from_name(roster), entry.to_name(roster));
    Some(match entry.kind {
        MessageKind::Input => Update {
            stored: true,
            ..Update::new("received", "Message stored".to_string(), "input")
        },
        MessageKind::Delivery => Update::new("routing", format!("{from} → {to}"), "routing"),
        MessageKind::Correction => Update::new(
            "retry",
            format!("{to}'s reply could not be routed; asked again"),
            "correction",
        ),
        MessageKind::Guard => Update::new("guard", format!("{to} was told to answer now"), "guard"),
        MessageKind::Failure => Update::new(
            "agent_failed",
            format!("{from} could not answer; {to} was told"),
            "model_call",
        ),
        MessageKind::Answer => Update::new("answered", format!("{from} answered"), "answer"),
        MessageKind::Reply => Update {
            tool: Some((Some(0), None)),
            ..Update::new(
                "processing_tool",
                format!("{from} calls {to}"),
                "tool_execution",
            )
        },
        MessageKind::ToolResult => {
            let failed = entry.tool.as_ref().is_some_and(|t| t.is_error);
            let how = if failed { "failed" } else { "answered" };
            Update {
                tool: Some((Some(100), None)),
                ..Update::new(
                    "processing_tool",
                    format!("{from} {how} {to}"),
                    "tool_execution",
                )
            }
        }
        MessageKind::System => return None,
    })
}
