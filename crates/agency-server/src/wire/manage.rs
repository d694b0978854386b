//! The JSON of the management API: accounts, agencies as drafts, versions, keys
//! (`manage.rs`).

use agency_core::AgencyDraft;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::text;

/// Email and password, to sign up or log in.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    #[schema(schema_with = text::email)]
    pub email: String,
    /// Sign-up: 8 to 1024 characters.
    #[schema(schema_with = text::password)]
    pub password: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    pub current_password: String,
    #[schema(schema_with = text::password)]
    pub new_password: String,
}

/// The logged-in user, and the CSRF token every request that changes something must send in
/// the `x-csrf-token` header.
#[derive(Serialize, ToSchema)]
pub struct Me {
    pub id: String,
    pub email: String,
    pub created_at: DateTime<Utc>,
    pub csrf_token: String,
}

/// An agency of the user's: its draft, and the version its API serves.
#[derive(Serialize, ToSchema)]
pub struct AgencyDetail {
    pub id: String,
    /// The version `/api/agency/{id}/chat/completions` serves; `null`: not published, not
    /// reachable through its API.
    pub published_version: Option<u32>,
    /// Its team id on MQTT: its topics are `XMAGS/{mqtt_team}/…` (an account's agency: its
    /// id; the operator's: its handle, else its name).
    pub mqtt_team: String,
    pub draft: AgencyDraft,
}

impl From<&agency_runtime::agencies::AgencyInfo> for AgencyDetail {
    fn from(a: &agency_runtime::agencies::AgencyInfo) -> Self {
        Self {
            id: a.agency.id.to_string(),
            published_version: a.published,
            mqtt_team: agency_runtime::team_id(&a.agency).into_owned(),
            draft: a.agency.to_draft(),
        }
    }
}

/// A published version.
#[derive(Serialize, ToSchema)]
pub struct Version {
    pub version: u32,
    pub published_at: DateTime<Utc>,
}

impl From<&agency_core::Published> for Version {
    fn from(p: &agency_core::Published) -> Self {
        Self {
            version: p.version,
            published_at: p.published_at,
        }
    }
}

/// A published version with the agency as it was.
#[derive(Serialize, ToSchema)]
pub struct VersionDetail {
    pub version: u32,
    pub published_at: DateTime<Utc>,
    pub agency: AgencyDraft,
    /// The version's agency file (YAML), as `GET /api/agencies/{agency}/export` writes the
    /// draft's: the two compare line by line.
    pub file: String,
}

/// What a draft would be: the system prompt each agent would get, and the edges its rules
/// allow (what the editor draws as the team's graph).
#[derive(Serialize, ToSchema)]
pub struct Preview {
    pub prompts: Vec<AgentPrompt>,
    /// The manager's name: the agent the user's message reaches.
    pub manager: String,
    pub edges: Vec<Edge>,
}

/// A way a message may go, as the agents' rules say: from an agent to an agent or `user`
/// (only the manager's reach the user; another agent's are delivered to the manager).
#[derive(Serialize, ToSchema)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// A rule sends to several at once along it.
    pub fan_out: bool,
    /// The tool (`server/tool`) its rule calls before sending.
    pub tool: Option<String>,
}

impl Preview {
    pub fn from(p: &agency_runtime::agencies::Preview) -> Self {
        let name = |id| {
            p.agency
                .agent(id)
                .map_or_else(|| id.to_string(), |a| a.name.clone())
        };
        Preview {
            prompts: p
                .prompts
                .iter()
                .map(|(agent, prompt)| AgentPrompt {
                    agent: agent.clone(),
                    prompt: prompt.clone(),
                })
                .collect(),
            manager: name(p.agency.manager),
            edges: p
                .edges
                .iter()
                .map(|e| Edge {
                    from: name(e.from),
                    to: match e.to {
                        agency_core::Recipient::User => "user".into(),
                        agency_core::Recipient::Agent(id) => name(id),
                    },
                    fan_out: e.fan_out,
                    tool: e.tool.clone(),
                })
                .collect(),
        }
    }
}

/// A provider of the server, as the editor offers it for an agent's `model`.
#[derive(Serialize, ToSchema)]
pub struct ProviderStatus {
    pub name: String,
    /// `openai` or `anthropic` (the API it speaks); `null` for the built-in models.
    pub kind: Option<&'static str>,
    /// Models to suggest: those its spec prices, or a few well-known ones.
    pub models: Vec<String>,
    /// `not_needed`, `present` (the server has its key) or `missing` (its models fail on their
    /// first call).
    pub key_state: &'static str,
    /// Whether the account stored a key of this name (used where its agency declares the
    /// provider under `providers:`).
    pub your_key: bool,
}

impl From<(String, agency_providers::ProviderInfo, bool)> for ProviderStatus {
    fn from((name, info, your_key): (String, agency_providers::ProviderInfo, bool)) -> Self {
        Self {
            name,
            kind: info.kind.map(agency_core::ProviderKind::as_str),
            models: info.models,
            key_state: match info.key {
                agency_providers::KeyState::NotNeeded => "not_needed",
                agency_providers::KeyState::Present => "present",
                agency_providers::KeyState::Missing => "missing",
            },
            your_key,
        }
    }
}

/// An example agency of the gallery: `file` is its agency file, for `POST /api/agencies/import`.
#[derive(Serialize, ToSchema)]
pub struct Example {
    pub name: String,
    pub title: String,
    pub summary: String,
    pub manager: String,
    /// Its agents' names, in order.
    pub agents: Vec<String>,
    /// The agency file (YAML).
    pub file: String,
}

#[derive(Serialize, ToSchema)]
pub struct AgentPrompt {
    pub agent: String,
    pub prompt: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// The key's name among the agency's keys, e.g. `prod`.
    #[schema(schema_with = text::key_name)]
    pub name: String,
    /// How long it lasts, e.g. `1s`, `15m`, `2h`, `30d`, `1w`; none: until revoked.
    #[serde(default)]
    #[schema(schema_with = text::expires_in)]
    pub expires_in: Option<String>,
    /// At least 1; none: the default.
    #[serde(default, deserialize_with = "agency_core::draft::whole::option")]
    #[schema(minimum = 1)]
    pub rate_limit_per_minute: Option<u32>,
    /// Dollars the key may spend per `budget_period`, all its end users together; none: no
    /// budget.
    #[serde(default, with = "agency_core::draft::amount_option")]
    #[schema(value_type = Option<f64>)]
    pub budget_usd: Option<String>,
    /// `day`, `week`, `month` (the default; renewed at midnight UTC) or `total` (never).
    #[serde(default)]
    #[schema(value_type = Option<agency_core::spend::Period>)]
    pub budget_period: Option<String>,
    /// Dollars each end user of the key (a request's `user` or `safety_identifier`) may spend
    /// per `budget_period`.
    #[serde(default, with = "agency_core::draft::amount_option")]
    #[schema(value_type = Option<f64>)]
    pub user_budget_usd: Option<String>,
}

/// A change to a key's budgets: a field left out stays as it is; `null` removes that budget.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyChange {
    #[serde(default, deserialize_with = "changed_amount")]
    #[schema(value_type = Option<f64>)]
    pub budget_usd: Option<Option<String>>,
    #[serde(default)]
    #[schema(value_type = Option<agency_core::spend::Period>)]
    pub budget_period: Option<String>,
    #[serde(default, deserialize_with = "changed_amount")]
    #[schema(value_type = Option<f64>)]
    pub user_budget_usd: Option<Option<String>>,
}

/// A field present: its amount, or `null`.
fn changed_amount<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    agency_core::draft::amount_option::deserialize(d).map(Some)
}

/// What a key, an end user or an agency spent in one period, where a budget is set.
#[derive(Serialize, ToSchema)]
pub struct Spent {
    /// The period's start (1970-01-01 for a total budget).
    pub period_start: DateTime<Utc>,
    /// Dollars the calls that ended cost.
    pub spent_usd: f64,
    /// Dollars held by calls still running.
    pub reserved_usd: f64,
    pub tokens: u64,
}

impl From<&agency_runtime::spend::Spent> for Spent {
    fn from(s: &agency_runtime::spend::Spent) -> Self {
        Self {
            period_start: s.period_start,
            spent_usd: dollars(s.spent),
            reserved_usd: dollars(s.reserved),
            tokens: s.tokens,
        }
    }
}

/// Pico-dollars as dollars (for reading; sums are kept exact in the store).
pub fn dollars(c: agency_core::Cost) -> f64 {
    c.0 as f64 / 1e12
}

/// An end user's spend of a key.
#[derive(Serialize, ToSchema)]
pub struct UserSpent {
    pub user: String,
    #[serde(flatten)]
    pub spent: Spent,
}

/// What a key and its end users spent, newest period first.
#[derive(Serialize, ToSchema)]
pub struct KeySpend {
    pub periods: Vec<Spent>,
    pub users: Vec<UserSpent>,
}

/// An API key as listed: never the key itself, nor its hash.
#[derive(Serialize, ToSchema)]
pub struct ApiKey {
    pub name: String,
    /// The key's first characters, to recognise it by.
    pub prefix: String,
    pub rate_limit_per_minute: u32,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// `active`, `expired` or `revoked`.
    pub state: &'static str,
    /// Dollars the key may spend per `budget_period`.
    pub budget_usd: Option<f64>,
    #[schema(value_type = agency_core::spend::Period)]
    pub budget_period: &'static str,
    /// Dollars each end user of the key may spend per `budget_period`.
    pub user_budget_usd: Option<f64>,
    /// Dollars the key spent in the current period (where it has a budget).
    pub spent_usd: Option<f64>,
}

impl From<&agency_core::ApiKey> for ApiKey {
    fn from(k: &agency_core::ApiKey) -> Self {
        Self {
            name: k.name.clone(),
            prefix: k.prefix.clone(),
            rate_limit_per_minute: k.rate_limit_per_minute,
            created_at: k.created_at,
            expires_at: k.expires_at,
            last_used_at: k.last_used_at,
            revoked_at: k.revoked_at,
            state: match k.state(Utc::now()) {
                agency_core::KeyState::Active => "active",
                agency_core::KeyState::Expired => "expired",
                agency_core::KeyState::Revoked => "revoked",
            },
            budget_usd: k.budgets.usd.map(|m| m as f64 / 1e6),
            budget_period: k.budgets.period.as_str(),
            user_budget_usd: k.budgets.user_usd.map(|m| m as f64 / 1e6),
            spent_usd: None,
        }
    }
}

/// A key just made: `key` is shown this once and never again.
#[derive(Serialize, ToSchema)]
pub struct CreatedKey {
    pub key: String,
    #[serde(flatten)]
    pub info: ApiKey,
}

/// A provider key the user stored: only its last characters.
#[derive(Serialize, ToSchema)]
pub struct ProviderKey {
    pub provider: String,
    /// `…` and the key's last characters.
    pub masked: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutProviderKey {
    #[schema(schema_with = text::provider_key)]
    pub key: String,
}

/// Credentials the user stored for an HTTP MCP server its agencies declare: only the headers'
/// names.
#[derive(Serialize, ToSchema)]
pub struct McpCredentials {
    pub server: String,
    /// The headers' names, in lower case.
    pub headers: Vec<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutMcpCredentials {
    /// Header → value, e.g. `{"Authorization": "Bearer …"}`: 1 to 8 headers, sent on every
    /// request to the server.
    #[schema(schema_with = text::mcp_headers)]
    pub headers: std::collections::BTreeMap<String, String>,
}

/// Which of an agency's versions a new conversation runs on.
#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    /// `draft` (the playground's default) or `published`.
    #[serde(default)]
    #[schema(schema_with = text::on)]
    pub on: Option<String>,
}
