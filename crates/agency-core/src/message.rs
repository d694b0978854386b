//! Messages (spec 000's schema, every field kept) and what a turn leaves behind.

use chrono::{DateTime, Utc};

use crate::ids::{AgentId, ConversationId, MessageId, TurnId};
use crate::price::Usage;
use crate::tool::{ToolCall, ToolPart, ToolResult};

/// The chat role a message plays in the context it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result, in the context of the agent that called it.
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

/// Why a message exists. The role follows from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// The system prompt an agent's context starts with.
    System,
    /// The end user's message, in the manager's context.
    Input,
    /// What an agent's model answered, verbatim, in that agent's own context (with its tool
    /// calls, when it made some).
    Reply,
    /// A tool's answer to one of an agent's calls, in that agent's own context.
    ToolResult,
    /// A reply delivered into an addressee's context (linked to the reply).
    Delivery,
    /// The server telling an agent its reply could not be routed, and why.
    Correction,
    /// The server telling the manager to answer now (a guard tripped).
    Guard,
    /// An agent's model failed; the manager is told, with the error.
    Failure,
    /// The manager's answer as the end user sees it (the user's own transcript).
    Answer,
}

impl MessageKind {
    pub fn role(self) -> Role {
        match self {
            MessageKind::System => Role::System,
            MessageKind::Reply | MessageKind::Answer => Role::Assistant,
            MessageKind::Input
            | MessageKind::Delivery
            | MessageKind::Correction
            | MessageKind::Guard
            | MessageKind::Failure => Role::User,
            MessageKind::ToolResult => Role::Tool,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::System => "system",
            MessageKind::Input => "input",
            MessageKind::Reply => "reply",
            MessageKind::ToolResult => "tool_result",
            MessageKind::Delivery => "delivery",
            MessageKind::Correction => "correction",
            MessageKind::Guard => "guard",
            MessageKind::Failure => "failure",
            MessageKind::Answer => "answer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "system" => MessageKind::System,
            "input" => MessageKind::Input,
            "reply" => MessageKind::Reply,
            "tool_result" => MessageKind::ToolResult,
            "delivery" => MessageKind::Delivery,
            "correction" => MessageKind::Correction,
            "guard" => MessageKind::Guard,
            "failure" => MessageKind::Failure,
            "answer" => MessageKind::Answer,
            _ => return None,
        })
    }
}

/// One message in one context of a conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub id: MessageId,
    pub conversation_id: ConversationId,
    /// The turn in which it was written; `None` for the system prompts.
    pub turn_id: Option<TurnId>,
    /// Position in the conversation: contexts and traces are read in this order.
    pub seq: i64,
    /// Whose context it belongs to; `None` is the end user's own transcript.
    pub agent: Option<AgentId>,
    pub kind: MessageKind,
    /// For a delivery or an answer: the reply it was made from.
    pub linked: Option<MessageId>,
    /// `None` is the end user (or, for corrections and guards, the server).
    pub from: Option<AgentId>,
    /// `None` is the end user.
    pub to: Option<AgentId>,
    /// The content. Deliveries hold the bare text; the protocol frames it for the model.
    pub text: String,
    /// A reply's tool calls, or what a tool result answers.
    pub tool: Option<crate::tool::ToolPart>,
    /// Images the message shows (URLs, `data:` URLs too): on a user's message to the manager,
    /// sent to its model beside the text, which names each in its place (`[image: …]`).
    pub images: Vec<String>,
    pub usage: Option<Usage>,
    pub latency_ms: Option<u32>,
    /// Whether it belongs in future contexts (rooms let a person untick messages).
    pub included: bool,
    pub created_at: DateTime<Utc>,
}

impl Message {
    pub fn role(&self) -> Role {
        self.kind.role()
    }
}

/// One message of a chat: who speaks, what it says, the tool calls it makes (an assistant
/// message; may have no text then) or the result it is (`Role::Tool`: what it answers), and
/// the images it shows (a user's). What a chat model is sent, and what an API client's
/// transcript holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub text: String,
    pub tool: Option<ToolPart>,
    /// Images a user's message shows (URLs, `data:` URLs too; see [`Message::images`]).
    pub images: Vec<String>,
}

impl ChatMessage {
    /// A message without tool calls, results or images.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            text: text.into(),
            tool: None,
            images: Vec::new(),
        }
    }

    /// An assistant message calling tools.
    pub fn calls(text: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            text: text.into(),
            tool: Some(ToolPart::Calls(calls)),
            images: Vec::new(),
        }
    }

    /// A tool's result answering the call `call_id` of tool `name`.
    pub fn result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            role: Role::Tool,
            text: text.into(),
            tool: Some(ToolPart::Result(ToolResult {
                call_id: call_id.into(),
                name: name.into(),
                is_error: false,
            })),
            images: Vec::new(),
        }
    }
}

/// Why a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The manager answered the user.
    Answered,
    /// The hop limit was reached and the manager was told to answer.
    MaxHops,
    /// The deadline passed and the manager was told to answer.
    Deadline,
    /// Two agents were repeating the same exchange.
    Loop,
    /// A budget ran out: the turn's cost cap (the manager was told to answer), or a key's, an
    /// end user's or an agency's budget (the turn ended with what it had).
    Budget,
    /// The client cancelled the turn; it ended without an answer.
    Cancelled,
    /// The manager called tools of the client (an API request's own tools): the turn waits for
    /// their results, which the client's next request brings (it resumes the same turn).
    ToolCalls,
    /// Calls of tools that need a person's approval wait for it, and nothing else runs: the
    /// turn is paused in the store; the answers resume it (see `crate::approval`).
    Approval,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answered => "answered",
            StopReason::MaxHops => "max_hops",
            StopReason::Deadline => "deadline",
            StopReason::Loop => "loop",
            StopReason::Budget => "budget",
            StopReason::Cancelled => "cancelled",
            StopReason::ToolCalls => "tool_calls",
            StopReason::Approval => "approval",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "answered" => StopReason::Answered,
            "max_hops" => StopReason::MaxHops,
            "deadline" => StopReason::Deadline,
            "loop" => StopReason::Loop,
            "budget" => StopReason::Budget,
            "cancelled" => StopReason::Cancelled,
            "tool_calls" => StopReason::ToolCalls,
            "approval" => StopReason::Approval,
            _ => return None,
        })
    }

    /// A guard tripped (the answer may be incomplete). A cancelled turn has no answer at all:
    /// not a guard.
    pub fn is_guard(self) -> bool {
        matches!(
            self,
            StopReason::MaxHops | StopReason::Deadline | StopReason::Loop | StopReason::Budget
        )
    }
}

/// One step of a turn's trace: who said what to whom, or which tool an agent called and what
/// it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    pub from: Option<AgentId>,
    pub to: Option<AgentId>,
    /// [`MessageKind::Reply`] for a tool call (its text the arguments), else the message's kind.
    pub kind: MessageKind,
    pub text: String,
    /// Usage of the model call that produced it, when one did.
    pub usage: Option<Usage>,
    /// How long that call took (for a tool result: how long the tool took).
    pub latency_ms: Option<u32>,
    /// For a tool call or result: the tool, the call's id, and whether the result is an error.
    pub tool: Option<ToolResult>,
    /// When the message was written (its `created_at`): a model call ended, or a tool answered,
    /// just before it. The UI's waterfall draws a call as `[at - latency_ms, at]`.
    pub at: DateTime<Utc>,
}

impl TraceEntry {
    /// Who sent it: an agent's name, `user`, a tool for its result, or `agency` for the
    /// server's own notices.
    pub fn from_name<'a>(&'a self, roster: &'a crate::Roster) -> &'a str {
        match (self.kind, &self.tool) {
            (MessageKind::ToolResult, Some(t)) => &t.name,
            (MessageKind::Correction | MessageKind::Guard, _) => "agency",
            _ => roster.display(self.from),
        }
    }

    /// Who received it: an agent's name, `user`, or the tool called.
    pub fn to_name<'a>(&'a self, roster: &'a crate::Roster) -> &'a str {
        match (self.kind, &self.tool) {
            (MessageKind::Reply, Some(t)) => &t.name,
            _ => roster.display(self.to),
        }
    }

    /// What it is, as every face names it: `tool_call` for a call, else the message's kind.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            MessageKind::Reply => "tool_call",
            kind => kind.as_str(),
        }
    }

    /// The entries a written message adds to its turn's trace: none for a system prompt or a
    /// reply without calls (what it says is in its deliveries), one per call of a reply that
    /// made some, one for any other message. `call_of(reply)` gives the usage and latency of
    /// the model call that wrote a reply.
    pub fn of(
        m: &Message,
        call_of: impl Fn(MessageId) -> Option<(Usage, Option<u32>)>,
    ) -> Vec<TraceEntry> {
        match (m.kind, &m.tool) {
            (MessageKind::System, _) => Vec::new(),
            (MessageKind::Reply, Some(ToolPart::Calls(calls))) => calls
                .iter()
                .map(|c| TraceEntry {
                    from: m.agent,
                    to: None,
                    kind: MessageKind::Reply,
                    text: c.arguments.clone(),
                    usage: m.usage,
                    latency_ms: m.latency_ms,
                    tool: Some(ToolResult {
                        call_id: c.id.clone(),
                        name: c.name.clone(),
                        is_error: false,
                    }),
                    at: stored_time(m.created_at),
                })
                .collect(),
            (MessageKind::Reply, _) => Vec::new(),
            (MessageKind::ToolResult, tool) => vec![TraceEntry {
                from: None,
                to: m.agent,
                kind: m.kind,
                text: m.text.clone(),
                usage: None,
                latency_ms: m.latency_ms,
                tool: tool.as_ref().and_then(ToolPart::result).cloned(),
                at: stored_time(m.created_at),
            }],
            _ => {
                let call = m.linked.and_then(&call_of);
                vec![TraceEntry {
                    from: m.from,
                    to: if m.kind == MessageKind::Answer {
                        None
                    } else {
                        m.agent
                    },
                    kind: m.kind,
                    text: m.text.clone(),
                    usage: call.map(|(u, _)| u),
                    latency_ms: call.and_then(|(_, l)| l),
                    tool: None,
                    at: stored_time(m.created_at),
                }]
            }
        }
    }
}

/// `at` as the databases keep it (to the microsecond, as PostgreSQL does): a trace made from
/// messages in memory and one read back from the store (another server's) say the same time.
fn stored_time(at: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::SubsecRound;
    at.trunc_subsecs(6)
}

/// The model calls of a turn from its messages (in `seq` order): each reply's agent and the
/// usage of the call that wrote it (what [`crate::price::costs_by_caller`] sums).
pub fn model_calls(messages: &[Message]) -> impl Iterator<Item = (AgentId, Usage)> + '_ {
    messages
        .iter()
        .filter(|m| m.kind == MessageKind::Reply)
        .filter_map(|m| Some((m.from?, m.usage?)))
}

/// The trace of a turn from its messages (in `seq` order): the user's input, every delivery,
/// tool call and result, correction, guard and failure notice, and the answer.
pub fn trace(messages: &[Message]) -> Vec<TraceEntry> {
    let calls: std::collections::HashMap<MessageId, (Usage, Option<u32>)> = messages
        .iter()
        .filter_map(|m| Some((m.id, (m.usage?, m.latency_ms))))
        .collect();
    messages
        .iter()
        .flat_map(|m| TraceEntry::of(m, |id| calls.get(&id).copied()))
        .collect()
}

/// A conversation with an agency: each agent has its own context inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    pub id: crate::ids::ConversationId,
    pub agency_id: crate::ids::AgencyId,
    /// `None`: it runs on the agency's draft (a playground). `Some(n)`: on its published
    /// versions, from version `n` on (a newer publication takes over its next turn).
    pub version: Option<u32>,
    pub created_at: DateTime<Utc>,
}

/// The face a turn came from: the protocol (and API) its request arrived by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Face {
    ChatCompletions,
    Responses,
    Playground,
    Mqtt,
    Cli,
    Mcp,
    A2a,
}

impl Face {
    pub fn as_str(self) -> &'static str {
        match self {
            Face::ChatCompletions => "chat_completions",
            Face::Responses => "responses",
            Face::Playground => "playground",
            Face::Mqtt => "mqtt",
            Face::Cli => "cli",
            Face::Mcp => "mcp",
            Face::A2a => "a2a",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "chat_completions" => Face::ChatCompletions,
            "responses" => Face::Responses,
            "playground" => Face::Playground,
            "mqtt" => Face::Mqtt,
            "cli" => Face::Cli,
            "mcp" => Face::Mcp,
            "a2a" => Face::A2a,
            _ => return None,
        })
    }
}

/// What a turn did: why it stopped, how many hops, what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnRecord {
    pub id: TurnId,
    pub conversation_id: ConversationId,
    /// 1 for the first turn of the conversation.
    pub number: u32,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub stopped_by: Option<StopReason>,
    pub hops: u32,
    /// Summed over every model call the turn made.
    pub usage: Usage,
    /// What those calls cost; `None` when one of them was of a model with no price.
    pub cost: Option<crate::price::Cost>,
    /// Set when the turn could not answer (the manager's model failed).
    pub error: Option<String>,
    /// The face its request came by; `None` for turns recorded before faces were.
    pub face: Option<Face>,
}

/// A copy of a conversation as it stood after its turn `through`, for the conversation `into`:
/// the records of its turns up to then, and their messages with the system prompts (every
/// agent's context as it was), under new ids, links and turns following their copies.
pub fn fork(
    into: crate::ids::ConversationId,
    turns: &[TurnRecord],
    messages: &[Message],
    through: u32,
) -> (Vec<TurnRecord>, Vec<Message>) {
    use std::collections::HashMap;
    let turn_ids: HashMap<crate::ids::TurnId, crate::ids::TurnId> = turns
        .iter()
        .filter(|t| t.number <= through)
        .map(|t| (t.id, crate::ids::TurnId::new()))
        .collect();
    let kept: Vec<&Message> = messages
        .iter()
        .filter(|m| m.turn_id.is_none_or(|t| turn_ids.contains_key(&t)))
        .collect();
    let copies: Vec<(&Message, crate::ids::MessageId)> = kept
        .into_iter()
        .map(|m| (m, crate::ids::MessageId::new()))
        .collect();
    let ids: HashMap<crate::ids::MessageId, crate::ids::MessageId> =
        copies.iter().map(|(m, id)| (m.id, *id)).collect();
    let turns = turns
        .iter()
        .filter_map(|t| {
            Some(TurnRecord {
                id: *turn_ids.get(&t.id)?,
                conversation_id: into,
                ..t.clone()
            })
        })
        .collect();
    let messages = copies
        .into_iter()
        .map(|(m, id)| Message {
            id,
            conversation_id: into,
            turn_id: m.turn_id.and_then(|t| turn_ids.get(&t).copied()),
            linked: m.linked.and_then(|l| ids.get(&l).copied()),
            ..m.clone()
        })
        .collect();
    (turns, messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolCall;

    fn message(kind: MessageKind, at: &str) -> Message {
        Message {
            id: MessageId::new(),
            conversation_id: ConversationId::new(),
            turn_id: Some(TurnId::new()),
            seq: 1,
            agent: AgentId::new(2),
            kind,
            linked: None,
            from: AgentId::new(1),
            to: AgentId::new(2),
            text: "hi".into(),
            tool: None,
            images: Vec::new(),
            usage: None,
            latency_ms: None,
            included: true,
            created_at: at.parse().unwrap(),
        }
    }

    #[test]
    fn a_trace_entry_says_its_time_as_the_store_keeps_it() {
        let mut m = message(MessageKind::Input, "2026-11-26T12:00:01.123456789Z");
        m.from = None;
        let entries = TraceEntry::of(&m, |_| None);
        let want: DateTime<Utc> = "2026-11-26T12:00:01.123456Z".parse().unwrap();
        assert_eq!(entries.iter().map(|e| e.at).collect::<Vec<_>>(), [want]);
    }

    #[test]
    fn a_trace_entry_carries_the_time_its_message_was_written() {
        let at: DateTime<Utc> = "2026-11-26T12:00:01.250Z".parse().unwrap();
        let mut reply = message(MessageKind::Reply, "2026-11-26T12:00:01.250Z");
        reply.usage = Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
        });
        reply.latency_ms = Some(900);
        reply.tool = Some(ToolPart::Calls(vec![ToolCall {
            id: "c1".into(),
            name: "builtin/now".into(),
            arguments: "{}".into(),
        }]));
        let mut delivery = message(MessageKind::Delivery, "2026-11-26T12:00:01.251Z");
        delivery.linked = Some(reply.id);
        let mut result = message(MessageKind::ToolResult, "2026-11-26T12:00:02Z");
        result.latency_ms = Some(40);
        result.tool = Some(ToolPart::Result(ToolResult {
            call_id: "c1".into(),
            name: "builtin/now".into(),
            is_error: false,
        }));
        let entries = trace(&[reply, delivery.clone(), result]);
        let times: Vec<_> = entries.iter().map(|e| (e.kind_name(), e.at)).collect();
        assert_eq!(
            times,
            [
                ("tool_call", at),
                ("delivery", delivery.created_at),
                ("tool_result", "2026-11-26T12:00:02Z".parse().unwrap()),
            ]
        );
        // The delivery's model call is its reply's: 900 ms ending when the reply was written.
        assert_eq!(entries[1].latency_ms, Some(900));
        assert_eq!(entries[2].latency_ms, Some(40));
    }
}
