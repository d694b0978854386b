//! A request's input items read as chat messages: instructions as the system message,
//! `function_call` items as an assistant message's calls, `function_call_output` items as tool
//! messages; and its tools in Chat Completions' shape, so that one reader checks both APIs.

use agency_runtime::api::ApiResponse;
use serde_json::{Map, Value, json};

use super::super::types::{ChatMessage, Content};
use super::new_id;
use crate::openai::OpenAiError;

/// The messages of a request: its instructions as the system message, the calls of the
/// previous response when the items begin with their results, then the items.
pub(super) fn messages(
    instructions: Option<&str>,
    previous: Option<&ApiResponse>,
    items: &[Value],
) -> Result<Vec<ChatMessage>, OpenAiError> {
    let mut messages = Vec::new();
    if let Some(instructions) = instructions.filter(|i| !i.trim().is_empty()) {
        messages.push(message("system", Content::Text(instructions.to_string())));
    }
    if let Some(previous) = previous {
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
    messages.extend(chat_messages(items)?);
    Ok(messages)
}

/// The Responses API's tools (`{"type": "function", "name", "parameters", …}`) in Chat
/// Completions' shape, so one reader checks both. Hosted tools stay as they are, to be refused
/// by name.
pub(super) fn flat_tools(tools: Option<&Value>) -> Result<Option<Value>, OpenAiError> {
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
pub(super) fn flat_choice(choice: Option<&Value>) -> Option<Value> {
    match choice {
        Some(v) if v.get("type").and_then(Value::as_str) == Some("function") => {
            let name = v.get("name").cloned().unwrap_or(Value::Null);
            Some(json!({"type": "function", "function": {"name": name}}))
        }
        other => other.cloned(),
    }
}

/// `input`: a string (one user message) or a list of items.
pub(super) fn input_items(input: Option<&Value>) -> Result<Vec<Value>, OpenAiError> {
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
            // Approval requests echoed back are the server's own; responses are read apart.
            "reasoning" | "mcp_approval_request" | "mcp_approval_response" => {}
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

/// The `mcp_approval_response` items: each answers an approval request
/// (`approval_request_id`, `mcpr_…`) of the previous response: `approve`, and a `reason`.
pub(super) fn approvals(
    items: &[Value],
) -> Result<Vec<agency_runtime::api::ApprovalAnswer>, OpenAiError> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if kind(item) != "mcp_approval_response" {
            continue;
        }
        let param = format!("input[{i}]");
        let id = item
            .get("approval_request_id")
            .and_then(Value::as_str)
            .and_then(|id| id.strip_prefix("mcpr_"))
            .and_then(|hex| uuid::Uuid::try_parse(hex).ok())
            .ok_or_else(|| {
                OpenAiError::invalid(
                    format!("Invalid '{param}.approval_request_id': an `mcp_approval_request` item's id (`mcpr_…`) is expected."),
                    Some(&format!("{param}.approval_request_id")),
                )
            })?;
        let approve = item
            .get("approve")
            .and_then(Value::as_bool)
            .ok_or_else(|| {
                OpenAiError::invalid(
                    format!("Missing required parameter: '{param}.approve'."),
                    Some(&format!("{param}.approve")),
                )
            })?;
        let reason = item
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        out.push((agency_core::ApprovalId(id), approve, reason));
    }
    let others = items.iter().position(|i| {
        !["mcp_approval_response", "mcp_approval_request", "reasoning"].contains(&kind(i))
    });
    if let (false, Some(i)) = (out.is_empty(), others) {
        return Err(OpenAiError::invalid(
            format!(
                "Invalid 'input[{i}]': `mcp_approval_response` items resume the turn that asked, and are sent alone (a new message follows in the next request)."
            ),
            Some(&format!("input[{i}]")),
        ));
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
pub(super) fn with_id(item: &Value) -> Value {
    let mut item = item.clone();
    if let Value::Object(o) = &mut item {
        if !o.contains_key("type") {
            o.insert("type".into(), json!("message"));
        }
        if !o.contains_key("id") {
            let prefix = match o.get("type").and_then(Value::as_str) {
                Some("function_call") => "fc",
                Some("function_call_output") => "fco",
                Some("mcp_approval_response") => "mcpa",
                _ => "msg",
            };
            o.insert("id".into(), json!(new_id(prefix)));
        }
    }
    item
}
