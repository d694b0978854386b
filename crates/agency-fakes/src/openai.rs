//! OpenAI Chat Completions, as the fake speaks it: the bodies, chunks and errors
//! api.openai.com really sends.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::{Call, Reply, is_tool_name};

/// The model the fake says answered.
pub const MODEL: &str = "gpt-4o-2024-08-06";
const ID: &str = "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT";
const CREATED: u64 = 1_741_569_952;
const FINGERPRINT: &str = "fp_f9f4fb6dbf";

fn usage(prompt_tokens: u32, completion_tokens: u32) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    })
}

/// A whole `chat.completion` answering `text`.
pub fn completion(text: &str, prompt_tokens: u32, completion_tokens: u32) -> Reply {
    Reply::json(json!({
        "id": ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": null,
                "annotations": []
            },
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": usage(prompt_tokens, completion_tokens),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT
    }))
}

/// One `chat.completion.chunk` with `choices`, as a `data:` line (`usage` is null on every
/// chunk but the last when the client asks for it).
fn chunk(choices: Value, usage: Value) -> String {
    let chunk = json!({
        "id": ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
        "choices": choices,
        "usage": usage
    });
    format!("data: {chunk}")
}

fn delta_chunk(delta: Value, finish_reason: Value) -> String {
    chunk(
        json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]),
        Value::Null,
    )
}

/// The role chunk, then one chunk per piece.
fn opening(pieces: &[&str]) -> Vec<String> {
    let mut events = vec![delta_chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    events.extend(
        pieces
            .iter()
            .map(|p| delta_chunk(json!({"content": p}), Value::Null)),
    );
    events
}

/// The events of a whole streamed answer (what [`stream`] sends).
pub fn stream_events(pieces: &[&str], prompt_tokens: u32, completion_tokens: u32) -> Vec<String> {
    let mut events = opening(pieces);
    events.push(delta_chunk(json!({}), json!("stop")));
    events.push(chunk(json!([]), usage(prompt_tokens, completion_tokens)));
    events.push("data: [DONE]".to_string());
    events
}

/// A streamed answer, as with `"stream": true, "stream_options": {"include_usage": true}`:
/// the role chunk, one chunk per piece, the finish chunk, the usage chunk, `[DONE]`.
pub fn stream(pieces: &[&str], prompt_tokens: u32, completion_tokens: u32) -> Reply {
    Reply::Sse {
        events: stream_events(pieces, prompt_tokens, completion_tokens),
        stall_after: None,
    }
}

/// A stream that sends the role chunk and `pieces`, then goes silent without closing.
pub fn stalled_stream(pieces: &[&str]) -> Reply {
    let events = opening(pieces);
    Reply::Sse {
        stall_after: Some(events.len()),
        events,
    }
}

/// A stream that sends the role chunk and `pieces`, then closes without `[DONE]` (a dropped
/// connection).
pub fn truncated_stream(pieces: &[&str]) -> Reply {
    Reply::Sse {
        events: opening(pieces),
        stall_after: None,
    }
}

/// A stream that sends the role chunk and `pieces`, then an error object, as OpenAI does when
/// it fails after the headers went out.
pub fn stream_error(pieces: &[&str], message: &str) -> Reply {
    let mut events = opening(pieces);
    events.push(format!(
        "data: {}",
        error_body(message, "server_error", None)
    ));
    Reply::Sse {
        events,
        stall_after: None,
    }
}

/// A whole `chat.completion` whose message calls tools: `text` as its content (null without),
/// `finish_reason: "tool_calls"`.
pub fn tool_calls(
    text: Option<&str>,
    calls: &[Call],
    prompt_tokens: u32,
    completion_tokens: u32,
) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments()}
            })
        })
        .collect();
    Reply::json(json!({
        "id": ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "tool_calls": calls,
                "refusal": null,
                "annotations": []
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": usage(prompt_tokens, completion_tokens),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT
    }))
}

/// The events of a streamed answer that writes `pieces` of text, then calls tools: each call's
/// first chunk has its index, id and name (and empty arguments), the rest carry its argument
/// pieces by index. Parallel calls interleave: every call's first chunk, then the calls' first
/// pieces in index order, then their second pieces, and so on. The finish chunk says
/// `tool_calls`.
pub fn tool_call_stream_events(
    pieces: &[&str],
    calls: &[Call],
    prompt_tokens: u32,
    completion_tokens: u32,
) -> Vec<String> {
    let mut events = opening(pieces);
    for (index, c) in calls.iter().enumerate() {
        events.push(delta_chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": ""}
            }]}),
            Value::Null,
        ));
    }
    let rounds = calls.iter().map(|c| c.pieces.len()).max().unwrap_or(0);
    for round in 0..rounds {
        for (index, c) in calls.iter().enumerate() {
            if let Some(piece) = c.pieces.get(round) {
                events.push(delta_chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        }
    }
    events.push(delta_chunk(json!({}), json!("tool_calls")));
    events.push(chunk(json!([]), usage(prompt_tokens, completion_tokens)));
    events.push("data: [DONE]".to_string());
    events
}

/// A streamed answer that calls tools (see [`tool_call_stream_events`]).
pub fn tool_call_stream(
    pieces: &[&str],
    calls: &[Call],
    prompt_tokens: u32,
    completion_tokens: u32,
) -> Reply {
    Reply::Sse {
        events: tool_call_stream_events(pieces, calls, prompt_tokens, completion_tokens),
        stall_after: None,
    }
}

/// What Chat Completions would refuse in a request's tools and messages (none: it would take
/// it): tool names outside `^[a-zA-Z0-9_-]{1,64}$` or given twice, a tool call not answered by
/// a `tool` message before the next message that is not one, a `tool` message that answers no
/// call, an assistant message with neither content nor calls.
pub fn problems(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        let name = t.pointer("/function/name").and_then(Value::as_str);
        if t["type"] != "function" {
            out.push(format!("a tool is not a function: {t}"));
        }
        match name {
            Some(n) if is_tool_name(n) => {
                if !names.insert(n.to_string()) {
                    out.push(format!("two tools are named {n}"));
                }
            }
            _ => out.push(format!("a tool's name is not valid: {t}")),
        }
        if t.pointer("/function/parameters")
            .is_some_and(|p| !p.is_object())
        {
            out.push(format!("a tool's parameters are not an object: {t}"));
        }
    }
    let mut open: Vec<String> = Vec::new();
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            match open.iter().position(|o| o == id) {
                Some(k) => {
                    open.remove(k);
                }
                None => out.push(format!("messages.{i}: a tool message answers no open call")),
            }
            if !m["content"].is_string() {
                out.push(format!("messages.{i}: a tool message has no content"));
            }
            continue;
        }
        if !open.is_empty() {
            out.push(format!(
                "messages.{i}: tool calls without a tool message: {open:?}"
            ));
            open.clear();
        }
        let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
        if m["role"] == "assistant" && m["content"].is_null() && calls.is_empty() {
            out.push(format!(
                "messages.{i}: an assistant message with no content"
            ));
        }
        for c in calls {
            let name = c.pointer("/function/name").and_then(Value::as_str);
            if !name.is_some_and(is_tool_name) {
                out.push(format!("messages.{i}: a call's name is not valid: {c}"));
            }
            if !c
                .pointer("/function/arguments")
                .is_some_and(Value::is_string)
            {
                out.push(format!(
                    "messages.{i}: a call's arguments are not text: {c}"
                ));
            }
            match c["id"].as_str() {
                Some(id) if !id.is_empty() => open.push(id.to_string()),
                _ => out.push(format!("messages.{i}: a call has no id: {c}")),
            }
        }
    }
    if !open.is_empty() {
        out.push(format!(
            "the chat ends with tool calls unanswered: {open:?}"
        ));
    }
    out
}

/// OpenAI's error body.
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({
        "error": {
            "message": message,
            "type": kind,
            "param": null,
            "code": code
        }
    })
}

/// An error status with OpenAI's error body (`kind` is the body's `type`).
pub fn error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Reply {
    Reply::Json {
        status,
        body: error_body(message, kind, code),
        headers: Vec::new(),
    }
}

/// The message OpenAI sends with [`invalid_key`].
pub const INVALID_KEY_MESSAGE: &str = "Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.";

/// 401 for a wrong key.
pub fn invalid_key() -> Reply {
    error(
        401,
        INVALID_KEY_MESSAGE,
        "invalid_request_error",
        Some("invalid_api_key"),
    )
}

/// 429 with `Retry-After` and the rate-limit headers.
pub fn rate_limited(retry_after_secs: u64) -> Reply {
    Reply::Json {
        status: 429,
        body: error_body(
            "Rate limit reached for gpt-4o in organization org-abc123 on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms. Visit https://platform.openai.com/account/rate-limits to learn more.",
            "requests",
            Some("rate_limit_exceeded"),
        ),
        headers: vec![
            ("retry-after".into(), retry_after_secs.to_string()),
            ("x-ratelimit-limit-requests".into(), "500".into()),
            ("x-ratelimit-remaining-requests".into(), "0".into()),
            ("x-ratelimit-reset-requests".into(), "120ms".into()),
        ],
    }
}

/// The message OpenAI sends with [`server_error`].
pub const SERVER_ERROR_MESSAGE: &str =
    "The server had an error while processing your request. Sorry about that!";

/// 500.
pub fn server_error() -> Reply {
    error(500, SERVER_ERROR_MESSAGE, "server_error", None)
}

/// 200 with a body that is not JSON (a proxy's page, a cut-off answer).
pub fn malformed() -> Reply {
    Reply::Raw {
        status: 200,
        content_type: "application/json".into(),
        body: "<html><body>upstream connect error</body></html>".into(),
    }
}
