//! Structured outputs: an API client asks for the answer as JSON (`json_object`), or as JSON
//! of a schema (`json_schema`). The manager is told so with the request's message, and its
//! answer is checked where the turn would end ([`agency_core::engine::AnswerCheck`]): one that
//! does not parse or match goes back to it with why, at most twice, then the turn fails.
//!
//! Schemas come from clients, so they are compiled without reaching anything: references to
//! other documents (`http:`, files) are errors, and patterns run on the `regex` crate (linear
//! time; no backtracking a crafted pattern could make exponential).

use std::sync::Arc;

use agency_core::engine::AnswerCheck;
use serde_json::Value;

/// Errors listed at most when an answer does not match its schema.
const MAX_ERRORS: usize = 5;

/// What the answer must be.
#[derive(Clone)]
pub enum ResponseFormat {
    /// One JSON object.
    JsonObject,
    /// JSON valid against `schema`.
    JsonSchema {
        name: String,
        schema: Arc<Value>,
        /// The client asked for it strictly (OpenAI's rules for the schema hold): the
        /// manager's provider may be asked with it natively.
        strict: bool,
        validator: Arc<jsonschema::Validator>,
    },
}

impl std::fmt::Debug for ResponseFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::JsonObject => f.write_str("JsonObject"),
            Self::JsonSchema { name, .. } => f.debug_tuple("JsonSchema").field(name).finish(),
        }
    }
}

impl PartialEq for ResponseFormat {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::JsonObject, Self::JsonObject) => true,
            (
                Self::JsonSchema { name, schema, .. },
                Self::JsonSchema {
                    name: n, schema: s, ..
                },
            ) => name == n && schema == s,
            _ => false,
        }
    }
}

impl ResponseFormat {
    /// A `json_schema` format, its schema compiled; `Err` says what is wrong with the schema.
    pub fn json_schema(name: &str, schema: Value, strict: bool) -> Result<Self, String> {
        let validator = jsonschema::options()
            .with_pattern_options(jsonschema::PatternOptions::regex())
            .build(&schema)
            .map_err(|e| e.to_string())?;
        Ok(Self::JsonSchema {
            name: name.to_string(),
            schema: Arc::new(schema),
            strict,
            validator: Arc::new(validator),
        })
    }

    /// The schema a provider may be asked with natively: a strict one's.
    pub fn native_schema(&self) -> Option<Arc<Value>> {
        match self {
            Self::JsonSchema {
                schema,
                strict: true,
                ..
            } => Some(schema.clone()),
            _ => None,
        }
    }

    /// What the manager reads after the user's message.
    pub fn instructions(&self) -> String {
        match self {
            Self::JsonObject => "(Answer the user with exactly one JSON object as your message to them: no other text, no code fences.)".to_string(),
            Self::JsonSchema { name, schema, .. } => format!(
                "(Answer the user with exactly one JSON value as your message to them, valid against this JSON Schema (`{name}`): no other text, no code fences.\n{schema})"
            ),
        }
    }
}

impl AnswerCheck for ResponseFormat {
    fn check(&self, answer: &str) -> Result<String, String> {
        let text = unfenced(answer);
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("it is not JSON ({e})"))?;
        match self {
            Self::JsonObject if value.is_object() => Ok(text.to_string()),
            Self::JsonObject => Err("it is JSON but not an object".into()),
            Self::JsonSchema { validator, .. } => {
                let errors: Vec<String> = validator
                    .iter_errors(&value)
                    .take(MAX_ERRORS)
                    .map(|e| {
                        let at = e.instance_path().to_string();
                        if at.is_empty() {
                            e.to_string()
                        } else {
                            format!("at {at}: {e}")
                        }
                    })
                    .collect();
                if errors.is_empty() {
                    Ok(text.to_string())
                } else {
                    Err(format!(
                        "it does not match the schema ({})",
                        errors.join("; ")
                    ))
                }
            }
        }
    }
}

/// `text` without surrounding blanks and a Markdown code fence around it, if any.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // The fence's first line may name the language (```json).
    match body.split_once('\n') {
        Some((lang, inner)) if !lang.contains(['{', '[']) => inner.trim(),
        _ => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_checked_against_the_schema() {
        let f = ResponseFormat::json_schema(
            "weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}, "t": {"type": "number"}},
                   "required": ["city", "t"], "additionalProperties": false}),
            true,
        )
        .unwrap();
        assert_eq!(
            f.check("```json\n{\"city\": \"Oslo\", \"t\": 21}\n```")
                .unwrap(),
            "{\"city\": \"Oslo\", \"t\": 21}"
        );
        let why = f.check(r#"{"city": 5}"#).unwrap_err();
        assert!(why.contains("at /city") && why.contains("\"t\""), "{why}");
        assert!(
            f.check("Oslo, 21")
                .unwrap_err()
                .starts_with("it is not JSON")
        );
        assert!(ResponseFormat::JsonObject.check("[1]").is_err());
        assert!(ResponseFormat::JsonObject.check(" {} ").is_ok());
    }

    #[test]
    fn schemas_reach_nothing_and_bad_ones_are_refused() {
        assert!(
            ResponseFormat::json_schema("x", json!({"$ref": "http://127.0.0.1:1/s.json"}), false)
                .is_err()
        );
        assert!(
            ResponseFormat::json_schema("x", json!({"$ref": "file:///etc/passwd"}), false).is_err()
        );
        assert!(ResponseFormat::json_schema("x", json!({"type": 5}), false).is_err());
        // A pattern that backtracks exponentially elsewhere runs in linear time here.
        let f = ResponseFormat::json_schema(
            "x",
            json!({"type": "string", "pattern": "^(a+)+$"}),
            false,
        )
        .unwrap();
        let evil = format!("\"{}!\"", "a".repeat(5000));
        assert!(f.check(&evil).is_err());
    }
}
