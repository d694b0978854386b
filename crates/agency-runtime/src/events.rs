use agency_core::{AgentId, ConversationId, StopReason, TraceEntry, TurnId};

/// What happens in conversations, as it happens. One stream feeds every live view.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    TurnStarted {
        conversation: ConversationId,
        turn: TurnId,
        number: u32,
    },
    /// An agent's model was called.
    AgentStarted {
        conversation: ConversationId,
        turn: TurnId,
        agent: AgentId,
    },
    /// An agent's model call failed in a way worth retrying (a 429, a 5xx, a lost connection)
    /// and its provider tries again: `attempt` is the attempt about to start (2 for the first
    /// retry); `reason` says why in a few words, without the provider's own text.
    ModelRetry {
        conversation: ConversationId,
        turn: TurnId,
        agent: AgentId,
        attempt: u32,
        reason: String,
    },
    /// A tool an agent called reported its progress (MCP progress notifications).
    ToolProgress {
        conversation: ConversationId,
        turn: TurnId,
        agent: AgentId,
        /// `server/tool`.
        tool: String,
        call_id: String,
        progress: agency_core::ToolProgress,
    },
    /// A message reached a context (or, for an answer, the user).
    Hop {
        conversation: ConversationId,
        turn: TurnId,
        entry: TraceEntry,
    },
    TurnFinished {
        conversation: ConversationId,
        turn: TurnId,
        stopped_by: StopReason,
    },
    TurnFailed {
        conversation: ConversationId,
        turn: TurnId,
        error: String,
    },
    /// A tool call waits for a person's approval (`state` pending), or was answered.
    Approval {
        conversation: ConversationId,
        turn: TurnId,
        approval: Box<agency_core::Approval>,
    },
    /// Something happened in a roundtable room.
    Room {
        room: agency_core::RoomId,
        change: crate::rooms::RoomChange,
    },
}

impl Event {
    /// The conversation the event is of (none for a room's).
    pub fn conversation(&self) -> Option<ConversationId> {
        match self {
            Event::TurnStarted { conversation, .. }
            | Event::AgentStarted { conversation, .. }
            | Event::ModelRetry { conversation, .. }
            | Event::ToolProgress { conversation, .. }
            | Event::Hop { conversation, .. }
            | Event::TurnFinished { conversation, .. }
            | Event::TurnFailed { conversation, .. }
            | Event::Approval { conversation, .. } => Some(*conversation),
            Event::Room { .. } => None,
        }
    }
}
