//! The JSON of conversations, turns and their traces (`conversations.rs`, and the
//! management API's turns).

use agency_core::{Roster, Usage as CoreUsage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::text;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostMessage {
    #[schema(schema_with = text::turn_text)]
    pub text: String,
}

#[derive(Serialize, ToSchema)]
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

#[derive(Serialize, ToSchema)]
pub struct Turn {
    pub id: String,
    pub number: u32,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub stopped_by: Option<&'static str>,
    pub hops: u32,
    pub usage: Usage,
    /// What its model calls cost, in dollars (`"0.004500"`, exact to the millionth); `null`
    /// when a model it called has no price (set `prices` on its provider).
    pub cost_usd: Option<String>,
    pub error: Option<String>,
    /// The face its request came by: `chat_completions`, `responses`, `playground`, `mqtt`,
    /// `cli`, `mcp` or `a2a`; `null` for turns recorded before faces were kept.
    pub face: Option<&'static str>,
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
            cost_usd: t
                .cost
                .map(|c| c.to_string().trim_start_matches('$').to_string()),
            error: t.error.clone(),
            face: t.face.map(|f| f.as_str()),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct Conversation {
    pub id: String,
    pub agency_id: String,
    /// `null`: it runs on the agency's draft; else on its published versions, from this one.
    pub version: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub turns: Vec<Turn>,
}

impl Conversation {
    pub fn new(c: &agency_core::Conversation, turns: Vec<Turn>) -> Self {
        Self {
            id: c.id.to_string(),
            agency_id: c.agency_id.to_string(),
            version: c.version,
            created_at: c.created_at,
            turns,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TraceEntry {
    pub from: String,
    pub to: String,
    /// `input`, `delivery`, `tool_call`, `tool_result`, `correction`, `guard`, `failure` or
    /// `answer`. A `tool_call` goes from an agent to a tool (`to`, its text the arguments); a
    /// `tool_result` from the tool back to the agent.
    pub kind: &'static str,
    pub text: String,
    /// Of the model call that wrote it, when one did.
    pub usage: Option<Usage>,
    /// How long that call took (for a `tool_result`: how long the tool took).
    pub latency_ms: Option<u32>,
    /// For a `tool_call` or `tool_result`: the tool (`server/tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call a `tool_result` answers (and a `tool_call`'s own id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// For a `tool_result`: whether the tool failed (its text says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// When its message was written (RFC 3339): the model call that wrote it (or, for a
    /// `tool_result`, the tool) ended just before, so the call ran from `at - latency_ms` to
    /// `at`. The web UI's waterfall draws a turn from these.
    pub at: DateTime<Utc>,
}

impl TraceEntry {
    pub fn new(e: &agency_core::TraceEntry, roster: &Roster) -> Self {
        let result = e.kind == agency_core::MessageKind::ToolResult;
        Self {
            from: e.from_name(roster).to_string(),
            to: e.to_name(roster).to_string(),
            kind: e.kind_name(),
            text: e.text.clone(),
            usage: e.usage.map(Into::into),
            latency_ms: e.latency_ms,
            tool: e.tool.as_ref().map(|t| t.name.clone()),
            call_id: e.tool.as_ref().map(|t| t.call_id.clone()),
            is_error: e.tool.as_ref().filter(|_| result).map(|t| t.is_error),
            at: e.at,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TurnResult {
    pub conversation_id: String,
    pub turn_id: String,
    pub number: u32,
    pub answer: String,
    pub stopped_by: &'static str,
    pub hops: u32,
    pub usage: Usage,
    /// In dollars, as on [`Turn`].
    pub cost_usd: Option<String>,
    /// What each agent's model calls cost, in the order the agents first answered.
    pub agent_costs: Vec<AgentCost>,
    pub trace: Vec<TraceEntry>,
}

/// What one agent's model calls cost in a turn.
#[derive(Serialize, ToSchema)]
pub struct AgentCost {
    pub agent: String,
    /// In dollars, as on [`Turn`]; `null` when its model has no price.
    pub cost_usd: Option<String>,
}

/// A cost as the API writes it: dollars to the millionth, without the sign (`"0.004500"`).
fn dollars(cost: Option<agency_core::Cost>) -> Option<String> {
    cost.map(|c| c.to_string().trim_start_matches('$').to_string())
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
            cost_usd: dollars(o.cost),
            agent_costs: AgentCost::list(&o.agent_costs, &o.roster),
            trace: o
                .trace
                .iter()
                .map(|e| TraceEntry::new(e, &o.roster))
                .collect(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TurnTrace {
    pub turn: Turn,
    pub trace: Vec<TraceEntry>,
    /// What each agent's model calls cost, in the order the agents first answered, at the
    /// agency's prices: as the turn's live answer said.
    pub agent_costs: Vec<AgentCost>,
    /// Its calls that waited for a person's approval, in the order they were asked: who
    /// answered, when, why, with which arguments, and when an approved call went out.
    pub approvals: Vec<super::Approval>,
}

impl AgentCost {
    /// Each agent's cost, named by `roster`.
    pub fn list(
        costs: &[(agency_core::AgentId, Option<agency_core::Cost>)],
        roster: &agency_core::Roster,
    ) -> Vec<Self> {
        costs
            .iter()
            .map(|(agent, cost)| Self {
                agent: roster.display(Some(*agent)).to_string(),
                cost_usd: dollars(*cost),
            })
            .collect()
    }
}

/// A message in some agent's context (or, with `agent: null`, the user's transcript).
#[derive(Serialize, ToSchema)]
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
    /// A reply's tool calls (its agent's model asked for them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// What a `tool_result` answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    pub usage: Option<Usage>,
    pub latency_ms: Option<u32>,
    pub included: bool,
    pub created_at: DateTime<Utc>,
}

/// An MCP server an agency may use, and its tools.
#[derive(Serialize, ToSchema)]
pub struct ToolServer {
    /// What its tools' names start with (`name/tool`).
    pub name: String,
    pub tools: Vec<ToolInfo>,
    /// Why its tools could not be listed now, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ToolInfo {
    /// `server/tool`: what an agent's `tools` names.
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    #[schema(value_type = Object)]
    pub input_schema: serde_json::Value,
}

impl From<(String, Result<Vec<agency_core::Tool>, String>)> for ToolServer {
    fn from((name, listed): (String, Result<Vec<agency_core::Tool>, String>)) -> Self {
        let (tools, error) = match listed {
            Ok(tools) => (tools, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        Self {
            name,
            tools: tools
                .into_iter()
                .map(|t| ToolInfo {
                    name: t.name,
                    description: t.description,
                    input_schema: t.input_schema,
                })
                .collect(),
            error,
        }
    }
}

/// A call of a tool, as the model wrote it.
#[derive(Serialize, ToSchema)]
pub struct ToolCall {
    pub id: String,
    /// `server/tool`.
    pub name: String,
    /// JSON text, as the model wrote it (it may not be valid).
    pub arguments: String,
}

/// What a tool result answers.
#[derive(Serialize, ToSchema)]
pub struct ToolResult {
    pub call_id: String,
    /// `server/tool`.
    pub name: String,
    pub is_error: bool,
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
            tool_calls: m
                .tool
                .iter()
                .flat_map(|t| t.calls())
                .map(|c| ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            tool_result: m
                .tool
                .as_ref()
                .and_then(|t| t.result())
                .map(|r| ToolResult {
                    call_id: r.call_id.clone(),
                    name: r.name.clone(),
                    is_error: r.is_error,
                }),
            usage: m.usage.map(Into::into),
            latency_ms: m.latency_ms,
            included: m.included,
            created_at: m.created_at,
        }
    }
}
