//! Tools as chat models see them, shared by the providers: the names tools go by on the wire,
//! and a chat whose every tool call is answered.
//!
//! Our tools are named `server/tool`; OpenAI and Anthropic take only names matching
//! `^[a-zA-Z0-9_-]{1,64}$`. [`ToolNames`] maps each name of one request to such a name
//! (`files/read_text_file` → `files__read_text_file`) and back, so a call the model makes is
//! reported under the name the agent was given.
//!
//! Both APIs refuse a chat where a tool call is not followed by its result, or a result does
//! not follow its call. [`paired`] makes any chat one they take.

use std::borrow::Cow;
use std::collections::HashMap;

use agency_core::Role;
use agency_core::tool::{Tool, ToolPart, ToolResult};
use serde_json::{Value, json};

use crate::{ChatMessage, ChatRequest};

/// Longest name a tool may have on the wire.
pub const MAX_WIRE_NAME: usize = 64;

/// What a model is told for a call of its own that the chat holds no result for (as the rules
/// model is).
pub const MISSING_RESULT: &str = agency_core::tool::NO_RESULT;

/// Whether `name` may name a tool on the wire: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_wire_name(name: &str) -> bool {
    (1..=MAX_WIRE_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The names of one request's tools on the wire, both ways.
///
/// Each name becomes a wire name: `/` becomes `__`, every other character a wire name cannot
/// hold becomes `_`, the result is cut to [`MAX_WIRE_NAME`] characters, and a name already
/// taken gets a suffix (`_2`, `_3`, …) in the order the names were given. The mapping is a
/// table, so it goes back exactly; a wire name not in it (a tool the model invented) comes
/// back as it is.
#[derive(Clone, Debug, Default)]
pub struct ToolNames {
    wire: HashMap<String, String>,
    qualified: HashMap<String, String>,
}

impl ToolNames {
    /// A table of `names` (duplicates count once), in their order.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut table = Self::default();
        for name in names {
            table.add(name);
        }
        table
    }

    /// The table of a request: its tools first, then every tool its messages call (a tool no
    /// longer offered still needs a name the API takes).
    pub fn of(request: &ChatRequest) -> Self {
        let tools = request.tools.iter().map(|t| t.name.as_str());
        let called = request
            .messages
            .iter()
            .filter_map(|m| m.tool.as_ref())
            .flat_map(ToolPart::calls)
            .map(|c| c.name.as_str());
        Self::new(tools.chain(called))
    }

    fn add(&mut self, name: &str) {
        if self.wire.contains_key(name) {
            return;
        }
        let base = sanitize(name);
        let mut candidate = cut(&base, MAX_WIRE_NAME).to_string();
        let mut n = 2u32;
        while self.qualified.contains_key(&candidate) {
            let suffix = format!("_{n}");
            candidate = format!("{}{suffix}", cut(&base, MAX_WIRE_NAME - suffix.len()));
            n += 1;
        }
        self.qualified.insert(candidate.clone(), name.to_string());
        self.wire.insert(name.to_string(), candidate);
    }

    /// The wire name of `qualified`. A name not in the table gets the name it would have had
    /// first in one (no suffix).
    pub fn to_wire(&self, qualified: &str) -> String {
        match self.wire.get(qualified) {
            Some(wire) => wire.clone(),
            None => cut(&sanitize(qualified), MAX_WIRE_NAME).to_string(),
        }
    }

    /// The qualified name behind `wire`, or `wire` itself when no tool of the request has it.
    pub fn from_wire(&self, wire: &str) -> String {
        self.qualified
            .get(wire)
            .cloned()
            .unwrap_or_else(|| wire.to_string())
    }
}

/// `name` with only the characters a wire name may hold (never empty).
fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => out.push(c),
            '/' => out.push_str("__"),
            _ => out.push('_'),
        }
    }
    if out.is_empty() {
        out.push_str("tool");
    }
    out
}

/// The first `max` bytes of an ASCII `name`.
fn cut(name: &str, max: usize) -> &str {
    name.get(..max).unwrap_or(name)
}

/// A tool's arguments schema as the APIs take it: its own when it is a JSON object, else an
/// object schema without properties.
pub fn schema(tool: &Tool) -> Value {
    match &tool.input_schema {
        Value::Object(_) => tool.input_schema.clone(),
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// `tools` without a second tool of a name already given (the APIs refuse two).
pub fn distinct(tools: &[Tool]) -> impl Iterator<Item = &Tool> {
    let mut seen = std::collections::HashSet::new();
    tools.iter().filter(move |t| seen.insert(t.name.as_str()))
}

/// `chat` as the APIs take it: every assistant message's tool calls followed at once by their
/// results, and every result right after the calls it answers.
///
/// - A result found later in the chat, after other messages (those that reached an agent
///   while the client ran its tools), moves up to follow its call; results keep their order.
/// - A call with no result anywhere after it gets a tool message answering it with
///   [`MISSING_RESULT`] as an error, after the results found, in the calls' order.
/// - A result that answers no call before it (its call left out of the chat, or answered
///   already), and a tool message without a result, become user messages that say so, so the
///   model still reads them.
///
/// Borrows `chat` when it is fine already, as every chat without tools is.
pub fn paired(chat: &[ChatMessage]) -> Cow<'_, [ChatMessage]> {
    if is_paired(chat) {
        return Cow::Borrowed(chat);
    }
    let mut taken = vec![false; chat.len()];
    let mut out = Vec::with_capacity(chat.len() + 1);
    for (i, m) in chat.iter().enumerate() {
        if taken[i] {
            continue;
        }
        if m.role == Role::Tool {
            out.push(ChatMessage::new(
                Role::User,
                stray_result(m.tool.as_ref().and_then(ToolPart::result), &m.text),
            ));
            continue;
        }
        out.push(m.clone());
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for (id, name) in calls_of(m) {
            let answer = (i + 1..chat.len()).find(|&j| {
                !taken[j]
                    && chat[j].role == Role::Tool
                    && chat[j]
                        .tool
                        .as_ref()
                        .and_then(ToolPart::result)
                        .is_some_and(|r| r.call_id == id)
            });
            match answer {
                Some(j) => {
                    taken[j] = true;
                    found.push(j);
                }
                None => missing.push((id, name)),
            }
        }
        found.sort_unstable();
        out.extend(found.into_iter().map(|j| chat[j].clone()));
        close(&mut missing, &mut out);
    }
    Cow::Owned(out)
}

/// Whether [`paired`] would leave `chat` as it is.
fn is_paired(chat: &[ChatMessage]) -> bool {
    let mut open: Vec<&str> = Vec::new();
    for m in chat {
        if m.role == Role::Tool {
            let Some(r) = m.tool.as_ref().and_then(ToolPart::result) else {
                return false;
            };
            let Some(i) = open.iter().position(|id| *id == r.call_id) else {
                return false;
            };
            open.remove(i);
            continue;
        }
        if !open.is_empty() {
            return false;
        }
        open = calls_of(m).into_iter().map(|(id, _)| id).collect();
    }
    open.is_empty()
}

/// The (id, name) of the calls an assistant message makes.
fn calls_of(m: &ChatMessage) -> Vec<(&str, &str)> {
    match (&m.role, &m.tool) {
        (Role::Assistant, Some(part)) => part
            .calls()
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect(),
        _ => Vec::new(),
    }
}

/// An error result for each call still open.
fn close(open: &mut Vec<(&str, &str)>, out: &mut Vec<ChatMessage>) {
    for (id, name) in open.drain(..) {
        out.push(ChatMessage {
            images: Vec::new(),
            role: Role::Tool,
            text: MISSING_RESULT.to_string(),
            tool: Some(ToolPart::Result(ToolResult {
                call_id: id.to_string(),
                name: name.to_string(),
                is_error: true,
            })),
        });
    }
}

/// What a result that answers no open call says as a user message.
fn stray_result(result: Option<&ToolResult>, text: &str) -> String {
    match result {
        Some(r) => format!(
            "The result of {} (call {}){}:\n{text}",
            r.name,
            r.call_id,
            if r.is_error { ", an error" } else { "" }
        ),
        None => format!("A tool's result:\n{text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agency_core::tool::ToolCall;

    #[test]
    fn names_become_wire_names_and_come_back() {
        let long = format!("server/{}", "x".repeat(80));
        let names = [
            "files/read_text_file",
            "files.v2/read",
            "builtin/now",
            "weird name/é",
            long.as_str(),
            "already_fine",
        ];
        let table = ToolNames::new(names);
        let wire: Vec<String> = names.iter().map(|n| table.to_wire(n)).collect();
        assert_eq!(wire[0], "files__read_text_file");
        assert_eq!(wire[1], "files_v2__read");
        assert_eq!(wire[2], "builtin__now");
        assert_eq!(wire[3], "weird_name___");
        assert_eq!(wire[4].len(), MAX_WIRE_NAME);
        assert!(wire[4].starts_with("server__xxx"));
        assert_eq!(wire[5], "already_fine");
        for (name, wire) in names.iter().zip(&wire) {
            assert!(is_wire_name(wire), "{wire}");
            assert_eq!(table.from_wire(wire), *name);
        }
    }

    #[test]
    fn names_that_collide_get_suffixes_in_order() {
        let long_a = format!("s/{}a", "y".repeat(70));
        let long_b = format!("s/{}b", "y".repeat(70));
        let names = [
            "a/b",
            "a.b",
            "a__b",
            "a_b",
            "a:b",
            long_a.as_str(),
            long_b.as_str(),
        ];
        let table = ToolNames::new(names);
        let wire: Vec<String> = names.iter().map(|n| table.to_wire(n)).collect();
        assert_eq!(wire[..5], ["a__b", "a_b", "a__b_2", "a_b_2", "a_b_3"]);
        assert_eq!(wire[5].len(), MAX_WIRE_NAME);
        assert_eq!(wire[6].len(), MAX_WIRE_NAME);
        assert!(wire[6].ends_with("_2"), "{}", wire[6]);
        for (name, wire) in names.iter().zip(&wire) {
            assert!(is_wire_name(wire), "{wire}");
            assert_eq!(table.from_wire(wire), *name);
        }
        // The same name twice is one tool.
        let twice = ToolNames::new(["a/b", "a/b"]);
        assert_eq!(twice.to_wire("a/b"), "a__b");
        assert_eq!(twice.from_wire("a__b_2"), "a__b_2");
    }

    #[test]
    fn names_not_in_the_table_pass_through() {
        let table = ToolNames::new(["files/read"]);
        assert_eq!(table.from_wire("files__write"), "files__write");
        assert_eq!(table.from_wire("files/read"), "files/read");
        assert_eq!(table.to_wire("other/x.y"), "other__x_y");
        assert_eq!(ToolNames::new([""]).to_wire(""), "tool");
    }

    #[test]
    fn wire_names_are_checked() {
        assert!(is_wire_name("a-b_C9"));
        assert!(!is_wire_name(""));
        assert!(!is_wire_name("a/b"));
        assert!(!is_wire_name("a.b"));
        assert!(!is_wire_name(&"x".repeat(65)));
        assert!(is_wire_name(&"x".repeat(64)));
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: format!("t/{id}"),
            arguments: "{}".into(),
        }
    }

    fn calls(text: &str, ids: &[&str]) -> ChatMessage {
        ChatMessage {
            images: Vec::new(),
            role: Role::Assistant,
            text: text.into(),
            tool: Some(ToolPart::Calls(ids.iter().map(|id| call(id)).collect())),
        }
    }

    fn result(id: &str, text: &str) -> ChatMessage {
        ChatMessage {
            images: Vec::new(),
            role: Role::Tool,
            text: text.into(),
            tool: Some(ToolPart::Result(ToolResult {
                call_id: id.into(),
                name: format!("t/{id}"),
                is_error: false,
            })),
        }
    }

    fn missing(id: &str) -> ChatMessage {
        ChatMessage {
            images: Vec::new(),
            role: Role::Tool,
            text: MISSING_RESULT.into(),
            tool: Some(ToolPart::Result(ToolResult {
                call_id: id.into(),
                name: format!("t/{id}"),
                is_error: true,
            })),
        }
    }

    #[test]
    fn a_paired_chat_is_borrowed() {
        let chat = vec![
            ChatMessage::new(Role::System, "s"),
            ChatMessage::new(Role::User, "u"),
            calls("", &["a", "b"]),
            result("b", "B"),
            result("a", "A"),
            ChatMessage::new(Role::Assistant, "done"),
        ];
        assert!(matches!(paired(&chat), Cow::Borrowed(_)));
        let plain = vec![ChatMessage::new(Role::User, "u")];
        assert!(matches!(paired(&plain), Cow::Borrowed(_)));
    }

    #[test]
    fn calls_without_results_are_answered_with_errors() {
        let chat = vec![
            ChatMessage::new(Role::User, "u"),
            calls("x", &["a", "b", "c"]),
            result("b", "B"),
            ChatMessage::new(Role::User, "next"),
            calls("", &["d"]),
        ];
        assert_eq!(
            paired(&chat).into_owned(),
            vec![
                ChatMessage::new(Role::User, "u"),
                calls("x", &["a", "b", "c"]),
                result("b", "B"),
                missing("a"),
                missing("c"),
                ChatMessage::new(Role::User, "next"),
                calls("", &["d"]),
                missing("d"),
            ]
        );
    }

    #[test]
    fn a_result_after_other_messages_moves_up_to_its_call() {
        let chat = vec![
            ChatMessage::new(Role::User, "u"),
            calls("", &["a", "b"]),
            result("a", "A"),
            ChatMessage::new(Role::User, "while the client ran b"),
            result("b", "B"),
        ];
        assert_eq!(
            paired(&chat).into_owned(),
            vec![
                ChatMessage::new(Role::User, "u"),
                calls("", &["a", "b"]),
                result("a", "A"),
                result("b", "B"),
                ChatMessage::new(Role::User, "while the client ran b"),
            ]
        );
    }

    #[test]
    fn stray_results_become_user_messages() {
        let chat = vec![
            ChatMessage::new(Role::User, "u"),
            result("z", "lost"),
            calls("", &["a"]),
            result("a", "A"),
            result("a", "again"),
            ChatMessage::new(Role::Tool, "bare"),
        ];
        let out = paired(&chat).into_owned();
        assert_eq!(out.len(), 6);
        assert_eq!(out[1].role, Role::User);
        assert_eq!(out[1].text, "The result of t/z (call z):\nlost");
        assert_eq!(out[3], result("a", "A"));
        assert_eq!(out[4].role, Role::User);
        assert!(out[4].text.ends_with("again"));
        assert_eq!(
            out[5],
            ChatMessage::new(Role::User, "A tool's result:\nbare")
        );
        assert!(matches!(paired(&out), Cow::Borrowed(_)));
    }
}
