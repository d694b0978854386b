//! `response_format` as Chat Completions takes it (and the Responses API's `text.format`):
//! text, a JSON object, or JSON of a schema (see `agency_runtime::format`).

use agency_runtime::format::ResponseFormat;
use serde_json::Value;

use super::OpenAiError;

/// The format a request asks for (`None`: text). `param` names the field in errors; `flat`
/// is the Responses API's shape (`name` and `schema` beside `type`, not under `json_schema`).
pub fn response_format(
    value: Option<&Value>,
    param: &str,
    flat: bool,
) -> Result<Option<ResponseFormat>, OpenAiError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(ResponseFormat::JsonObject)),
        "json_schema" => {
            let (spec, at) = if flat {
                (Some(value), param.to_string())
            } else {
                (value.get("json_schema"), format!("{param}.json_schema"))
            };
            let spec = spec.filter(|s| s.is_object()).ok_or_else(|| {
                OpenAiError::invalid(format!("Missing required parameter: '{at}'."), Some(&at))
            })?;
            let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
            if !agency_providers::tools::is_wire_name(name) {
                let at = format!("{at}.name");
                return Err(OpenAiError::invalid(
                    format!(
                        "Invalid '{at}': a name of 1 to 64 letters, digits, '_' or '-' is required."
                    ),
                    Some(&at),
                ));
            }
            let schema = match spec.get("schema") {
                None | Some(Value::Null) => Value::Object(Default::default()),
                Some(s @ (Value::Object(_) | Value::Bool(_))) => s.clone(),
                Some(_) => {
                    let at = format!("{at}.schema");
                    return Err(OpenAiError::invalid(
                        format!("Invalid '{at}': expected a JSON Schema (an object)."),
                        Some(&at),
                    ));
                }
            };
            let strict = spec.get("strict").and_then(Value::as_bool).unwrap_or(false);
            ResponseFormat::json_schema(name, schema, strict)
                .map(Some)
                .map_err(|why| {
                    let at = format!("{at}.schema");
                    OpenAiError::invalid(format!("Invalid schema in '{at}': {why}"), Some(&at))
                })
        }
        other => {
            let at = format!("{param}.type");
            Err(OpenAiError::invalid(
                format!(
                    "Invalid value for '{at}': `{other}`. Supported values are: 'text', 'json_object' and 'json_schema'."
                ),
                Some(&at),
            ))
        }
    }
}
