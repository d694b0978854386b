//! A person's approval before a tool acts (issue 36). An agent's policy names the tools whose
//! every call waits for a yes; such a call is stored as an [`Approval`], answered once (the
//! first answer wins), and an approved call is run at most once: it is marked started before
//! it goes out and its result kept after, so a call found started without a result is never
//! run again ([`OUTCOME_UNKNOWN`]).

use chrono::{DateTime, Utc};

use crate::ids::{AgencyId, AgentId, ApprovalId, ConversationId, MessageId, TurnId};
use crate::tool::{ToolCall, ToolGrants};

/// How long a call waits for an answer when neither the agent nor the operator says.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// What an agent gets for a call that was started but whose result was never kept (the
/// server stopped while it ran): it is not run again.
pub const OUTCOME_UNKNOWN: &str = "Outcome unknown: the call was approved and started, but the server stopped before its result was kept. It was not run again.";

/// Which of an agent's calls wait for a person, and how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// The tools (`server/tool`, `server/*`) whose calls wait.
    pub tools: ToolGrants,
    /// How long a call waits, in seconds (`None`: the operator's default).
    pub timeout_secs: Option<u64>,
    /// What a call nobody answered in time gets.
    pub on_timeout: OnTimeout,
    /// Whoever approves may change the arguments.
    pub edits: bool,
}

impl ApprovalPolicy {
    /// Whether a call of `qualified` waits for a person.
    pub fn needs(&self, qualified: &str) -> bool {
        !self.tools.is_empty() && self.tools.allows(qualified)
    }
}

/// What a call nobody answered in time gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnTimeout {
    #[default]
    Deny,
    Approve,
}

impl OnTimeout {
    pub fn as_str(self) -> &'static str {
        match self {
            OnTimeout::Deny => "deny",
            OnTimeout::Approve => "approve",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "deny" => Some(OnTimeout::Deny),
            "approve" => Some(OnTimeout::Approve),
            _ => None,
        }
    }
}

/// Where an approval stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(ApprovalState::Pending),
            "approved" => Some(ApprovalState::Approved),
            "denied" => Some(ApprovalState::Denied),
            _ => None,
        }
    }
}

/// A tool call that waits for (or was given) a person's answer, and what came of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Approval {
    pub id: ApprovalId,
    pub agency: AgencyId,
    pub conversation: ConversationId,
    pub turn: TurnId,
    /// The agent that made the call, and its reply holding it.
    pub agent: AgentId,
    pub reply: MessageId,
    /// The call as the model made it (its arguments, as approved when they were edited).
    pub call: ToolCall,
    pub asked_at: DateTime<Utc>,
    /// When an unanswered call gets `on_timeout`.
    pub expires_at: DateTime<Utc>,
    pub on_timeout: OnTimeout,
    /// Whoever approves may change the arguments.
    pub edits: bool,
    pub state: ApprovalState,
    /// Who answered (an account's email, an API key's name, `timeout`), when, and why.
    pub answered_by: Option<String>,
    pub answered_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    /// When an approved call went out, and its result once it came back (text, is_error).
    pub started_at: Option<DateTime<Utc>>,
    pub result: Option<(String, bool)>,
}

/// Where an agency's approvals are announced: an endpoint of its owner's, called with each call
/// that starts waiting. Its signing secret is derived from the master key and `id` (stored
/// nowhere); setting the URL again gives a new `id`, and with it a new secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalWebhook {
    pub agency: AgencyId,
    pub id: uuid::Uuid,
    pub url: String,
    pub created_at: DateTime<Utc>,
}

/// A person's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub approve: bool,
    pub reason: Option<String>,
    /// New arguments (JSON text), where the policy allows edits.
    pub arguments: Option<String>,
    pub by: String,
}

impl Answer {
    /// The state an approval takes with this answer.
    pub fn state(&self) -> ApprovalState {
        if self.approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        }
    }
}

impl Approval {
    /// What the agent reads for a denied call.
    pub fn denial(&self) -> String {
        let by = match self.answered_by.as_deref() {
            Some("timeout") => "nobody approved it in time",
            Some("turn ended") => "the turn ended before anyone answered",
            _ => "a person denied it",
        };
        match self
            .reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
        {
            Some(why) => format!("Not run: {by}. Their reason: {why}"),
            None => format!("Not run: {by}."),
        }
    }
}
