//! What the providers' tool tests share: tools with awkward names, and contexts that call them.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::Arc;

use agency_core::tool::{Tool, ToolCall, ToolPart, ToolResult};
use agency_core::{AgentId, ConversationId, Message, MessageId, MessageKind};
use agency_providers::ModelRequest;
use serde_json::json;

/// A name longer than any API takes.
pub fn long_name() -> String {
    format!("archive/{}", "very_long_tool_name_".repeat(5))
}

/// Tools whose names no API takes as they are: a `/` in each, dots, a name past 64
/// characters, and names that read the same once cleaned up.
pub fn tools() -> Vec<Tool> {
    let tool = |name: &str, description: &str| Tool {
        name: name.into(),
        description: description.into(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }),
    };
    vec![
        tool("files/read_text_file", "Reads a file."),
        tool("files.v2/read", "Reads a file, again."),
        tool(&long_name(), "Has a long name."),
        tool("a/b", "One."),
        tool("a.b", "Another."),
        tool("a_b", "A third."),
    ]
}

pub fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

pub fn calls(list: &[ToolCall]) -> Option<ToolPart> {
    Some(ToolPart::Calls(list.to_vec()))
}

pub fn result(id: &str, name: &str, is_error: bool) -> Option<ToolPart> {
    Some(ToolPart::Result(ToolResult {
        call_id: id.into(),
        name: name.into(),
        is_error,
    }))
}

/// One message of a context: its kind, its sender, its text and what it carries.
pub type Entry<'a> = (MessageKind, Option<u32>, &'a str, Option<ToolPart>);

/// `request` with `context` (agent 2's) and `tools` in place of its own.
pub fn with_context(
    mut request: ModelRequest,
    context: Vec<Entry<'_>>,
    tools: Vec<Tool>,
) -> ModelRequest {
    let conversation = ConversationId::new();
    let context = context
        .into_iter()
        .enumerate()
        .map(|(seq, (kind, from, text, tool))| Message {
            images: Vec::new(),
            id: MessageId::new(),
            conversation_id: conversation,
            turn_id: None,
            seq: seq as i64,
            agent: AgentId::new(2),
            kind,
            linked: None,
            from: from.and_then(AgentId::new),
            to: AgentId::new(2),
            text: text.into(),
            tool,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: chrono::DateTime::UNIX_EPOCH,
        })
        .collect();
    request.context = Arc::new(context);
    request.tools = Arc::new(tools);
    request
}

/// A context where the agent called two tools at once (one with arguments that are not JSON),
/// got both results, then called one more that failed, and was written to again.
pub fn answered_calls() -> Vec<Entry<'static>> {
    vec![
        (MessageKind::System, None, "You are dev.", None),
        (MessageKind::Delivery, Some(1), "read a.txt", None),
        (
            MessageKind::Reply,
            Some(2),
            "",
            calls(&[
                call("call_1", "files/read_text_file", r#"{"path": "a.txt"}"#),
                call("call_2", "a.b", r#"{"path": "b.txt"#),
            ]),
        ),
        (
            MessageKind::ToolResult,
            None,
            "contents of a",
            result("call_1", "files/read_text_file", false),
        ),
        (
            MessageKind::ToolResult,
            None,
            "The arguments are not JSON.",
            result("call_2", "a.b", true),
        ),
        (
            MessageKind::Reply,
            Some(2),
            "One more.",
            calls(&[call("call_3", "files.v2/read", r#"{"path":"c"}"#)]),
        ),
        (
            MessageKind::ToolResult,
            None,
            "no such file",
            result("call_3", "files.v2/read", true),
        ),
        (MessageKind::Delivery, Some(1), "and?", None),
    ]
}

/// A context where a call was never answered: two calls, one result, then a message.
pub fn unanswered_call() -> Vec<Entry<'static>> {
    vec![
        (MessageKind::System, None, "You are dev.", None),
        (MessageKind::Delivery, Some(1), "read both", None),
        (
            MessageKind::Reply,
            Some(2),
            "",
            calls(&[
                call("call_1", "files/read_text_file", r#"{"path":"a"}"#),
                call("call_2", "a/b", r#"{"path":"b"}"#),
            ]),
        ),
        (
            MessageKind::ToolResult,
            None,
            "contents of b",
            result("call_2", "a/b", false),
        ),
        (MessageKind::Delivery, Some(1), "well?", None),
    ]
}
