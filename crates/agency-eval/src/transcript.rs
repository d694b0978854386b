//! Transcripts as files: JSON with the spec's message objects (see `docs/eval.md`).

use agency_core::eval::{Transcript, TranscriptMessage, TranscriptUser};
use serde::Deserialize;

use crate::EvalError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    users: Vec<User>,
    messages: Vec<Message>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct User {
    id: String,
    username: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    from: String,
    #[serde(default)]
    tagged: Vec<String>,
    id: String,
    text: String,
    timestamp: String,
}

/// Reads a transcript: `{"users": [{"id", "username"}], "messages": [{"from", "tagged",
/// "id", "text", "timestamp"}]}`, checked (every problem named by its place).
pub fn parse(source: &str, text: &str) -> Result<Transcript, EvalError> {
    let file: File = serde_json::from_str(text).map_err(|e| {
        EvalError::Transcript(vec![format!(
            "{source}: line {}, column {}: {e}",
            e.line(),
            e.column()
        )])
    })?;
    let t = Transcript {
        users: file
            .users
            .into_iter()
            .map(|u| TranscriptUser {
                id: u.id,
                username: u.username,
            })
            .collect(),
        messages: file
            .messages
            .into_iter()
            .map(|m| TranscriptMessage {
                from: m.from,
                tagged: m.tagged,
                id: m.id,
                text: m.text,
                timestamp: m.timestamp,
            })
            .collect(),
    };
    let problems = t.problems();
    if problems.is_empty() {
        Ok(t)
    } else {
        Err(EvalError::Transcript(
            problems
                .into_iter()
                .map(|p| format!("{source}: {p}"))
                .collect(),
        ))
    }
}
