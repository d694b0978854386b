//! The agency's one tool: its definition, the translator (a `tools/call` → a `TurnRequest`)
//! and the encoder (the turn's events → progress notifications, then the call's result).

use std::sync::Arc;

use agency_core::{Agency, ApiKey, ApprovalId, ChatMessage, ConversationId, MessageKind, Role};
use agency_runtime::api::{ApprovalAnswer, ChatTurn};
use agency_runtime::{Ask, Caller, Event, Runtime, RuntimeError, Turn, TurnEvent, TurnOutcome};
use serde_json::{Map, Value, json};

use super::wire::{self, RpcError};

/// Longest tool description: the team's roster is cut there.
const MAX_DESCRIPTION: usize = 1024;
/// Longest progress message: a hop's text is cut there.
const MAX_PROGRESS_TEXT: usize = 200;
/// Longest message a call may send (the OpenAI endpoint's body limit bounds the rest).
pub const MAX_MESSAGE: usize = 1024 * 1024;

/// Who asks, and of which agency: a key of it (over HTTP), or this process (`agency mcp`).
#[derive(Clone)]
pub enum Asker {
    Key { key: ApiKey, agency: Arc<Agency> },
    Local { agency: Arc<Agency> },
}

impl Asker {
    pub fn agency(&self) -> &Arc<Agency> {
        match self {
            Asker::Key { agency, .. } | Asker::Local { agency } => agency,
        }
    }
}

/// The tool's name: the agency's, in the characters tool names may use.
pub fn name(agency: &Agency) -> String {
    let name: String = agency
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if name.is_empty() { "ask".into() } else { name }
}

/// What the tool says it does: ask the team, whose members it names.
fn description(agency: &Agency) -> String {
    let mut members: Vec<String> = Vec::new();
    let manager = agency.agents.iter().filter(|a| a.id == agency.manager);
    for agent in manager.chain(agency.agents.iter().filter(|a| a.id != agency.manager)) {
        members.push(match &agent.role {
            Some(role) if !role.trim().is_empty() => format!("{} ({})", agent.name, role.trim()),
            _ => agent.name.clone(),
        });
    }
    let mut text = format!(
        "Ask the team `{}` and get its answer. Pass `conversation` (from a previous result) to continue that conversation. The team: {}.",
        agency.name,
        members.join(", ")
    );
    if text.len() > MAX_DESCRIPTION {
        let cut = (0..=MAX_DESCRIPTION - 1)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The tool as `tools/list` shows it.
pub fn definition(agency: &Agency) -> Value {
    json!({
        "name": name(agency),
        "title": agency.name,
        "description": description(agency),
        "inputSchema": {
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "description": "What to ask or tell the team."
                },
                "conversation": {
                    "type": "string",
                    "description": "The conversation to continue: the `conversation` of an earlier result. Without it, a new conversation starts."
                }
            },
            "required": ["message"]
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "conversation": { "type": "string", "description": "The conversation's id: pass it back to continue." },
                "turn": { "type": "integer", "description": "The turn's number in the conversation." },
                "stopped_by": { "type": "string", "description": "Why the turn ended: `answered`, `cancelled`, or a limit (`max_hops`, `deadline`, `loop`)." },
                "usage": {
                    "type": "object",
                    "properties": {
                        "prompt_tokens": { "type": "integer" },
                        "completion_tokens": { "type": "integer" },
                        "total_tokens": { "type": "integer" }
                    },
                    "required": ["prompt_tokens", "completion_tokens", "total_tokens"]
                },
                "cost_usd": { "type": ["string", "null"], "description": "What the turn's model calls cost, in dollars (`\"0.004500\"`); null when a model it called has no price." }
            },
            "required": ["conversation", "turn", "stopped_by", "usage", "cost_usd"]
        },
        "annotations": { "readOnlyHint": false, "destructiveHint": false, "openWorldHint": true }
    })
}

/// A call of the tool, read.
#[derive(Debug)]
pub struct Call {
    pub message: String,
    pub conversation: Option<ConversationId>,
    /// The client answers approvals itself (2026-07-28, declaring elicitation): a turn whose
    /// calls wait for a person pauses, and the result is `input_required`.
    pub asks: bool,
    /// The retry of a call answered `input_required`: the conversation its turn paused in, and
    /// the answers to its approvals.
    pub answers: Option<(ConversationId, Vec<ApprovalAnswer>)>,
}

/// Reads a `tools/call`'s params: an error for an unknown tool (a protocol error), or the
/// call, or why its arguments are wrong (a tool error the model can correct).
pub fn read(
    agency: &Agency,
    params: &Map<String, Value>,
) -> Result<Result<Call, String>, RpcError> {
    let tool = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("`name` (the tool to call) must be a string"))?;
    if tool != name(agency) {
        return Err(RpcError::invalid_params(format!("Unknown tool: {tool}")));
    }
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => return Err(RpcError::invalid_params("`arguments` must be an object")),
    };
    Ok(arguments_of(&arguments))
}

fn arguments_of(arguments: &Map<String, Value>) -> Result<Call, String> {
    let message = match arguments.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        Some(Value::String(_)) => {
            return Err("`message` is empty: say something to the team.".into());
        }
        _ => return Err("`message` (a string) is required.".into()),
    };
    if message.len() > MAX_MESSAGE {
        return Err(format!(
            "`message` is longer than {} KiB.",
            MAX_MESSAGE >> 10
        ));
    }
    let conversation = match arguments.get("conversation") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if c.trim().is_empty() => None,
        Some(Value::String(c)) => Some(c.trim().parse().map_err(|_| {
            format!("`conversation` must be a conversation id from an earlier result, not `{c}`.")
        })?),
        Some(_) => return Err("`conversation` must be a string.".into()),
    };
    if let Some(name) = arguments
        .keys()
        .find(|k| !matches!(k.as_str(), "message" | "conversation"))
    {
        return Err(format!(
            "Unknown argument `{name}`: the tool takes `message` and `conversation`."
        ));
    }
    Ok(Call {
        message,
        conversation,
        asks: false,
        answers: None,
    })
}

/// What a 2026-07-28 client says of approvals in a `tools/call`: whether it can be asked
/// (it declares elicitation in its capabilities), and its answers when it retries a call that
/// was answered `input_required` (`requestState`, `inputResponses` keyed by approval id).
/// The state is the client's to echo, so nothing in it is trusted: the conversation must be
/// the key's agency's and the approvals its paused turn's, as for any request.
pub fn approvals_of(call: &mut Call, params: &Map<String, Value>) -> Result<(), String> {
    call.asks = params
        .get("_meta")
        .and_then(|m| m.get(wire::META_CAPABILITIES))
        .and_then(|c| c.get("elicitation"))
        .is_some_and(Value::is_object);
    let Some(state) = params.get("requestState") else {
        return Ok(());
    };
    let conversation = state
        .as_str()
        .and_then(|s| s.strip_prefix(STATE_PREFIX))
        .and_then(|s| s.parse::<ConversationId>().ok())
        .ok_or("`requestState` is not one this server gave: retry with the one it sent.")?;
    let responses = match params.get("inputResponses") {
        Some(Value::Object(r)) => r,
        _ => return Err("`inputResponses` (the answers to the approvals asked) is required with `requestState`.".into()),
    };
    let mut answers = Vec::with_capacity(responses.len());
    for (key, response) in responses {
        let id: ApprovalId = key
            .parse()
            .map_err(|_| format!("`inputResponses` answers `{key}`, which was not asked."))?;
        // An elicitation's result, bare or wrapped as `{"result": …}`.
        let result = response.get("result").unwrap_or(response);
        let content = result.get("content");
        let reason = content
            .and_then(|c| c.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let approve = match result.get("action").and_then(Value::as_str) {
            Some("accept") => content
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
                .unwrap_or(true),
            Some("decline" | "cancel") => false,
            _ => {
                return Err(format!(
                    "`inputResponses.{key}.action` must be `accept`, `decline` or `cancel`."
                ));
            }
        };
        answers.push((id, approve, reason));
    }
    call.answers = Some((conversation, answers));
    Ok(())
}

/// What a `requestState` of this server begins with; the conversation's id follows.
const STATE_PREFIX: &str = "agency-approvals:";

/// The translator: the call as a turn of the pipeline, begun. `Err` is the tool error the
/// client is told (nothing else of the failure leaks).
pub async fn begin(
    rt: &Arc<Runtime>,
    asker: &Asker,
    call: Call,
    progress: bool,
) -> Result<Turn, String> {
    let request = match asker {
        Asker::Key { key, agency } => agency_runtime::TurnRequest {
            caller: Caller::Key(key.clone()),
            ask: Ask::Chat {
                agency: agency.clone(),
                // A retry with answers resumes the turn paused on them; its message was the
                // first round's.
                turn: Box::new(match call.answers {
                    Some((conversation, approvals)) => ChatTurn {
                        conversation: Some(conversation),
                        approvals,
                        pause_on_approvals: call.asks,
                        ..ChatTurn::default()
                    },
                    None => ChatTurn {
                        input: vec![ChatMessage::new(Role::User, call.message)],
                        conversation: call.conversation,
                        pause_on_approvals: call.asks,
                        ..ChatTurn::default()
                    },
                }),
            },
            stream_text: false,
            progress,
            face: agency_core::Face::Mcp,
        },
        Asker::Local { agency } => {
            if call.answers.is_some() {
                return Err("No call waits for approval here: over stdio a call that needs one waits for an answer given in the web UI or the API.".into());
            }
            let conversation = match call.conversation {
                Some(id) => {
                    rt.conversations()
                        .of(agency.id, id)
                        .await
                        .map_err(refusal)?
                        .id
                }
                None => rt.conversations().start(agency).await.map_err(refusal)?.id,
            };
            let mut request =
                agency_runtime::TurnRequest::message(Caller::Local, conversation, call.message);
            request.progress = progress;
            request.face = agency_core::Face::Mcp;
            request
        }
    };
    rt.begin(request).await.map_err(refusal)
}

/// A runtime error as a tool error: what the client can act on, or that the agency failed
/// (its owner finds the detail in the logs and the conversation browser).
pub fn refusal(e: RuntimeError) -> String {
    match e {
        RuntimeError::ConversationNotFound(id) => {
            format!("No conversation {id} in this agency: leave `conversation` out to start one.")
        }
        RuntimeError::Invalid(m) | RuntimeError::Conflict(m) | RuntimeError::Budget(m) => m,
        RuntimeError::NotPublished(_) | RuntimeError::AgencyNotFound(_) => e.to_string(),
        e => {
            tracing::warn!(error = %e, "an MCP tool call failed");
            "The agency could not answer; its owner can find what failed in the server's logs and the conversation browser.".into()
        }
    }
}

/// The encoder: the turn's events as a `tools/call`'s messages — progress notifications
/// (when the client sent a token), then its result.
pub struct Encoder {
    id: Value,
    token: Option<Value>,
    modern: bool,
    agency: Arc<Agency>,
    count: u64,
}

impl Encoder {
    pub fn new(id: Value, token: Option<Value>, modern: bool, agency: Arc<Agency>) -> Self {
        Self {
            id,
            token,
            modern,
            agency,
            count: 0,
        }
    }

    /// One event of the turn as messages; the last event gives the response.
    pub fn encode(&mut self, event: TurnEvent) -> Option<Value> {
        match event {
            TurnEvent::Text(_) => None,
            TurnEvent::Progress(event) => {
                let token = self.token.clone()?;
                let message = self.progress_text(&event)?;
                self.count += 1;
                Some(wire::notification(
                    "notifications/progress",
                    json!({ "progressToken": token, "progress": self.count, "message": message }),
                ))
            }
            TurnEvent::Finished { outcome, .. } if !outcome.approvals.is_empty() => {
                Some(wire::result(self.id.clone(), self.input_required(&outcome)))
            }
            TurnEvent::Finished { outcome, .. } => Some(self.result(answered(&outcome))),
            TurnEvent::Failed(e) => Some(self.result(failed(&refusal(e)))),
        }
    }

    /// A tool error as this call's response.
    pub fn refused(&self, why: &str) -> Value {
        refused(self.id.clone(), self.modern, why)
    }

    fn result(&self, result: Value) -> Value {
        respond(self.id.clone(), self.modern, result)
    }

    /// A turn paused on approvals (only for a client that can be asked): 2026-07-28's
    /// `input_required`, a form per call (approve, and why not), keyed by the approval's id;
    /// the client retries the call with the answers and the state.
    fn input_required(&self, out: &TurnOutcome) -> Value {
        let roster = self.agency.roster();
        let requests: Map<String, Value> = out
            .approvals
            .iter()
            .map(|a| {
                let message = format!(
                    "{} asks to call {} with {}. Approve it?",
                    roster.display(Some(a.agent)),
                    a.call.name,
                    cut(&a.call.arguments)
                );
                let request = json!({
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": message,
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "approve": { "type": "boolean", "title": "Approve", "description": "Run the call (no: it is not run, and the agent is told)." },
                                "reason": { "type": "string", "title": "Why", "description": "Why not, if you say no (the agent reads it)." }
                            },
                            "required": ["approve"]
                        }
                    }
                });
                (a.id.to_string(), request)
            })
            .collect();
        let mut result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": format!("{STATE_PREFIX}{}", out.conversation_id),
        });
        modern_result(&mut result);
        result
    }

    /// What a client shows of an event: each hop and each tool call, in a line.
    fn progress_text(&self, event: &Event) -> Option<String> {
        let roster = self.agency.roster();
        let text = match event {
            Event::Hop { entry, .. } => {
                let (from, to) = (entry.from_name(&roster), entry.to_name(&roster));
                match (entry.kind, &entry.tool) {
                    (MessageKind::Reply, Some(tool)) => format!("{from} calls {}", tool.name),
                    (MessageKind::ToolResult, Some(tool)) if tool.is_error => {
                        format!("{} failed", tool.name)
                    }
                    (MessageKind::ToolResult, Some(tool)) => format!("{} answered", tool.name),
                    (MessageKind::Input, _) => return None,
                    _ => format!("{from} → {to}: {}", cut(&entry.text)),
                }
            }
            Event::AgentStarted { agent, .. } => {
                format!("{} is thinking", roster.display(Some(*agent)))
            }
            Event::ToolProgress { tool, progress, .. } => match &progress.message {
                Some(m) => format!("{tool}: {}", cut(m)),
                None => format!("{tool}: working"),
            },
            Event::ModelRetry { agent, reason, .. } => {
                format!("{} retries: {reason}", roster.display(Some(*agent)))
            }
            _ => return None,
        };
        Some(text)
    }
}

fn cut(text: &str) -> String {
    let line = text.trim().replace('\n', " ");
    if line.chars().count() <= MAX_PROGRESS_TEXT {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_PROGRESS_TEXT).collect();
    cut.push('…');
    cut
}

/// A tool error as the response to call `id`.
pub fn refused(id: Value, modern: bool, why: &str) -> Value {
    respond(id, modern, failed(why))
}

fn respond(id: Value, modern: bool, mut result: Value) -> Value {
    if modern {
        modern_result(&mut result);
    }
    wire::result(id, result)
}

/// What 2026-07-28 adds to every result.
pub fn modern_result(result: &mut Value) {
    if let Some(object) = result.as_object_mut() {
        object
            .entry("resultType")
            .or_insert_with(|| "complete".into());
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(wire::META_SERVER_INFO.into(), super::server_info());
        }
    }
}

/// A finished turn's result: the answer as text, its facts as structured content.
fn answered(out: &TurnOutcome) -> Value {
    let structured = json!({
        "conversation": out.conversation_id.to_string(),
        "turn": out.number,
        "stopped_by": out.stopped_by.as_str(),
        "usage": {
            "prompt_tokens": out.usage.prompt_tokens,
            "completion_tokens": out.usage.completion_tokens,
            "total_tokens": out.usage.total(),
        },
        "cost_usd": out.cost.map(|c| c.to_string().trim_start_matches('$').to_string()),
    });
    let text = if out.answer.is_empty() {
        format!(
            "(The turn ended without an answer: {}.)",
            out.stopped_by.as_str()
        )
    } else {
        out.answer.clone()
    };
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
        "isError": false,
    })
}

/// A tool error's result.
fn failed(why: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": why }], "isError": true })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_spent_budget_is_a_tool_error_that_says_which_and_when() {
        let message = "API key `app`'s budget of $0.01 a day is spent; it renews at 00:00 UTC.";
        assert_eq!(refusal(RuntimeError::Budget(message.into())), message);
    }

    #[test]
    fn arguments_are_read_or_refused_as_a_model_can_correct() {
        let call = arguments_of(&args(json!({"message": "hi"}))).unwrap();
        assert_eq!(call.message, "hi");
        assert!(call.conversation.is_none());
        let id = ConversationId::new();
        let call = arguments_of(&args(
            json!({"message": "hi", "conversation": id.to_string()}),
        ))
        .unwrap();
        assert_eq!(call.conversation, Some(id));
        assert!(
            arguments_of(&args(json!({})))
                .unwrap_err()
                .contains("message")
        );
        assert!(arguments_of(&args(json!({"message": " "}))).is_err());
        let e = arguments_of(&args(json!({"message": "x", "conversation": "nope"}))).unwrap_err();
        assert!(e.contains("conversation"));
        let e = arguments_of(&args(json!({"message": "x", "other": 1}))).unwrap_err();
        assert!(e.contains("other"));
    }

    #[test]
    fn long_progress_lines_are_cut() {
        assert_eq!(cut("a\nb"), "a b");
        assert_eq!(cut(&"x".repeat(500)).chars().count(), MAX_PROGRESS_TEXT + 1);
    }
}
