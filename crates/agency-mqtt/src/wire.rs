//! The JSON payloads of spec 002, exactly as it writes them. Converted to and from the domain
//! explicitly; nothing here is a domain type.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// The MQTT 5 user property an API key travels in (`Bearer agk_…`), named in any case.
pub const AUTHORIZATION: &str = "authorization";

/// The key in an `authorization` value or a login password: `agk_…` or `Bearer agk_…`.
pub fn bearer_token(value: &str) -> &str {
    let value = value.trim();
    match value.get(..6) {
        Some(scheme)
            if scheme.eq_ignore_ascii_case("bearer")
                && value[6..].chars().next().is_none_or(char::is_whitespace) =>
        {
            value[6..].trim()
        }
        _ => value,
    }
}

/// `CMD/chat_new` and `DATA/chat`: `{"agent_id", "conversation_id", "content"}`.
#[derive(Debug, Deserialize)]
pub struct ChatIn {
    pub agent_id: Option<String>,
    pub conversation_id: Option<String>,
    pub content: Option<String>,
}

/// `DATA/observation`: `{"content", "agent_id"}` (`agent_id` names the agent on the team-wide
/// topic).
#[derive(Debug, Deserialize)]
pub struct ObservationIn {
    pub agent_id: Option<String>,
    pub content: Option<String>,
}

/// `CMD/chat_cancel`: the same fields as a chat message, all optional (an empty payload too).
#[derive(Debug, Default, Deserialize)]
pub struct CancelIn {
    pub agent_id: Option<String>,
    pub conversation_id: Option<String>,
}

/// `CMD/chat_approval` (ours; spec 002 has no approvals): a person's answer to a tool call
/// that waits, named by the `approval_id` of its `awaiting_approval` progress update.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalIn {
    pub agent_id: Option<String>,
    pub conversation_id: Option<String>,
    pub approval_id: String,
    pub approve: bool,
    /// Why (a denial's; the agent reads it).
    pub reason: Option<String>,
    /// The arguments the call runs with instead, where the agent's policy allows edits.
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `EVT/chat_progress`: `initialized` / `exists` after `chat_new`, then what a turn does.
#[derive(Debug, Serialize)]
pub struct Progress {
    pub conversation_id: String,
    pub agent_id: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_operation: Option<String>,
    /// While an agent executes a tool: how far the tool is, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_percentage: Option<u8>,
    /// While an agent executes a tool: the tool's progress count (e.g. messages received).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_sequence: Option<u64>,
    /// A tool call that waits for a person (`awaiting_approval`), or was answered (`approved`,
    /// `denied`): what `CMD/chat_approval` names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

/// `EVT/chat_response`: metadata only; the content is read over HTTP by the conversation's id.
/// The timestamp is Unix seconds, as the spec writes it.
#[derive(Debug, Serialize)]
pub struct ChatResponse {
    pub agent_id: String,
    pub conversation_id: String,
    pub timestamp: i64,
}

/// `EVT/error`: never a stack trace, never a secret.
#[derive(Debug, Serialize)]
pub struct Error {
    pub agent_id: String,
    pub exception_type: String,
    pub message: String,
    pub timestamp: String,
}

/// `EVT/observation_result`.
#[derive(Debug, Serialize)]
pub struct ObservationResult {
    pub agent_id: String,
    pub importance: f64,
    pub observation_id: String,
    pub timestamp: String,
}

/// `EVT/reflection_result`.
#[derive(Debug, Serialize)]
pub struct ReflectionResult {
    pub agent_id: String,
    pub importance: f64,
    pub reflection_id: String,
    pub timestamp: String,
}

/// `EVT/plan_new` (`status: "Active"`) and `EVT/plan_update` (`status: "Updated"`).
#[derive(Debug, Serialize)]
pub struct PlanEvent {
    pub active: bool,
    pub agent_id: String,
    pub plan_id: String,
    pub status: String,
    pub timestamp: String,
}

/// `CMD/plan_task`: the plan's actions as PDDL; `status` is `new` or `adjusted`.
#[derive(Debug, Serialize)]
pub struct PlanTaskCmd {
    pub active: bool,
    pub pddl_actions: String,
    pub plan_id: String,
    pub source_agent_id: String,
    pub status: String,
    pub timestamp: String,
}

/// `CMD/plan_action`: the plan's tasks (cancelled ones too, so that an adjustment is seen);
/// `status` is `new` or `adjusted`.
#[derive(Debug, Serialize)]
pub struct PlanActionCmd {
    pub plan_id: String,
    pub source_agent_id: String,
    pub status: String,
    pub tasks: Vec<PlanTask>,
    pub timestamp: String,
}

/// A task as `CMD/plan_action` and `GET /api/agents/{agentId}/plan` show it; its actions as
/// PDDL ground actions.
#[derive(Debug, Serialize)]
pub struct PlanTask {
    pub id: String,
    pub description: String,
    pub status: String,
    pub actions: Vec<String>,
}

impl From<&agency_core::plan::Task> for PlanTask {
    fn from(t: &agency_core::plan::Task) -> Self {
        Self {
            id: t.id.to_string(),
            description: t.description.clone(),
            status: t.status.as_str().to_string(),
            actions: t
                .actions
                .iter()
                .map(agency_core::plan::Action::pddl)
                .collect(),
        }
    }
}

/// The spec's ISO 8601 time with fractional seconds and `Z`.
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_read_with_or_without_bearer() {
        for value in ["agk_1", " Bearer agk_1 ", "bearer agk_1", "BEARER  agk_1"] {
            assert_eq!(bearer_token(value), "agk_1", "{value:?}");
        }
        assert_eq!(bearer_token("Bearer "), "");
        assert_eq!(bearer_token("Bearerish"), "Bearerish");
    }

    #[test]
    fn chat_response_is_metadata_only() {
        let r = ChatResponse {
            agent_id: "A1".into(),
            conversation_id: "c".into(),
            timestamp: 1731020972,
        };
        assert_eq!(
            serde_json::to_value(&r).ok(),
            Some(
                serde_json::json!({"agent_id": "A1", "conversation_id": "c", "timestamp": 1731020972})
            )
        );
    }

    #[test]
    fn progress_leaves_out_what_it_does_not_have() {
        let p = Progress {
            conversation_id: "c".into(),
            agent_id: "A1".into(),
            status: "initialized".into(),
            message: None,
            timestamp: "2024-04-08T10:30:00Z".into(),
            current_operation: None,
            progress_percentage: None,
            message_sequence: None,
            approval_id: None,
        };
        assert_eq!(
            serde_json::to_value(&p).ok(),
            Some(
                serde_json::json!({"conversation_id": "c", "agent_id": "A1", "status": "initialized", "timestamp": "2024-04-08T10:30:00Z"})
            )
        );
        // While a tool runs, as spec 002's tool execution update.
        let tool = Progress {
            status: "processing_tool".into(),
            current_operation: Some("tool_execution".into()),
            progress_percentage: Some(100),
            message_sequence: Some(12),
            ..p
        };
        let v = serde_json::to_value(&tool).unwrap_or_default();
        assert_eq!(v["progress_percentage"], 100);
        assert_eq!(v["message_sequence"], 12);
        assert_eq!(v["current_operation"], "tool_execution");
    }

    #[test]
    fn a_spec_payload_reads() {
        let c: Result<ChatIn, _> = serde_json::from_str(
            r#"{"agent_id": "A1", "conversation_id": "550e8400-e29b-41d4-a716-446655440000", "content": " "}"#,
        );
        assert!(c.is_ok_and(|c| c.content.as_deref() == Some(" ")));
    }
}
