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

use std::convert::Infallible;
use std::sync::Arc;

use agency_core::{Agency, ApiKey, ToolCall};
use agency_runtime::api::{ApiResponse, ChatTurn, Opened};
use agency_runtime::{RuntimeError, TurnOutcome};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::types::{ChatMessage, Content};
use super::{
    CONVERSATION_HEADER, KEEP_ALIVE, OpenAiError, RequestId, authorize, body_of, chat_turn,
    end_user, format, names, runtime_error, tools,
};
use crate::AppState;
use crate::auth::{Key, KeyRefused};

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
struct CreateResponse {
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
}

impl Echo {
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
            "reasoning": {"effort": null, "summary": null},
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

pub(super) async fn v1_create(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    key: Result<Key, KeyRefused>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // Boxed, as `openai::v1_chat`'s turn: axum moves a handler's future several times.
    Box::pin(create(s, &request, None, key, headers, body))
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn agency_create(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(agency): Path<String>,
    key: Result<Key, KeyRefused>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    Box::pin(create(s, &request, Some(agency), key, headers, body))
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn create(
    s: AppState,
    request_id: &RequestId,
    path_agency: Option<String>,
    key: Result<Key, KeyRefused>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let body = body_of(body)?;
    let (key, agency) = authorize(&s, request_id, key, path_agency.as_deref()).await?;
    let request: CreateResponse = serde_json::from_slice(&body).map_err(|e| {
        OpenAiError::invalid(
            format!("We could not parse the JSON body of your request: {e}"),
            None,
        )
    })?;
    match (&path_agency, &request.model) {
        (Some(_), _) => {}
        (None, Some(model)) if names(&agency, model) => {}
        (None, Some(model)) if !model.trim().is_empty() => {
            return Err(OpenAiError::model_not_found(model));
        }
        (None, _) => {
            return Err(OpenAiError::invalid(
                "Missing required parameter: 'model'.",
                Some("model"),
            ));
        }
    }
    check(&request)?;
    let client = tools::client_tools(
        flat_tools(request.tools.as_ref())?.as_ref(),
        flat_choice(request.tool_choice.as_ref()).as_ref(),
        request.parallel_tool_calls.as_ref(),
    )?;
    let text_format = request.text.as_ref().and_then(|t| t.get("format"));
    let response_format = format::response_format(text_format, "text.format", true)?;

    // The previous response: its conversation after its turn, and the calls it ended with.
    let previous = match &request.previous_response_id {
        None => None,
        Some(id) => Some(
            s.rt.response(agency.id, id)
                .await
                .map_err(|e| runtime_error(e, request_id))?
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        format!("Previous response with id '{id}' not found."),
                        Some("previous_response_id"),
                    )
                    .status(StatusCode::NOT_FOUND)
                })?,
        ),
    };
    let items = input_items(request.input.as_ref())?;
    let mut messages = Vec::new();
    if let Some(instructions) = request
        .instructions
        .as_deref()
        .filter(|i| !i.trim().is_empty())
    {
        messages.push(message("system", Content::Text(instructions.to_string())));
    }
    if let Some(previous) = &previous {
        // Results of the previous response's calls follow those calls.
        let calls = previous_calls(previous);
        if !calls.is_empty()
            && items
                .first()
                .is_some_and(|i| kind(i) == "function_call_output")
        {
            messages.push(calls_message(calls));
        }
    }
    messages.extend(chat_messages(&items)?);
    let mut turn = chat_turn(messages, previous.is_some())?;
    turn.end_user = end_user(&request.other);
    turn.tools = client.tools;
    turn.tool_use = client.tool_use;
    turn.format = response_format;
    turn.conversation = super::named_conversation(&headers)?;
    turn.after = previous.as_ref().map(|p| (p.conversation, p.turn));

    let echo = Echo {
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
    };
    let stored_input = Value::Array(items.iter().map(with_id).collect());

    let rt = s.rt.clone();
    let conversation = rt
        .api_conversation(&key, &agency, &turn)
        .await
        .map_err(|e| runtime_error(e, request_id))?;
    tracing::Span::current().record("conversation", tracing::field::display(conversation.id()));
    let conversation_header = HeaderValue::from_str(&conversation.id().to_string()).ok();
    let mut response = if request.stream.unwrap_or(false) {
        stream(
            s,
            request_id.clone(),
            key,
            agency,
            conversation,
            turn,
            echo,
            stored_input,
        )
    } else {
        let out = rt
            .api_turn(&key, conversation, turn, None)
            .await
            .map_err(|e| runtime_error(e, request_id))?;
        let body = echo.response("completed", output(&out), usage(&out), Value::Null);
        keep(&s, &agency, &echo, &out, &body, &stored_input).await;
        axum::Json(body).into_response()
    };
    if let Some(v) = conversation_header {
        response.headers_mut().insert(CONVERSATION_HEADER, v);
    }
    Ok(response)
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

/// The Responses API's tools (`{"type": "function", "name", "parameters", …}`) in Chat
/// Completions' shape, so one reader checks both. Hosted tools stay as they are, to be refused
/// by name.
fn flat_tools(tools: Option<&Value>) -> Result<Option<Value>, OpenAiError> {
    let Some(Value::Array(items)) = tools else {
        return Ok(tools.cloned());
    };
    Ok(Some(Value::Array(
        items
            .iter()
            .map(|t| {
                if t.get("type").and_then(Value::as_str) != Some("function") {
                    return t.clone();
                }
                let mut function = Map::new();
                for field in ["name", "description", "parameters", "strict"] {
                    if let Some(v) = t.get(field) {
                        function.insert(field.into(), v.clone());
                    }
                }
                json!({"type": "function", "function": function})
            })
            .collect(),
    )))
}

/// `{"type": "function", "name": …}` as Chat Completions' named choice.
fn flat_choice(choice: Option<&Value>) -> Option<Value> {
    match choice {
        Some(v) if v.get("type").and_then(Value::as_str) == Some("function") => {
            let name = v.get("name").cloned().unwrap_or(Value::Null);
            Some(json!({"type": "function", "function": {"name": name}}))
        }
        other => other.cloned(),
    }
}

/// `input`: a string (one user message) or a list of items.
fn input_items(input: Option<&Value>) -> Result<Vec<Value>, OpenAiError> {
    match input {
        Some(Value::String(text)) => Ok(vec![
            json!({"type": "message", "role": "user", "content": text}),
        ]),
        Some(Value::Array(items)) => Ok(items.clone()),
        None | Some(Value::Null) => Err(OpenAiError::invalid(
            "Missing required parameter: 'input'.",
            Some("input"),
        )),
        Some(_) => Err(OpenAiError::invalid(
            "Invalid 'input': expected a string or an array of input items.",
            Some("input"),
        )),
    }
}

/// An item's type (`message` when it has a role and no type).
fn kind(item: &Value) -> &str {
    item.get("type")
        .and_then(Value::as_str)
        .unwrap_or(if item.get("role").is_some() {
            "message"
        } else {
            ""
        })
}

fn message(role: &str, content: Content) -> ChatMessage {
    ChatMessage {
        role: role.to_string(),
        content: Some(content),
        other: Map::new(),
    }
}

/// An assistant message making `calls`.
fn calls_message(calls: Vec<Value>) -> ChatMessage {
    let mut other = Map::new();
    other.insert("tool_calls".into(), Value::Array(calls));
    ChatMessage {
        role: "assistant".into(),
        content: None,
        other,
    }
}

/// Input items as chat messages: consecutive `function_call` items are one assistant
/// message's calls; reasoning items are dropped (the agency's models reason on their own).
fn chat_messages(items: &[Value]) -> Result<Vec<ChatMessage>, OpenAiError> {
    let mut out: Vec<ChatMessage> = Vec::new();
    let mut calls: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let param = format!("input[{i}]");
        let kind = kind(item);
        if kind != "function_call" && !calls.is_empty() {
            out.push(calls_message(std::mem::take(&mut calls)));
        }
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                if !["user", "system", "developer", "assistant"].contains(&role) {
                    return Err(OpenAiError::invalid(
                        format!("Invalid value for '{param}.role': `{role}`."),
                        Some(&format!("{param}.role")),
                    ));
                }
                out.push(message(role, content(item.get("content"), &param)?));
            }
            "function_call" => {
                let field = |f: &str| item.get(f).and_then(Value::as_str);
                let (Some(call_id), Some(name)) = (field("call_id"), field("name")) else {
                    return Err(OpenAiError::invalid(
                        format!("Missing required parameter: '{param}.call_id' or '{param}.name'."),
                        Some(&param),
                    ));
                };
                calls.push(json!({"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": field("arguments").unwrap_or("")}}));
            }
            "function_call_output" => {
                let call_id = item.get("call_id").and_then(Value::as_str).ok_or_else(|| {
                    OpenAiError::invalid(
                        format!("Missing required parameter: '{param}.call_id'."),
                        Some(&format!("{param}.call_id")),
                    )
                })?;
                let output = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                let mut other = Map::new();
                other.insert("tool_call_id".into(), json!(call_id));
                out.push(ChatMessage {
                    role: "tool".into(),
                    content: Some(Content::Text(output)),
                    other,
                });
            }
            "reasoning" => {}
            other => {
                return Err(OpenAiError::invalid(
                    format!(
                        "Invalid '{param}.type': `{other}` items are not supported by an agency (it takes messages, function calls and their outputs)."
                    ),
                    Some(&format!("{param}.type")),
                ));
            }
        }
    }
    if !calls.is_empty() {
        out.push(calls_message(calls));
    }
    Ok(out)
}

/// A message item's content in Chat Completions' terms: text, or parts (`input_text`,
/// `output_text` → text; `input_image` → an image part).
fn content(content: Option<&Value>, param: &str) -> Result<Content, OpenAiError> {
    match content {
        Some(Value::String(text)) => Ok(Content::Text(text.clone())),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| {
                let at = format!("{param}.content[{j}]");
                match part.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => Ok(json!({"type": "text",
                        "text": part.get("text").cloned().unwrap_or(json!(""))})),
                    Some("refusal") => Ok(json!({"type": "text",
                        "text": part.get("refusal").cloned().unwrap_or(json!(""))})),
                    Some("input_image") => Ok(json!({"type": "image_url",
                        "image_url": {"url": part.get("image_url").cloned().unwrap_or(json!(""))}})),
                    other => Err(OpenAiError::invalid(
                        format!(
                            "Invalid '{at}.type': `{}` parts are not supported by an agency (it reads text and images).",
                            other.unwrap_or("?")
                        ),
                        Some(&format!("{at}.type")),
                    )),
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Content::Parts),
        _ => Err(OpenAiError::invalid(
            format!("Missing required parameter: '{param}.content'."),
            Some(&format!("{param}.content")),
        )),
    }
}

/// The calls a stored response ended with, as Chat Completions' `tool_calls`.
fn previous_calls(previous: &ApiResponse) -> Vec<Value> {
    let body: Value = serde_json::from_str(&previous.body).unwrap_or(Value::Null);
    body.get("output")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter(|i| kind(i) == "function_call")
                .map(|i| {
                    json!({"id": i["call_id"], "type": "function",
                           "function": {"name": i["name"], "arguments": i["arguments"]}})
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An input item as stored and listed: with an id and a type.
fn with_id(item: &Value) -> Value {
    let mut item = item.clone();
    if let Value::Object(o) = &mut item {
        if !o.contains_key("type") {
            o.insert("type".into(), json!("message"));
        }
        if !o.contains_key("id") {
            let prefix = match o.get("type").and_then(Value::as_str) {
                Some("function_call") => "fc",
                Some("function_call_output") => "fco",
                _ => "msg",
            };
            o.insert("id".into(), json!(new_id(prefix)));
        }
    }
    item
}

/// The output of a turn: the answer as one message, or the calls it paused on.
fn output(out: &TurnOutcome) -> Vec<Value> {
    if out.tool_calls.is_empty() {
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

fn usage(out: &TurnOutcome) -> Value {
    json!({
        "input_tokens": out.usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out.usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": out.usage.total(),
    })
}

/// Stores the response unless its request said `store: false` (a failure to store is logged:
/// the client has its answer).
async fn keep(
    s: &AppState,
    agency: &Agency,
    echo: &Echo,
    out: &TurnOutcome,
    body: &Value,
    input: &Value,
) {
    if !echo.store {
        return;
    }
    let record = ApiResponse {
        id: echo.id.clone(),
        agency: agency.id,
        conversation: out.conversation_id,
        turn: out.number,
        created_at: Utc::now(),
        body: body.to_string(),
        input: input.to_string(),
    };
    if let Err(e) = s.rt.save_response(&record).await {
        tracing::error!(error = %e, response = %echo.id, "could not store a response");
    }
}

/// A streamed response: `response.created`, `response.in_progress`, then the answer's message
/// item as the manager writes it (`output_item.added`, `content_part.added`,
/// `output_text.delta`s, `output_text.done`, `content_part.done`, `output_item.done`) or the
/// calls it paused on (each `output_item.added`, `function_call_arguments.delta` and `.done`,
/// `output_item.done`), and `response.completed` — or `response.failed`.
#[allow(clippy::too_many_arguments)] // the request's parts, each named at its one call
fn stream(
    s: AppState,
    request_id: RequestId,
    key: ApiKey,
    agency: Arc<Agency>,
    conversation: Opened,
    turn: ChatTurn,
    echo: Echo,
    input: Value,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(32);
    let mut first_token = super::FirstToken::new(&agency.name);
    tokio::spawn(agency_telemetry::Span::current().run(
        async move {
            let mut emit = Emitter { tx, seq: 0 };
            let pending = echo.response("in_progress", Vec::new(), Value::Null, Value::Null);
            emit.send("response.created", json!({"response": pending})).await;
            emit.send("response.in_progress", json!({"response": pending})).await;

            let (answer_tx, mut answer_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let rt = s.rt.clone();
            let running = tokio::spawn(agency_telemetry::Span::current().run(
                async move { rt.api_turn(&key, conversation, turn, Some(answer_tx)).await }
                    .in_current_span(),
            ));
            let message_id = new_id("msg");
            let mut streamed = String::new();
            let mut opened = false;
            while let Some(piece) = answer_rx.recv().await {
                if piece.is_empty() {
                    continue;
                }
                if !opened {
                    opened = true;
                    open_message(&mut emit, &message_id).await;
                }
                first_token.seen();
                streamed.push_str(&piece);
                emit.send(
                    "response.output_text.delta",
                    json!({"item_id": message_id, "output_index": 0, "content_index": 0,
                           "delta": piece, "logprobs": []}),
                )
                .await;
            }
            let result = running
                .await
                .unwrap_or_else(|e| Err(RuntimeError::Invalid(format!("the turn stopped: {e}"))));
            match result {
                Ok(out) if out.tool_calls.is_empty() => {
                    if !opened {
                        open_message(&mut emit, &message_id).await;
                    }
                    let rest = out
                        .answer
                        .strip_prefix(streamed.as_str())
                        .map_or_else(|| format!("\n\n{}", out.answer), str::to_string);
                    let text = if rest.is_empty() {
                        streamed.clone()
                    } else {
                        first_token.seen();
                        emit.send(
                            "response.output_text.delta",
                            json!({"item_id": message_id, "output_index": 0,
                                   "content_index": 0, "delta": rest, "logprobs": []}),
                        )
                        .await;
                        format!("{streamed}{rest}")
                    };
                    let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                    emit.send(
                        "response.output_text.done",
                        json!({"item_id": message_id, "output_index": 0, "content_index": 0,
                               "text": text, "logprobs": []}),
                    )
                    .await;
                    emit.send(
                        "response.content_part.done",
                        json!({"item_id": message_id, "output_index": 0, "content_index": 0,
                               "part": part}),
                    )
                    .await;
                    let item = message_item(&message_id, &text, "completed");
                    emit.send(
                        "response.output_item.done",
                        json!({"output_index": 0, "item": item}),
                    )
                    .await;
                    let body = echo.response("completed", vec![item], usage(&out), Value::Null);
                    keep(&s, &agency, &echo, &out, &body, &input).await;
                    emit.send("response.completed", json!({"response": body})).await;
                }
                Ok(out) => {
                    let mut output = Vec::new();
                    for (index, call) in out.tool_calls.iter().enumerate() {
                        let id = new_id("fc");
                        emit.send(
                            "response.output_item.added",
                            json!({"output_index": index, "item": call_item(&id, call, "in_progress")}),
                        )
                        .await;
                        emit.send(
                            "response.function_call_arguments.delta",
                            json!({"item_id": id, "output_index": index, "delta": call.arguments}),
                        )
                        .await;
                        emit.send(
                            "response.function_call_arguments.done",
                            json!({"item_id": id, "output_index": index, "name": call.name,
                                   "arguments": call.arguments}),
                        )
                        .await;
                        let item = call_item(&id, call, "completed");
                        emit.send(
                            "response.output_item.done",
                            json!({"output_index": index, "item": item}),
                        )
                        .await;
                        output.push(item);
                    }
                    let body = echo.response("completed", output, usage(&out), Value::Null);
                    keep(&s, &agency, &echo, &out, &body, &input).await;
                    emit.send("response.completed", json!({"response": body})).await;
                }
                Err(e) => {
                    let error = runtime_error(e, &request_id);
                    let failed = echo.response(
                        "failed",
                        Vec::new(),
                        Value::Null,
                        json!({"code": "server_error", "message": error.message}),
                    );
                    emit.send("response.failed", json!({"response": failed})).await;
                }
            }
        }
        .in_current_span(),
    ));
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(crate::counted(events))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

/// A response's events, numbered in order.
struct Emitter {
    tx: tokio::sync::mpsc::Sender<Event>,
    seq: u64,
}

impl Emitter {
    async fn send(&mut self, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let _ = self
            .tx
            .send(Event::default().event(kind).data(data.to_string()))
            .await;
    }
}

/// The events that open the answer's message item.
async fn open_message(emit: &mut Emitter, id: &str) {
    emit.send(
        "response.output_item.added",
        json!({"output_index": 0, "item": message_item(id, "", "in_progress")}),
    )
    .await;
    emit.send(
        "response.content_part.added",
        json!({"item_id": id, "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
    )
    .await;
}

fn not_found(id: &str) -> OpenAiError {
    OpenAiError::invalid(format!("No response found with id '{id}'."), None)
        .status(StatusCode::NOT_FOUND)
}

/// The stored response `id` of the key's agency (`selector`, when given, must name it).
async fn stored(
    s: &AppState,
    request: &RequestId,
    key: Result<Key, KeyRefused>,
    selector: Option<&str>,
    id: &str,
) -> Result<ApiResponse, OpenAiError> {
    let (_, agency) = authorize(s, request, key, selector).await?;
    s.rt.response(agency.id, id)
        .await
        .map_err(|e| runtime_error(e, request))?
        .ok_or_else(|| not_found(id))
}

fn json_text(text: &str) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text.to_string(),
    )
        .into_response()
}

pub(super) async fn v1_get(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(id): Path<String>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let r = stored(&s, &request, key, None, &id).await?;
    Ok(json_text(&r.body))
}

pub(super) async fn agency_get(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path((agency, id)): Path<(String, String)>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let r = stored(&s, &request, key, Some(&agency), &id).await?;
    Ok(json_text(&r.body))
}

async fn delete(
    s: &AppState,
    request: &RequestId,
    key: Result<Key, KeyRefused>,
    selector: Option<&str>,
    id: &str,
) -> Result<Response, OpenAiError> {
    let (_, agency) = authorize(s, request, key, selector).await?;
    let deleted =
        s.rt.delete_response(agency.id, id)
            .await
            .map_err(|e| runtime_error(e, request))?;
    if !deleted {
        return Err(not_found(id));
    }
    Ok(axum::Json(json!({"id": id, "object": "response", "deleted": true})).into_response())
}

pub(super) async fn v1_delete(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(id): Path<String>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    delete(&s, &request, key, None, &id).await
}

pub(super) async fn agency_delete(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path((agency, id)): Path<(String, String)>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    delete(&s, &request, key, Some(&agency), &id).await
}

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    order: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// A response's input items, a page of them: newest first unless `order=asc`.
fn input_list(r: &ApiResponse, q: &ListQuery) -> Result<Value, OpenAiError> {
    let mut items: Vec<Value> = serde_json::from_str(&r.input).unwrap_or_default();
    match q.order.as_deref() {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(other) => {
            return Err(OpenAiError::invalid(
                format!("Invalid value for 'order': `{other}` (asc or desc)."),
                Some("order"),
            ));
        }
    }
    if let Some(after) = &q.after {
        let at = items
            .iter()
            .position(|i| i.get("id").and_then(Value::as_str) == Some(after.as_str()))
            .map_or(items.len(), |p| p + 1);
        items.drain(..at);
    }
    let limit = q.limit.unwrap_or(20).clamp(1, 100);
    let has_more = items.len() > limit;
    items.truncate(limit);
    let id_of = |i: Option<&Value>| i.and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    Ok(json!({
        "object": "list",
        "data": items,
        "first_id": id_of(items.first()),
        "last_id": id_of(items.last()),
        "has_more": has_more,
    }))
}

pub(super) async fn v1_input_items(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(id): Path<String>,
    Query(q): Query<ListQuery>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let r = stored(&s, &request, key, None, &id).await?;
    Ok(axum::Json(input_list(&r, &q)?).into_response())
}

pub(super) async fn agency_input_items(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path((agency, id)): Path<(String, String)>,
    Query(q): Query<ListQuery>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let r = stored(&s, &request, key, Some(&agency), &id).await?;
    Ok(axum::Json(input_list(&r, &q)?).into_response())
}
