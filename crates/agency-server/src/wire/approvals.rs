//! Approvals (issue 36): a tool call waiting for a person, and the answers to it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A tool call that waits for (or was given) a person's approval.
#[derive(Serialize, ToSchema)]
pub struct Approval {
    pub id: String,
    pub agency_id: String,
    pub conversation_id: String,
    pub turn_id: String,
    /// The agency's name (in `/api/approvals`' answers; `null` elsewhere).
    pub agency_name: Option<String>,
    /// The agent that made the call, by its number.
    pub agent: u32,
    /// ... and by its name (in `/api/approvals`' answers, from the agency's draft, and in a
    /// turn's; `null` elsewhere, and for an agent the agency no longer has).
    pub agent_name: Option<String>,
    /// `server/tool`.
    pub tool: String,
    /// The call's arguments as JSON text (as approved, when they were changed).
    pub arguments: String,
    /// `pending`, `approved` or `denied`.
    #[schema(pattern = "^(pending|approved|denied)$")]
    pub state: &'static str,
    pub asked_at: String,
    /// When an unanswered call gets what `on_timeout` says (`deny` or `approve`).
    pub expires_at: String,
    pub on_timeout: &'static str,
    /// Whether an approval may change the arguments.
    pub edits: bool,
    /// Who answered (an account's email, `API key NAME`, `MQTT`, `timeout` or `turn ended`), when,
    /// and why.
    pub answered_by: Option<String>,
    pub answered_at: Option<String>,
    pub reason: Option<String>,
    /// When an approved call went out (it goes out once); `null` while it has not.
    pub started_at: Option<String>,
    /// Whether its result was an error; `null` until its result is kept.
    pub failed: Option<bool>,
}

impl From<&agency_core::Approval> for Approval {
    fn from(a: &agency_core::Approval) -> Self {
        Self {
            id: a.id.to_string(),
            agency_id: a.agency.to_string(),
            conversation_id: a.conversation.to_string(),
            turn_id: a.turn.to_string(),
            agency_name: None,
            agent: a.agent.get(),
            agent_name: None,
            tool: a.call.name.clone(),
            arguments: a.call.arguments.clone(),
            state: a.state.as_str(),
            asked_at: a.asked_at.to_rfc3339(),
            expires_at: a.expires_at.to_rfc3339(),
            on_timeout: a.on_timeout.as_str(),
            edits: a.edits,
            answered_by: a.answered_by.clone(),
            answered_at: a.answered_at.map(|t| t.to_rfc3339()),
            reason: a.reason.clone(),
            started_at: a.started_at.map(|t| t.to_rfc3339()),
            failed: a.result.as_ref().map(|(_, is_error)| *is_error),
        }
    }
}

/// An approval, with new arguments where the agent's policy allows them (`approve_edits`).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    /// The arguments the call runs with instead (a JSON object).
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A denial, with why (the agent reads it).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Deny {
    #[schema(max_length = 2000)]
    pub reason: Option<String>,
}

/// Where the agency's approvals are announced: each call that starts waiting is POSTed there,
/// signed (Standard Webhooks), and answered through `/api/approvals` (a session, or the
/// agency's API key).
#[derive(Serialize, ToSchema)]
pub struct ApprovalWebhook {
    pub url: String,
    pub created_at: String,
}

impl From<&agency_core::ApprovalWebhook> for ApprovalWebhook {
    fn from(h: &agency_core::ApprovalWebhook) -> Self {
        Self {
            url: h.url.clone(),
            created_at: h.created_at.to_rfc3339(),
        }
    }
}

/// An approval webhook just set: with its signing secret, shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedApprovalWebhook {
    #[serde(flatten)]
    pub webhook: ApprovalWebhook,
    /// The signing secret (`whsec_…`): never shown again.
    pub secret: String,
}

/// An approval webhook's URL (`http` or `https`; a public address unless the operator allows
/// others).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetApprovalWebhook {
    #[schema(max_length = 2048, pattern = "^\\s*[Hh][Tt][Tt][Pp][Ss]?://")]
    pub url: String,
}
