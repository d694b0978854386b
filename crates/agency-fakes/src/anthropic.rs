//! Anthropic Messages, as the fake speaks it.
//!
//! The shapes follow `POST /v1/messages` (API version `2023-06-01`): a `message` object when not
//! streaming; when streaming, named server-sent events (`event: <type>` then `data: {...}`, the
//! data's `type` repeating the name) in the order `message_start`, `content_block_start`,
//! `ping`, `content_block_delta`…, `content_block_stop`, `message_delta`, `message_stop`. Errors
//! are `{"type":"error","error":{"type","message"}}`, as a body with an error status or as an
//! `error` event inside a stream.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::Reply;

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
