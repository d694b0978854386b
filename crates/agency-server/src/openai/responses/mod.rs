//! The Responses API: `POST /v1/responses` (and `/api/agency/{agency}/responses`), `GET` and
//! `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`.
//!
//! A request becomes the same conversation turn a Chat Completions request does: its input
//! items are read as chat messages (instructions as the system message, `function_call` items
//! as an assistant message's calls, `function_call_output` items as tool messages), so history
//! matching, client tools (a turn pauses on them: the response's output is `function_call`
//! items) and structured outputs (`text.format`) work the same. `previous_response_id`
//! continues the stored response's conversation after its turn (or forks it there when it went
//! on). A response is stored unless `store: false`.
//!
//! Asked to show the team's work (`reasoning.summary`, or the `x-agency-show-work` header),
//! a response's output begins with a `reasoning` item: a summary part a hop (see
//! [`super::work`]).

mod input;
mod stored;
mod stream;

use std::sync::Arc;

use agency_core::{Agency, ToolCall};
use agency_runtime::TurnOutcome;
use agency_runtime::api::ApiResponse;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Map, Value, json};
pub(super) use stored::{delete, get, input_items};

use super::error::runtime_error;
use super::messages::chat_turn;
use super::work::Work;
use super::{Asked, Named, OpenAiError, RequestId, Watched, end_user, format, tools};
use crate::AppState;

/// Accepted and ignored, as in Chat Completions: they tune one model, and each agent has its
/// own.
const IGNORED: &[&str] = &[
    "temperature",
    "top_p",
    "max_output_tokens",
    "max_tool_calls",
    "user",
    "safety_identifier",
    "metadata",
    "truncation",
    "reasoning",
    "include",
    "prompt_cache_key",
    "prompt_cache_retention",
    "service_tier",
    "top_logprobs",
    "stream_options",
];

/// What `reasoning.summary` may ask for: each shows the team's work, the same way.
const SUMMARIES: &[&str] = &["auto", "concise", "detailed"];

/// Refused by name: what an agency cannot do.
const REFUSED: &[(&str, &str)] = &[
    (
        "background",
        "background mode is not available: an agency answers while the request waits (stream it to see progress)",
    ),
    (
        "conversation",
        "the Conversations API is not available: continue with `previous_response_id`, or resend the input",
    ),
    (
        "prompt",
        "stored prompts are not available: send `instructions` and `input`",
    ),
];

#[derive(Debug, Deserialize)]
pub(super) struct CreateResponse {
    model: Option<String>,
    input: Option<Value>,
    instructions: Option<String>,
    previous_response_id: Option<String>,
    store: Option<bool>,
    stream: Option<bool>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
    parallel_tool_calls: Option<Value>,
    text: Option<Value>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

impl Named for CreateResponse {
    const MISSING: &'static str = "Missing required parameter: 'model'.";

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

/// What a response echoes of its request.
struct Echo {
    id: String,
    created_at: i64,
    model: String,
    instructions: Option<String>,
    previous_response_id: Option<String>,
    store: bool,
    tools: Value,
    tool_choice: Value,
    parallel_tool_calls: bool,
    text: Value,
    metadata: Value,
    /// The reasoning summary asked for.
    summary: Option<String>,
}

impl Echo {
    /// What a response echoes of `request`, to `agency`'s name; `summary` is the reasoning
    /// summary it asks for.
    fn of(request: &CreateResponse, agency: &Agency, summary: Option<String>) -> Self {
        Self {
            id: new_id("resp"),
            created_at: Utc::now().timestamp(),
            model: agency.name.clone(),
            instructions: request.instructions.clone(),
            previous_response_id: request.previous_response_id.clone(),
            store: request.store.unwrap_or(true),
            tools: request.tools.clone().unwrap_or(json!([])),
            tool_choice: request.tool_choice.clone().unwrap_or(json!("auto")),
            parallel_tool_calls: request
                .parallel_tool_calls
                .as_ref()
                .and_then(Value::as_bool)
                .unwrap_or(true),
            text: request
                .text
                .clone()
                .unwrap_or(json!({"format": {"type": "text"}})),
            metadata: request.other.get("metadata").cloned().unwrap_or(json!({})),
            summary,
        }
    }

    /// The response object, `status` with `output` and `usage` (or `error`).
    fn response(&self, status: &str, output: Vec<Value>, usage: Value, error: Value) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": false,
            "error": error,
            "incomplete_details": null,
            "instructions": self.instructions,
            "max_output_tokens": null,
            "max_tool_calls": null,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": self.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": null, "summary": self.summary},
            "service_tier": "default",
            "store": self.store,
            "temperature": 1.0,
            "text": self.text,
            "tool_choice": self.tool_choice,
            "tools": self.tools,
            "top_logprobs": 0,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": null,
            "metadata": self.metadata,
        })
    }
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// `POST /v1/responses`, and `/api/agency/{agency}/responses`.
pub(super) async fn create(
    State(s): State<AppState>,
    Asked {
        request_id,
        key,
        agency,
        conversation,
        show_work,
        body: request,
    }: Asked<CreateResponse>,
) -> Result<Response, OpenAiError> {
    let request_id = &request_id;
    check(&request)?;
    let summary = reasoning_summary(&request)?;
    let show_work = show_work || summary.is_some();
    let client = tools::client_tools(
        input::flat_tools(request.tools.as_ref())?.as_ref(),
        input::flat_choice(request.tool_choice.as_ref()).as_ref(),
        request.parallel_tool_calls.as_ref(),
    )?;
    let text_format = request.text.as_ref().and_then(|t| t.get("format"));
    let response_format = format::response_format(text_format, "text.format", true)?;
    let previous = match &request.previous_response_id {
        None => None,
        Some(id) => Some(previous(&s, &agency, request_id, id).await?),
    };
    let items = input::input_items(request.input.as_ref())?;
    let approvals = input::approvals(&items)?;
    if !approvals.is_empty() && previous.is_none() {
        return Err(OpenAiError::invalid(
            "`mcp_approval_response` items answer the approval requests of a previous response: send its id as `previous_response_id`.",
            Some("previous_response_id"),
        ));
    }
    let messages = input::messages(request.instructions.as_deref(), previous.as_ref(), &items)?;
    let mut turn = if approvals.is_empty() {
        chat_turn(messages, previous.is_some())?
    } else {
        agency_runtime::api::ChatTurn::default()
    };
    turn.approvals = approvals;
    turn.pause_on_approvals = true;
    turn.end_user = end_user(&request.other);
    turn.tools = client.tools;
    turn.tool_use = client.tool_use;
    turn.format = response_format;
    turn.conversation = conversation;
    turn.after = previous.as_ref().map(|p| (p.conversation, p.turn));

    let stream = request.stream.unwrap_or(false);
    let kept = Kept {
        echo: Echo::of(&request, &agency, summary),
        input: Value::Array(items.iter().map(input::with_id).collect()),
        s: s.clone(),
        agency: agency.clone(),
        show_work,
    };
    let turn = super::begin(
        &s,
        request_id,
        key,
        agency,
        turn,
        Watched { stream, show_work },
        agency_core::Face::Responses,
    )
    .await?;
    let conversation = turn.conversation();
    let response = if stream {
        crate::encode::sse(turn.events(), stream::Events::new(kept, request_id))
    } else {
        respond(kept, turn, request_id).await?
    };
    Ok(super::of_conversation(response, conversation))
}

/// The response of a turn run whole.
async fn respond(
    mut kept: Kept,
    turn: agency_runtime::Turn,
    request_id: &RequestId,
) -> Result<Response, OpenAiError> {
    let out = turn
        .outcome()
        .await
        .map_err(|e| runtime_error(e, request_id))?;
    let mut items = Vec::new();
    if kept.show_work {
        let lines = Work::of(&out);
        if !lines.is_empty() {
            items.push(reasoning_item(&new_id("rs"), &lines, "completed"));
        }
    }
    items.extend(output(&out));
    Ok(axum::Json(kept.completed(&out, items).await).into_response())
}

/// The previous response a request names: its conversation after its turn, and the calls it
/// ended with.
async fn previous(
    s: &AppState,
    agency: &Agency,
    request_id: &RequestId,
    id: &str,
) -> Result<ApiResponse, OpenAiError> {
    s.rt.conversations()
        .response(agency.id, id)
        .await
        .map_err(|e| runtime_error(e, request_id))?
        .ok_or_else(|| {
            OpenAiError::invalid(
                format!("Previous response with id '{id}' not found."),
                Some("previous_response_id"),
            )
            .status(StatusCode::NOT_FOUND)
        })
}

/// Refuses what an agency cannot do (by name), and parameters it does not know.
fn check(r: &CreateResponse) -> Result<(), OpenAiError> {
    for (name, why) in REFUSED {
        if r.other
            .get(*name)
            .is_some_and(|v| !v.is_null() && *v != json!(false))
        {
            return Err(OpenAiError::invalid(
                format!("`{name}` is not supported: {why}."),
                Some(name),
            ));
        }
    }
    if let Some(name) = r
        .other
        .keys()
        .find(|k| !IGNORED.contains(&k.as_str()) && !REFUSED.iter().any(|(n, _)| n == k))
    {
        return Err(OpenAiError::invalid(
            format!("Unrecognized request argument supplied: {name}"),
            Some(name),
        ));
    }
    Ok(())
}

/// The reasoning summary `reasoning` asks for (`summary`, or the older `generate_summary`):
/// asking for one shows the team's work. Checked as OpenAI checks it; `effort` is ignored.
fn reasoning_summary(r: &CreateResponse) -> Result<Option<String>, OpenAiError> {
    let reasoning = match r.other.get("reasoning") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(reasoning)) => reasoning,
        Some(_) => {
            return Err(OpenAiError::invalid(
                "Invalid type for 'reasoning': expected an object.",
                Some("reasoning"),
            )
            .with_code("invalid_type"));
        }
    };
    for field in ["summary", "generate_summary"] {
        match reasoning.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if SUMMARIES.contains(&s.as_str()) => {
                return Ok(Some(s.clone()));
            }
            Some(other) => {
                return Err(OpenAiError::invalid(
                    format!(
                        "Invalid value for 'reasoning.{field}': {other}. Supported values are: 'auto', 'concise', and 'detailed'."
                    ),
                    Some(&format!("reasoning.{field}")),
                )
                .with_code("invalid_value"));
            }
        }
    }
    Ok(None)
}

/// The team's work as a `reasoning` item: a summary part a line.
fn reasoning_item(id: &str, lines: &[String], status: &str) -> Value {
    let summary: Vec<Value> = lines
        .iter()
        .map(|text| json!({"type": "summary_text", "text": text}))
        .collect();
    json!({"type": "reasoning", "id": id, "summary": summary, "status": status})
}

/// The output of a turn: the answer as one message, or the calls it paused on (the client's,
/// or those waiting for a person's approval).
fn output(out: &TurnOutcome) -> Vec<Value> {
    if !out.approvals.is_empty() {
        out.approvals.iter().map(approval_item).collect()
    } else if out.tool_calls.is_empty() {
        vec![message_item(&new_id("msg"), &out.answer, "completed")]
    } else {
        out.tool_calls
            .iter()
            .map(|c| call_item(&new_id("fc"), c, "completed"))
            .collect()
    }
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn call_item(id: &str, call: &ToolCall, status: &str) -> Value {
    let arguments = if status == "completed" {
        call.arguments.as_str()
    } else {
        ""
    };
    json!({"type": "function_call", "id": id, "call_id": call.id, "name": call.name,
           "arguments": arguments, "status": status})
}

/// An approval the turn waits for, as OpenAI's `mcp_approval_request` item: the server's
/// name is its label, and the id (`mcpr_…`) is what `mcp_approval_response` answers.
pub(super) fn approval_item(approval: &agency_core::Approval) -> Value {
    let (server, tool) =
        agency_core::tool::split(&approval.call.name).unwrap_or(("", &approval.call.name));
    json!({"type": "mcp_approval_request", "id": approval_request_id(approval.id),
           "server_label": server, "name": tool, "arguments": approval.call.arguments})
}

pub(super) fn approval_request_id(id: agency_core::ApprovalId) -> String {
    format!("mcpr_{}", id.0.simple())
}

fn usage(out: &TurnOutcome) -> Value {
    json!({
        "input_tokens": out.usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out.usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": out.usage.total(),
    })
}

/// What a response keeps of its request, to echo and store it.
struct Kept {
    s: AppState,
    agency: Arc<Agency>,
    echo: Echo,
    /// The input items, as stored and listed.
    input: Value,
    /// Whether the output shows the team's work.
    show_work: bool,
}

impl Kept {
    /// The completed response with `output`, stored unless its request said `store: false`
    /// (a failure to store is logged: the client has its answer).
    async fn completed(&mut self, out: &TurnOutcome, output: Vec<Value>) -> Value {
        let body = self
            .echo
            .response("completed", output, usage(out), Value::Null);
        if self.echo.store {
            let record = ApiResponse {
                id: self.echo.id.clone(),
                agency: self.agency.id,
                conversation: out.conversation_id,
                turn: out.number,
                created_at: Utc::now(),
                body: body.to_string(),
                input: self.input.to_string(),
            };
            if let Err(e) = self.s.rt.conversations().save_response(&record).await {
                tracing::error!(error = %e, response = %self.echo.id, "could not store a response");
            }
        }
        body
    }
}
