//! The client's function tools on the wire: `tools` and `tool_choice` as Chat Completions
//! takes them, the calls in an assistant message of the history, and the calls a paused turn
//! answers with.
//!
//! An agency runs no tool of the client's: the manager may call them (beside its own), the
//! turn pauses, and the client's next request brings the results (see `agency_runtime::turn`).

use agency_core::tool::{ToolChoice, ToolUse};
use agency_core::{Tool, ToolCall};
use serde_json::{Map, Value, json};

use super::OpenAiError;

/// Most tools a request may declare (OpenAI's limit).
pub const MAX_TOOLS: usize = 128;

/// The client's tools and how the manager may use them: `None` for `tool_choice: "none"`
/// (they are not offered).
pub struct ClientTools {
    pub tools: Vec<Tool>,
    pub tool_use: ToolUse,
}

/// `tools`, `tool_choice` and `parallel_tool_calls` of a request.
pub fn client_tools(
    tools: Option<&Value>,
    choice: Option<&Value>,
    parallel: Option<&Value>,
) -> Result<ClientTools, OpenAiError> {
    let tools = tool_list(tools)?;
    let parallel = match parallel {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(OpenAiError::invalid(
                "Invalid 'parallel_tool_calls': expected a boolean.",
                Some("parallel_tool_calls"),
            ));
        }
    };
    let Some(choice) = tool_choice(choice, &tools)? else {
        // `none`: the manager is not told of the client's tools.
        return Ok(ClientTools {
            tools: Vec::new(),
            tool_use: ToolUse::default(),
        });
    };
    Ok(ClientTools {
        tools,
        tool_use: ToolUse { choice, parallel },
    })
}

/// The request's `tools`: each a function, none named twice.
fn tool_list(tools: Option<&Value>) -> Result<Vec<Tool>, OpenAiError> {
    Ok(match tools {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            if items.len() > MAX_TOOLS {
                return Err(OpenAiError::invalid(
                    format!(
                        "Invalid 'tools': array too long. Expected an array with maximum length {MAX_TOOLS}, but got an array with length {} instead.",
                        items.len()
                    ),
                    Some("tools"),
                ));
            }
            let mut out: Vec<Tool> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let tool = function_tool(item, &format!("tools[{i}]"))?;
                if out.iter().any(|t| t.name == tool.name) {
                    return Err(OpenAiError::invalid(
                        format!(
                            "Invalid 'tools[{i}].function.name': `{}` names two tools.",
                            tool.name
                        ),
                        Some(&format!("tools[{i}].function.name")),
                    ));
                }
                out.push(tool);
            }
            out
        }
        Some(_) => {
            return Err(OpenAiError::invalid(
                "Invalid 'tools': expected an array of tools.",
                Some("tools"),
            ));
        }
    })
}

/// The request's `tool_choice` among `tools`; `None` for `none`.
fn tool_choice(choice: Option<&Value>, tools: &[Tool]) -> Result<Option<ToolChoice>, OpenAiError> {
    Ok(Some(match choice {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(_) if tools.is_empty() => {
            return Err(OpenAiError::invalid(
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                Some("tool_choice"),
            ));
        }
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => return Ok(None),
            other => {
                return Err(OpenAiError::invalid(
                    format!(
                        "Invalid value for 'tool_choice': `{other}`. Supported values are: 'none', 'auto', 'required', or a named function."
                    ),
                    Some("tool_choice"),
                ));
            }
        },
        Some(v) => {
            let name = v
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| v.get("name"))
                .and_then(Value::as_str)
                .filter(|_| v.get("type").and_then(Value::as_str) == Some("function"))
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        "Invalid value for 'tool_choice': expected 'none', 'auto', 'required', or {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                        Some("tool_choice"),
                    )
                })?;
            if !tools.iter().any(|t| t.name == name) {
                return Err(OpenAiError::invalid(
                    format!(
                        "Invalid value for 'tool_choice': function `{name}` is not one of the request's tools."
                    ),
                    Some("tool_choice"),
                ));
            }
            ToolChoice::Named(name.to_string())
        }
    }))
}

/// One tool of `tools`: `{"type": "function", "function": {"name", "description",
/// "parameters", "strict"}}`. Other kinds (OpenAI's hosted tools, custom tools) are refused
/// by name: an agency cannot run them for the client.
fn function_tool(item: &Value, param: &str) -> Result<Tool, OpenAiError> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "function" {
        return Err(OpenAiError::invalid(
            format!(
                "Invalid '{param}.type': `{kind}` tools are not supported by an agency; declare function tools (`\"type\": \"function\"`), which your app runs."
            ),
            Some(&format!("{param}.type")),
        ));
    }
    let function = item
        .get("function")
        .filter(|f| f.is_object())
        .ok_or_else(|| {
            OpenAiError::invalid(
                format!("Missing required parameter: '{param}.function'."),
                Some(&format!("{param}.function")),
            )
        })?;
    let name = function.get("name").and_then(Value::as_str).unwrap_or("");
    if !agency_providers::tools::is_wire_name(name) {
        return Err(OpenAiError::invalid(
            format!(
                "Invalid '{param}.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{{1,64}}$'."
            ),
            Some(&format!("{param}.function.name")),
        ));
    }
    let description = function
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let input_schema = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err(OpenAiError::invalid(
                format!(
                    "Invalid '{param}.function.parameters': expected an object (a JSON Schema)."
                ),
                Some(&format!("{param}.function.parameters")),
            ));
        }
    };
    Ok(Tool {
        name: name.to_string(),
        description,
        input_schema,
    })
}

/// The calls of an assistant message of the history (`tool_calls`), checked as OpenAI checks
/// them.
pub fn history_calls(value: &Value, param: &str) -> Result<Vec<ToolCall>, OpenAiError> {
    let invalid = |what: String| OpenAiError::invalid(what, Some(param));
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(invalid(format!("Invalid '{param}': expected an array."))),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let field = |path: &[&str]| {
                path.iter()
                    .try_fold(call, |v, k| v.get(*k))
                    .and_then(Value::as_str)
            };
            let id = field(&["id"]).filter(|id| !id.is_empty()).ok_or_else(|| {
                invalid(format!("Missing required parameter: '{param}[{i}].id'."))
            })?;
            let name = field(&["function", "name"]).ok_or_else(|| {
                invalid(format!(
                    "Missing required parameter: '{param}[{i}].function.name'."
                ))
            })?;
            Ok(ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: field(&["function", "arguments"]).unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// Calls as an assistant message's `tool_calls`; with `index`, as a stream's deltas carry
/// them (each call whole in one delta).
pub fn wire_calls(calls: &[ToolCall], indexed: bool) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut call = Map::new();
            if indexed {
                call.insert("index".into(), json!(i));
            }
            call.insert("id".into(), json!(c.id));
            call.insert("type".into(), json!("function"));
            call.insert(
                "function".into(),
                json!({"name": c.name, "arguments": c.arguments}),
            );
            Value::Object(call)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}})
    }

    #[test]
    fn tools_and_choices_are_read() {
        let t = client_tools(Some(&json!([weather()])), None, None).unwrap();
        assert_eq!(t.tools[0].name, "get_weather");
        assert_eq!(t.tool_use, ToolUse::default());
        let none = client_tools(Some(&json!([weather()])), Some(&json!("none")), None).unwrap();
        assert!(none.tools.is_empty(), "`none` offers nothing");
        let named = client_tools(
            Some(&json!([weather()])),
            Some(&json!({"type": "function", "function": {"name": "get_weather"}})),
            Some(&json!(false)),
        )
        .unwrap();
        assert_eq!(
            named.tool_use,
            ToolUse {
                choice: ToolChoice::Named("get_weather".into()),
                parallel: Some(false)
            }
        );
        assert!(
            client_tools(Some(&json!([])), None, None)
                .unwrap()
                .tools
                .is_empty()
        );
    }

    #[test]
    fn bad_tools_are_refused_by_parameter() {
        let param = |tools: Value, choice: Option<Value>| {
            client_tools(Some(&tools), choice.as_ref(), None)
                .err()
                .and_then(|e| e.param)
        };
        assert_eq!(
            param(json!([{"type": "web_search"}]), None).as_deref(),
            Some("tools[0].type")
        );
        assert_eq!(
            param(
                json!([{"type": "function", "function": {"name": "a b"}}]),
                None
            )
            .as_deref(),
            Some("tools[0].function.name")
        );
        assert_eq!(
            param(json!([weather(), weather()]), None).as_deref(),
            Some("tools[1].function.name")
        );
        assert_eq!(
            param(
                json!([weather()]),
                Some(json!({"type": "function", "function": {"name": "x"}}))
            )
            .as_deref(),
            Some("tool_choice")
        );
        assert_eq!(
            param(json!([]), Some(json!("required"))).as_deref(),
            Some("tool_choice")
        );
    }
}
