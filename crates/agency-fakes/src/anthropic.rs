//! Anthropic Messages, as the fake speaks it.
//!
//! The shapes follow `POST /v1/messages` (API version `2023-06-01`): a `message` object when not
//! streaming; when streaming, named server-sent events (`event: <type>` then `data: {...}`, the
//! data's `type` repeating the name) in the order `message_start`, `content_block_start`,
//! `ping`, `content_block_delta`…, `content_block_stop`, `message_delta`, `message_stop`. Errors
//! are `{"type":"error","error":{"type","message"}}`, as a body with an error status or as an
//! `error` event inside a stream.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::{Call, Reply, is_tool_name};

/// The model the fake says it is.
pub const MODEL: &str = "claude-sonnet-4-5";

/// A fresh message id in Anthropic's style (`msg_01…`).
fn message_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("msg_01Fake{:016}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// One server-sent event: its name, then its data on one line.
fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}")
}

/// A whole (non-streamed) message answering with `text`.
pub fn message(text: &str, input_tokens: u32, output_tokens: u32) -> Reply {
    Reply::json(json!({
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}
    }))
}

/// The events up to and including the text: `message_start` (with the input tokens),
/// `content_block_start`, a `ping`, and one `content_block_delta` per piece.
fn opening(pieces: &[&str], input_tokens: u32) -> Vec<String> {
    let mut events = vec![
        event(
            "message_start",
            &json!({
                "type": "message_start",
                "message": {
                    "id": message_id(),
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1}
                }
            }),
        ),
        event(
            "content_block_start",
            &json!({
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""}
            }),
        ),
        event("ping", &json!({"type": "ping"})),
    ];
    events.extend(pieces.iter().map(|piece| {
        event(
            "content_block_delta",
            &json!({
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece}
            }),
        )
    }));
    events
}

/// The whole event sequence of a streamed message whose text is `pieces`, in order.
pub fn stream_events(pieces: &[&str], input_tokens: u32, output_tokens: u32) -> Vec<String> {
    let mut events = opening(pieces, input_tokens);
    events.push(event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}
        }),
    ));
    events.push(event("message_stop", &json!({"type": "message_stop"})));
    events
}

/// A streamed message whose text arrives as `pieces`.
pub fn stream(pieces: &[&str], input_tokens: u32, output_tokens: u32) -> Reply {
    Reply::Sse {
        events: stream_events(pieces, input_tokens, output_tokens),
        stall_after: None,
    }
}

/// A stream that sends `pieces`, then goes silent without closing.
pub fn stalled_stream(pieces: &[&str]) -> Reply {
    let events = opening(pieces, 10);
    Reply::Sse {
        stall_after: Some(events.len()),
        events,
    }
}

/// A stream that sends `pieces`, then an `overloaded_error` event, and ends.
pub fn stream_error(pieces: &[&str]) -> Reply {
    let mut events = opening(pieces, 10);
    events.push(event(
        "error",
        &json!({
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}
        }),
    ));
    Reply::Sse {
        events,
        stall_after: None,
    }
}

/// A stream that sends everything but `message_stop`, and ends (a connection cut short).
pub fn unfinished_stream(pieces: &[&str]) -> Reply {
    let mut events = stream_events(pieces, 10, 5);
    events.pop();
    Reply::Sse {
        events,
        stall_after: None,
    }
}

/// A call's `input` in a whole message: its arguments as JSON. Anthropic always sends an
/// object; arguments that are not JSON are sent as a JSON string (what a broken server might
/// do).
fn input_of(call: &Call) -> Value {
    let arguments = call.arguments();
    serde_json::from_str(&arguments).unwrap_or(Value::String(arguments))
}

/// A whole message that calls tools: a `text` block first when there is text, then one
/// `tool_use` block per call; `stop_reason: "tool_use"`.
pub fn tool_use(
    text: Option<&str>,
    calls: &[Call],
    input_tokens: u32,
    output_tokens: u32,
) -> Reply {
    let mut content: Vec<Value> = text
        .map(|t| json!({"type": "text", "text": t}))
        .into_iter()
        .collect();
    content.extend(
        calls
            .iter()
            .map(|c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input_of(c)})),
    );
    Reply::json(json!({
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}
    }))
}

/// The events of a streamed message that writes `pieces` of text (a text block, when there
/// are any), then calls tools, one block after another as the API sends them: each call's
/// `content_block_start` (its id, name and an empty input), one `input_json_delta` per piece
/// of its arguments, its `content_block_stop`. The message stops for `tool_use`.
pub fn tool_use_stream_events(
    pieces: &[&str],
    calls: &[Call],
    input_tokens: u32,
    output_tokens: u32,
) -> Vec<String> {
    let mut events = opening(pieces, input_tokens);
    let mut index = 0;
    if pieces.is_empty() {
        // No text block: drop its start (the `ping` stays).
        events.remove(1);
    } else {
        events.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        index = 1;
    }
    for c in calls {
        events.push(event(
            "content_block_start",
            &json!({
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}
            }),
        ));
        for piece in &c.pieces {
            events.push(event(
                "content_block_delta",
                &json!({
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}
                }),
            ));
        }
        events.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}
        }),
    ));
    events.push(event("message_stop", &json!({"type": "message_stop"})));
    events
}

/// A streamed message that calls tools (see [`tool_use_stream_events`]).
pub fn tool_use_stream(
    pieces: &[&str],
    calls: &[Call],
    input_tokens: u32,
    output_tokens: u32,
) -> Reply {
    Reply::Sse {
        events: tool_use_stream_events(pieces, calls, input_tokens, output_tokens),
        stall_after: None,
    }
}

/// What the Messages API would refuse in a request's tools and messages (none: it would take
/// it): turns that do not alternate starting with the user, empty content or text blocks, tool
/// names outside `^[a-zA-Z0-9_-]{1,64}$` or given twice, tool blocks without tools, a
/// `tool_use` whose input is not an object, a turn after `tool_use` blocks that does not begin
/// with a `tool_result` for each of them, a `tool_result` that answers none, text before a
/// turn's results.
pub fn problems(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    for t in &tools {
        match t["name"].as_str() {
            Some(n) if is_tool_name(n) => {
                if !names.insert(n.to_string()) {
                    out.push(format!("two tools are named {n}"));
                }
            }
            _ => out.push(format!("a tool's name is not valid: {t}")),
        }
        if !t["input_schema"].is_object() {
            out.push(format!("a tool's input_schema is not an object: {t}"));
        }
    }
    let mut open: Vec<String> = Vec::new();
    let mut tool_blocks = false;
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if m["role"] != want {
            out.push(format!("messages.{i}: expected the {want}'s turn"));
        }
        let blocks = match &m["content"] {
            Value::String(text) => {
                if text.is_empty() {
                    out.push(format!("messages.{i}: empty content"));
                }
                vec![json!({"type": "text", "text": text})]
            }
            Value::Array(blocks) if !blocks.is_empty() => blocks.clone(),
            _ => {
                out.push(format!("messages.{i}: no content"));
                Vec::new()
            }
        };
        let mut leading = true;
        for b in &blocks {
            match b["type"].as_str() {
                Some("text") => {
                    leading = false;
                    if b["text"].as_str().is_none_or(str::is_empty) {
                        out.push(format!("messages.{i}: an empty text block"));
                    }
                }
                Some("tool_result") => {
                    tool_blocks = true;
                    let id = b["tool_use_id"].as_str().unwrap_or_default();
                    match open.iter().position(|o| o == id) {
                        Some(k) if leading => {
                            open.remove(k);
                        }
                        Some(_) => out.push(format!("messages.{i}: a tool_result after text")),
                        None => out.push(format!(
                            "messages.{i}: unexpected tool_use_id {id} in a tool_result"
                        )),
                    }
                }
                Some("tool_use") => {
                    tool_blocks = true;
                    leading = false;
                    if m["role"] != "assistant" {
                        out.push(format!("messages.{i}: a tool_use in the user's turn"));
                    }
                    if !b["name"].as_str().is_some_and(is_tool_name) {
                        out.push(format!("messages.{i}: a tool_use's name is not valid: {b}"));
                    }
                    if !b["input"].is_object() {
                        out.push(format!("messages.{i}: a tool_use's input is not an object"));
                    }
                }
                _ => leading = false,
            }
        }
        if !open.is_empty() {
            out.push(format!(
                "messages.{i}: tool_use ids without tool_result blocks right after: {open:?}"
            ));
        }
        open = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str().map(str::to_string))
            .collect();
    }
    if !open.is_empty() {
        out.push(format!("the chat ends with tool_use unanswered: {open:?}"));
    }
    if tool_blocks && tools.is_empty() {
        out.push("tool_use or tool_result blocks in a request without tools".into());
    }
    out
}

/// The error body Anthropic sends with an error status.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// An error status with Anthropic's error body, e.g. `error(400, "invalid_request_error", "…")`.
pub fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Json {
        status,
        body: error_body(kind, message),
        headers: Vec::new(),
    }
}

/// 401: a wrong API key.
pub fn invalid_key() -> Reply {
    error(401, "authentication_error", "invalid x-api-key")
}

/// 429 with a `retry-after` header, in seconds.
pub fn rate_limited(retry_after_secs: u64) -> Reply {
    Reply::Json {
        status: 429,
        body: error_body(
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        ),
        headers: vec![("retry-after".into(), retry_after_secs.to_string())],
    }
}

/// 529: Anthropic's servers are overloaded.
pub fn overloaded() -> Reply {
    error(529, "overloaded_error", "Overloaded")
}

/// A successful status whose body is cut off mid-JSON.
pub fn malformed() -> Reply {
    Reply::Raw {
        status: 200,
        content_type: "application/json".into(),
        body: r#"{"id":"msg_01Fake","type":"message","role":"assistant","content":[{"type":"te"#
            .into(),
    }
}
