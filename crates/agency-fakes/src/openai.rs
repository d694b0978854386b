//! OpenAI Chat Completions, as the fake speaks it: the bodies, chunks and errors
//! api.openai.com really sends.

use serde_json::{Value, json};

use crate::Reply;

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
