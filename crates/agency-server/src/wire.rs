//! The JSON this API speaks, converted from the domain explicitly.

use agency_core::{AgencyDraft, Roster, Usage as CoreUsage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Schemas of the strings the server checks, saying what it takes (`schema_with`): a client
/// that keeps to the document is not refused. Where a rule cannot be said exactly, the schema
/// says less than the server takes, never more (a participant's name: ASCII letters only).
mod text {
    use utoipa::openapi::schema::{KnownFormat, Object, ObjectBuilder, SchemaFormat, Type};

    /// Some character that is not white space, as Rust's `trim` sees it (with U+0085, which
    /// `\s` does not mean the same in every regex dialect, so the class is spelled out).
    const NOT_BLANK: &str =
        r"[^\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";
    /// Not blank, and no control character (`char::is_control`) anywhere.
    const NAME: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00-\x1f\x7f-\x9f]*$";
    /// A room participant's name: a letter, then letters, digits, `_`, `-` or `.`.
    const HANDLE: &str = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$";

    fn string(nullable: bool) -> ObjectBuilder {
        if nullable {
            ObjectBuilder::new().schema_type(
                [Type::String, Type::Null]
                    .into_iter()
                    .collect::<utoipa::openapi::schema::SchemaType>(),
            )
        } else {
            ObjectBuilder::new().schema_type(Type::String)
        }
    }

    fn not_blank(max: usize, description: &str) -> Object {
        string(false)
            .pattern(Some(NOT_BLANK))
            .max_length(Some(max))
            .description(Some(description))
            .build()
    }

    fn name(max: usize, description: &str) -> Object {
        string(false)
            .pattern(Some(NAME))
            .max_length(Some(max))
            .description(Some(description))
            .build()
    }

    fn one_of(nullable: bool, values: &[&str], description: &str) -> Object {
        let mut values: Vec<serde_json::Value> = values.iter().map(|v| (*v).into()).collect();
        if nullable {
            values.push(serde_json::Value::Null);
        }
        string(nullable)
            .enum_values(Some(values))
            .description(Some(description))
            .build()
    }

    pub fn email() -> Object {
        string(false)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Email)))
            .max_length(Some(254))
            .build()
    }

    pub fn password() -> Object {
        string(false)
            .min_length(Some(agency_core::account::PASSWORD_MIN))
            .max_length(Some(agency_core::account::PASSWORD_MAX))
            .description(Some("Sign-up and new passwords: 8 to 1024 characters."))
            .build()
    }

    pub fn key_name() -> Object {
        name(
            64,
            "The key's name among the agency's keys, e.g. `prod`: 1 to 64 characters.",
        )
    }

    pub fn expires_in() -> Object {
        string(true)
            .pattern(Some(r"^0*[1-9][0-9]{0,3}[smhdw]$"))
            .description(Some(
                "How long it lasts: a number and a unit (`s`, `m`, `h`, `d`, `w`), e.g. `15m`, \
                 `2h`, `30d`, `1w`; none: until revoked.",
            ))
            .build()
    }

    pub fn turn_text() -> Object {
        string(false)
            .pattern(Some(NOT_BLANK))
            .description(Some("The user's message to the manager: not blank."))
            .build()
    }

    /// Header names are HTTP tokens, values visible ASCII (and spaces, tabs): what a header
    /// can carry. (That the MCP client's own headers are refused, JSON Schema cannot say.)
    pub fn mcp_headers() -> Object {
        let value = string(false)
            .pattern(Some(r"^[\t\x20-\x7E]+$"))
            .max_length(Some(agency_runtime::tools::MAX_VALUE_BYTES))
            .description(Some("The header's value."))
            .build();
        let name = string(false)
            .pattern(Some(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"))
            .max_length(Some(agency_runtime::tools::MAX_NAME_BYTES))
            .build();
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property_names(Some(name))
            .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::RefOr(
                utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(value)),
            )))
            .min_properties(Some(1))
            .max_properties(Some(agency_runtime::tools::MAX_HEADERS))
            .description(Some("Header → value, sent on every request to the server."))
            .build()
    }

    pub fn provider_key() -> Object {
        not_blank(4096, "The provider's API key.")
    }

    pub fn on() -> Object {
        one_of(
            true,
            &["draft", "published"],
            "`draft` (the playground's default) or `published`.",
        )
    }

    pub fn room_name() -> Object {
        not_blank(100, "1 to 100 characters.")
    }

    pub fn room_message() -> Object {
        not_blank(
            agency_core::room::MAX_MESSAGE_CHARS,
            "At most 5,000 characters, not blank. `@name` tags an agent; a command \
             (`/register`, `/bots`, `/unregister`, `/help`) goes to the room's utility bot.",
        )
    }

    pub fn id(nullable: bool, description: &str) -> Object {
        string(nullable)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
            .description(Some(description))
            .build()
    }

    pub fn reply_to() -> Object {
        id(
            true,
            "The id of the message this one replies to: its author is asked to answer.",
        )
    }

    pub fn role_id() -> Object {
        id(
            true,
            "A saved role's id (`/api/definitions`), instead of `role`.",
        )
    }

    pub fn personality_id() -> Object {
        id(true, "A saved personality's id, instead of `personality`.")
    }

    pub fn handle() -> Object {
        string(false)
            .pattern(Some(HANDLE))
            .description(Some(
                "What @mentions and tags name: a letter, then letters, digits, `_`, `-` or `.` \
                 (at most 64).",
            ))
            .build()
    }

    pub fn definition_kind() -> Object {
        one_of(false, &["role", "personality"], "`role` or `personality`.")
    }

    pub fn definition_name() -> Object {
        name(
            64,
            "Unique among your definitions of its kind: 1 to 64 characters.",
        )
    }

    pub fn definition_text() -> Object {
        not_blank(
            agency_core::room::MAX_DEFINITION_CHARS,
            "At most 4,000 characters, not blank.",
        )
    }
}

/// Every error of this API: `{"error": {"message", "status", "fields"?}}`.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    pub message: String,
    /// The HTTP status, again.
    pub status: u16,
    /// Each invalid field by its path (`agents[1].rules[0].send_to`), when the request's fields
    /// were read and some are wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<FieldError>>,
}

#[derive(Serialize, ToSchema)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostMessage {
    #[schema(schema_with = text::turn_text)]
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

impl From<CoreUsage> for Usage {
    fn from(u: CoreUsage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct Turn {
    pub id: String,
    pub number: u32,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub stopped_by: Option<&'static str>,
    pub hops: u32,
    pub usage: Usage,
    /// What its model calls cost, in dollars (`"0.004500"`, exact to the millionth); `null`
    /// when a model it called has no price (set `prices` on its provider).
    pub cost_usd: Option<String>,
    pub error: Option<String>,
}

impl From<&agency_core::TurnRecord> for Turn {
    fn from(t: &agency_core::TurnRecord) -> Self {
        Self {
            id: t.id.to_string(),
            number: t.number,
            started_at: t.started_at,
            finished_at: t.finished_at,
            stopped_by: t.stopped_by.map(|s| s.as_str()),
            hops: t.hops,
            usage: t.usage.into(),
            cost_usd: t
                .cost
                .map(|c| c.to_string().trim_start_matches('$').to_string()),
            error: t.error.clone(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct Conversation {
    pub id: String,
    pub agency_id: String,
    /// `null`: it runs on the agency's draft; else on its published versions, from this one.
    pub version: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub turns: Vec<Turn>,
}

impl Conversation {
    pub fn new(c: &agency_core::Conversation, turns: Vec<Turn>) -> Self {
        Self {
            id: c.id.to_string(),
            agency_id: c.agency_id.to_string(),
            version: c.version,
            created_at: c.created_at,
            turns,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TraceEntry {
    pub from: String,
    pub to: String,
    /// `input`, `delivery`, `tool_call`, `tool_result`, `correction`, `guard`, `failure` or
    /// `answer`. A `tool_call` goes from an agent to a tool (`to`, its text the arguments); a
    /// `tool_result` from the tool back to the agent.
    pub kind: &'static str,
    pub text: String,
    /// Of the model call that wrote it, when one did.
    pub usage: Option<Usage>,
    /// How long that call took (for a `tool_result`: how long the tool took).
    pub latency_ms: Option<u32>,
    /// For a `tool_call` or `tool_result`: the tool (`server/tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call a `tool_result` answers (and a `tool_call`'s own id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// For a `tool_result`: whether the tool failed (its text says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// When its message was written (RFC 3339): the model call that wrote it (or, for a
    /// `tool_result`, the tool) ended just before, so the call ran from `at - latency_ms` to
    /// `at`. The web UI's waterfall draws a turn from these.
    pub at: DateTime<Utc>,
}

impl TraceEntry {
    pub fn new(e: &agency_core::TraceEntry, roster: &Roster) -> Self {
        let result = e.kind == agency_core::MessageKind::ToolResult;
        Self {
            from: e.from_name(roster).to_string(),
            to: e.to_name(roster).to_string(),
            kind: e.kind_name(),
            text: e.text.clone(),
            usage: e.usage.map(Into::into),
            latency_ms: e.latency_ms,
            tool: e.tool.as_ref().map(|t| t.name.clone()),
            call_id: e.tool.as_ref().map(|t| t.call_id.clone()),
            is_error: e.tool.as_ref().filter(|_| result).map(|t| t.is_error),
            at: e.at,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TurnResult {
    pub conversation_id: String,
    pub turn_id: String,
    pub number: u32,
    pub answer: String,
    pub stopped_by: &'static str,
    pub hops: u32,
    pub usage: Usage,
    /// In dollars, as on [`Turn`].
    pub cost_usd: Option<String>,
    /// What each agent's model calls cost, in the order the agents first answered.
    pub agent_costs: Vec<AgentCost>,
    pub trace: Vec<TraceEntry>,
}

/// What one agent's model calls cost in a turn.
#[derive(Serialize, ToSchema)]
pub struct AgentCost {
    pub agent: String,
    /// In dollars, as on [`Turn`]; `null` when its model has no price.
    pub cost_usd: Option<String>,
}

/// A cost as the API writes it: dollars to the millionth, without the sign (`"0.004500"`).
fn dollars(cost: Option<agency_core::Cost>) -> Option<String> {
    cost.map(|c| c.to_string().trim_start_matches('$').to_string())
}

impl From<&agency_runtime::TurnOutcome> for TurnResult {
    fn from(o: &agency_runtime::TurnOutcome) -> Self {
        Self {
            conversation_id: o.conversation_id.to_string(),
            turn_id: o.turn_id.to_string(),
            number: o.number,
            answer: o.answer.clone(),
            stopped_by: o.stopped_by.as_str(),
            hops: o.hops,
            usage: o.usage.into(),
            cost_usd: dollars(o.cost),
            agent_costs: AgentCost::list(&o.agent_costs, &o.roster),
            trace: o
                .trace
                .iter()
                .map(|e| TraceEntry::new(e, &o.roster))
                .collect(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TurnTrace {
    pub turn: Turn,
    pub trace: Vec<TraceEntry>,
    /// What each agent's model calls cost, in the order the agents first answered, at the
    /// agency's prices: as the turn's live answer said.
    pub agent_costs: Vec<AgentCost>,
}

impl AgentCost {
    /// Each agent's cost, named by `roster`.
    pub fn list(
        costs: &[(agency_core::AgentId, Option<agency_core::Cost>)],
        roster: &agency_core::Roster,
    ) -> Vec<Self> {
        costs
            .iter()
            .map(|(agent, cost)| Self {
                agent: roster.display(Some(*agent)).to_string(),
                cost_usd: dollars(*cost),
            })
            .collect()
    }
}

/// A message in some agent's context (or, with `agent: null`, the user's transcript).
#[derive(Serialize, ToSchema)]
pub struct Message {
    pub id: String,
    pub seq: i64,
    pub agent: Option<String>,
    pub role: &'static str,
    pub kind: &'static str,
    pub linked_message_id: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub text: String,
    /// A reply's tool calls (its agent's model asked for them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// What a `tool_result` answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    pub usage: Option<Usage>,
    pub latency_ms: Option<u32>,
    pub included: bool,
    pub created_at: DateTime<Utc>,
}

/// An MCP server an agency may use, and its tools.
#[derive(Serialize, ToSchema)]
pub struct ToolServer {
    /// What its tools' names start with (`name/tool`).
    pub name: String,
    pub tools: Vec<ToolInfo>,
    /// Why its tools could not be listed now, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ToolInfo {
    /// `server/tool`: what an agent's `tools` names.
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    #[schema(value_type = Object)]
    pub input_schema: serde_json::Value,
}

impl From<(String, Result<Vec<agency_core::Tool>, String>)> for ToolServer {
    fn from((name, listed): (String, Result<Vec<agency_core::Tool>, String>)) -> Self {
        let (tools, error) = match listed {
            Ok(tools) => (tools, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        Self {
            name,
            tools: tools
                .into_iter()
                .map(|t| ToolInfo {
                    name: t.name,
                    description: t.description,
                    input_schema: t.input_schema,
                })
                .collect(),
            error,
        }
    }
}

/// A call of a tool, as the model wrote it.
#[derive(Serialize, ToSchema)]
pub struct ToolCall {
    pub id: String,
    /// `server/tool`.
    pub name: String,
    /// JSON text, as the model wrote it (it may not be valid).
    pub arguments: String,
}

/// What a tool result answers.
#[derive(Serialize, ToSchema)]
pub struct ToolResult {
    pub call_id: String,
    /// `server/tool`.
    pub name: String,
    pub is_error: bool,
}

impl Message {
    pub fn new(m: &agency_core::Message, roster: &Roster) -> Self {
        let name = |a: Option<agency_core::AgentId>| a.map(|a| roster.display(Some(a)).to_string());
        Self {
            id: m.id.to_string(),
            seq: m.seq,
            agent: name(m.agent),
            role: m.role().as_str(),
            kind: m.kind.as_str(),
            linked_message_id: m.linked.map(|l| l.to_string()),
            from: name(m.from),
            to: name(m.to),
            text: m.text.clone(),
            tool_calls: m
                .tool
                .iter()
                .flat_map(|t| t.calls())
                .map(|c| ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            tool_result: m
                .tool
                .as_ref()
                .and_then(|t| t.result())
                .map(|r| ToolResult {
                    call_id: r.call_id.clone(),
                    name: r.name.clone(),
                    is_error: r.is_error,
                }),
            usage: m.usage.map(Into::into),
            latency_ms: m.latency_ms,
            included: m.included,
            created_at: m.created_at,
        }
    }
}

// ---- The management API: accounts, agencies as drafts, versions, keys. ----

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
    pub draft: AgencyDraft,
}

impl From<&agency_runtime::agencies::AgencyInfo> for AgencyDetail {
    fn from(a: &agency_runtime::agencies::AgencyInfo) -> Self {
        Self {
            id: a.agency.id.to_string(),
            published_version: a.published,
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

// ---- Roundtable rooms ----

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRoom {
    #[schema(schema_with = text::room_name)]
    pub name: String,
    /// An agency of the user's (id or name): its agents join the room.
    #[serde(default)]
    pub agency: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Room {
    pub id: String,
    pub name: String,
    pub agency_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl From<&agency_core::room::Room> for Room {
    fn from(r: &agency_core::room::Room) -> Self {
        Self {
            id: r.id.to_string(),
            name: r.name.clone(),
            agency_id: r.agency.map(|a| a.to_string()),
            created_at: r.created_at,
        }
    }
}

/// An agent in a room: a model's, or a webhook bot.
#[derive(Serialize, ToSchema)]
pub struct Participant {
    pub id: String,
    /// What @mentions name; a bot's username.
    pub name: String,
    /// `model` or `bot`.
    pub kind: &'static str,
    /// `provider/model`, for a model's agent.
    pub model: Option<String>,
    /// For a bot: where it is called and whom it emulates (its caller key is never shown
    /// again after it was registered).
    pub bot: Option<BotInfo>,
    /// Its role: the text of the saved role `role_id` points to, if it does, else its own.
    pub role: Option<String>,
    pub role_id: Option<String>,
    /// Its personality, likewise.
    pub personality: Option<String>,
    pub personality_id: Option<String>,
    pub instructions: Option<String>,
    /// The tools its model may call while answering (`server/tool`, `server/*`).
    pub tools: Vec<String>,
    pub enabled: bool,
    pub colour: String,
}

#[derive(Serialize, ToSchema)]
pub struct BotInfo {
    pub endpoint: String,
    pub emulates: Option<String>,
}

impl From<&agency_core::room::Participant> for Participant {
    fn from(p: &agency_core::room::Participant) -> Self {
        Self {
            id: p.id.to_string(),
            name: p.name.clone(),
            kind: if p.bot().is_some() { "bot" } else { "model" },
            model: p.model().map(ToString::to_string),
            bot: p.bot().map(|b| BotInfo {
                endpoint: b.endpoint.clone(),
                emulates: b.emulates.clone(),
            }),
            role: p.role.clone(),
            role_id: p.role_id.map(|d| d.to_string()),
            personality: p.personality.clone(),
            personality_id: p.personality_id.map(|d| d.to_string()),
            instructions: p.instructions.clone(),
            tools: p.tools.0.clone(),
            enabled: p.enabled,
            colour: p.colour.clone(),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewParticipant {
    /// What @mentions name: a letter, then letters, digits, `_`, `-` or `.`.
    #[schema(schema_with = text::handle)]
    pub name: String,
    /// `provider/model`.
    pub model: String,
    /// Its own role; or `role_id`, a saved one it points to.
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    #[schema(schema_with = text::role_id)]
    pub role_id: Option<String>,
    /// Its own personality; or `personality_id`, a saved one.
    #[serde(default)]
    pub personality: Option<String>,
    #[serde(default)]
    #[schema(schema_with = text::personality_id)]
    pub personality_id: Option<String>,
    #[serde(default)]
    pub instructions: Option<String>,
    /// The tools its model may call while answering: `server/tool`, or `server/*` for every
    /// tool of a server (`GET /api/agencies/{id}/tools` lists them for a room's agency; a room
    /// without one has the built-in and the server's own).
    #[serde(default)]
    pub tools: Vec<String>,
}

/// A reusable role or personality that room agents point to.
#[derive(Serialize, ToSchema)]
pub struct Definition {
    pub id: String,
    /// `role` or `personality`.
    pub kind: &'static str,
    pub name: String,
    pub text: String,
    pub created_at: DateTime<Utc>,
}

impl From<&agency_core::room::Definition> for Definition {
    fn from(d: &agency_core::room::Definition) -> Self {
        Self {
            id: d.id.to_string(),
            kind: d.kind.as_str(),
            name: d.name.clone(),
            text: d.text.clone(),
            created_at: d.created_at,
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDefinition {
    /// `role` or `personality`.
    #[schema(schema_with = text::definition_kind)]
    pub kind: String,
    /// Unique among your definitions of its kind.
    #[schema(schema_with = text::definition_name)]
    pub name: String,
    /// At most 4,000 characters.
    #[schema(schema_with = text::definition_text)]
    pub text: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionEdit {
    #[schema(schema_with = text::definition_name)]
    pub name: String,
    #[schema(schema_with = text::definition_text)]
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct RoomMessage {
    pub id: String,
    pub seq: i64,
    /// `person`, `agent` (an answer), `error` (an agent's failure, never in a context) or
    /// `utility` (the room's utility bot answering a command).
    pub kind: &'static str,
    /// The agent's id and name, for answers and failures.
    pub agent_id: Option<String>,
    pub agent: Option<String>,
    pub text: String,
    /// A person's command for the room's utility bot (`/register`, ...), as the server reads
    /// one: the utility bot answers it, and it is never in a context.
    pub command: bool,
    pub included: bool,
    /// The id of the message this one replies to.
    pub reply_to: Option<String>,
    /// The ids of the participants it tags.
    pub tagged: Vec<String>,
    pub created_at: DateTime<Utc>,
}

impl From<&agency_core::room::RoomMessage> for RoomMessage {
    fn from(m: &agency_core::room::RoomMessage) -> Self {
        use agency_core::room::Author;
        let (kind, agent_id, agent) = match &m.author {
            Author::Person => ("person", None, None),
            Author::Agent { id, name } => ("agent", Some(id.to_string()), Some(name.clone())),
            Author::Error { id, name } => ("error", Some(id.to_string()), Some(name.clone())),
            Author::Utility => (
                "utility",
                None,
                Some(agency_core::room::UTILITY.to_string()),
            ),
        };
        Self {
            id: m.id.to_string(),
            seq: m.seq,
            kind,
            agent_id,
            agent,
            text: m.text.clone(),
            command: matches!(m.author, Author::Person)
                && agency_core::room::command(&m.text).is_some(),
            included: m.included,
            reply_to: m.reply_to.map(|r| r.to_string()),
            tagged: m.tagged.iter().map(ToString::to_string).collect(),
            created_at: m.created_at,
        }
    }
}

/// A person's message to a room.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostRoomMessage {
    /// At most 5,000 characters. `@name` tags an agent; a command (`/register`, `/bots`,
    /// `/unregister`, `/help`) goes to the room's utility bot.
    #[schema(schema_with = text::room_message)]
    pub text: String,
    /// The id of the message this one replies to: its author is asked to answer.
    #[serde(default)]
    #[schema(schema_with = text::reply_to)]
    pub reply_to: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct RoomDetail {
    pub room: Room,
    /// In display order.
    pub participants: Vec<Participant>,
    /// In order.
    pub messages: Vec<RoomMessage>,
}

/// A person's message as stored, who is answering it, and (with `?wait=true`) their answers.
#[derive(Serialize, ToSchema)]
pub struct Posted {
    pub message: RoomMessage,
    pub answering: Vec<String>,
    pub answers: Option<Vec<RoomMessage>>,
    /// When the message was `/register`: the new bot's caller key, shown this once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller_key: Option<String>,
}

/// A webhook bot to register in a room.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBot {
    /// What tags name: a letter, then letters, digits, `_`, `-` or `.`.
    #[schema(schema_with = text::handle)]
    pub username: String,
    /// Its `http(s)` URL, called with `POST` and the header `X-CALLER-KEY`.
    pub endpoint: String,
    /// The name of the person it emulates.
    #[serde(default)]
    pub emulates: Option<String>,
}

/// A registered bot and its caller key, shown this once.
#[derive(Serialize, ToSchema)]
pub struct RegisteredBot {
    pub bot: Participant,
    /// Sent to the bot in `X-CALLER-KEY` with every call, so it can tell the calls are ours.
    pub caller_key: String,
}

#[derive(Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Wait {
    /// Answer only once every agent has answered (or failed).
    #[serde(default)]
    pub wait: bool,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetIncluded {
    pub included: bool,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetEnabled {
    pub enabled: bool,
}
