//! Agencies, their agents and their published versions: the SQL and the rows.

use agency_core::{Agency, AgencyId, Agent, Block, Limits, ModelRef, Party, Protocol, Recipient};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{agent_id, corrupt, u32_of};
use crate::StoreError;

macro_rules! agency_columns {
    () => {
        "id, owner, name, handle, protocol, manager, max_hops, deadline_ms, providers, mcp_servers, \
         budget_usd, budget_period, max_turn_cost_usd"
    };
}
macro_rules! agent_columns {
    () => {
        "agents.agency_id, agents.id, agents.name, agents.handle, agents.role, agents.model, \
         agents.sampling, agents.blocks"
    };
}
pub(crate) const SAVE_AGENCY: &str = concat!(
    "INSERT INTO agencies (",
    agency_columns!(),
    ", created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
     ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, name = excluded.name, \
     handle = excluded.handle, protocol = excluded.protocol, manager = excluded.manager, \
     max_hops = excluded.max_hops, deadline_ms = excluded.deadline_ms, \
     providers = excluded.providers, mcp_servers = excluded.mcp_servers, \
     budget_usd = excluded.budget_usd, budget_period = excluded.budget_period, \
     max_turn_cost_usd = excluded.max_turn_cost_usd, revision = agencies.revision + 1, \
     updated_at = excluded.updated_at"
);
pub(crate) const DELETE_AGENTS: &str = "DELETE FROM agents WHERE agency_id = $1";
pub(crate) const INSERT_AGENT: &str = "INSERT INTO agents (agency_id, id, position, name, handle, role, model, \
     sampling, blocks) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
pub(crate) const AGENCY_BY_ID: &str =
    concat!("SELECT ", agency_columns!(), " FROM agencies WHERE id = $1");
pub(crate) const AGENCY_STATE: &str = "SELECT revision, \
     (SELECT MAX(version) FROM agency_versions WHERE agency_id = $1) FROM agencies WHERE id = $1";
pub(crate) const DELETE_AGENCY: &str = "DELETE FROM agencies WHERE id = $1";
/// Moves the revision; it also locks the agency's row, so that publications take their
/// numbers ([`NEXT_VERSION`], a statement of its own to see the last one committed) in turn.
pub(crate) const BUMP_REVISION: &str = "UPDATE agencies SET revision = revision + 1 WHERE id = $1";
pub(crate) const NEXT_VERSION: &str =
    "SELECT COALESCE(MAX(version), 0) + 1 FROM agency_versions WHERE agency_id = $1";
pub(crate) const INSERT_VERSION: &str =
    "INSERT INTO agency_versions (agency_id, version, body, published_at) VALUES ($1, $2, $3, $4)";
pub(crate) const VERSION: &str =
    "SELECT version, published_at, body FROM agency_versions WHERE agency_id = $1 AND version = $2";
pub(crate) const VERSIONS: &str = "SELECT version, published_at FROM agency_versions \
     WHERE agency_id = $1 ORDER BY version DESC";
pub(crate) const AGENCY_BY_NAME: &str = concat!(
    "SELECT ",
    agency_columns!(),
    " FROM agencies WHERE owner = $1 AND name = $2"
);
pub(crate) const AGENCIES_OF_OWNER: &str = concat!(
    "SELECT ",
    agency_columns!(),
    " FROM agencies WHERE owner = $1 ORDER BY name"
);
/// Each of the owner's agencies' [`AGENCY_STATE`], with its id.
pub(crate) const STATES_OF_OWNER: &str = "SELECT id, revision, \
     (SELECT MAX(version) FROM agency_versions WHERE agency_id = agencies.id) \
     FROM agencies WHERE owner = $1";
pub(crate) const AGENTS_OF_AGENCY: &str = concat!(
    "SELECT ",
    agent_columns!(),
    " FROM agents WHERE agency_id = $1 ORDER BY position"
);
pub(crate) const AGENTS_OF_OWNER: &str = concat!(
    "SELECT ",
    agent_columns!(),
    " FROM agents JOIN agencies ON agencies.id = agents.agency_id \
     WHERE agencies.owner = $1 ORDER BY agents.agency_id, agents.position"
);

#[derive(sqlx::FromRow)]
pub(crate) struct AgencyRow {
    pub id: Uuid,
    pub owner: String,
    pub name: String,
    pub handle: Option<String>,
    pub protocol: String,
    pub manager: i64,
    pub max_hops: i64,
    pub deadline_ms: i64,
    pub providers: String,
    pub mcp_servers: String,
    pub budget_usd: Option<i64>,
    pub budget_period: String,
    pub max_turn_cost_usd: Option<i64>,
}

#[derive(sqlx::FromRow)]
pub(crate) struct AgentRow {
    pub agency_id: Uuid,
    pub id: i64,
    pub name: String,
    pub handle: Option<String>,
    pub role: Option<String>,
    pub model: String,
    pub sampling: String,
    pub blocks: String,
}

/// How blocks are kept in the `blocks` column (JSON). Storage's own shape, not the domain's.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StoredBlock {
    Text {
        text: String,
    },
    Rule {
        when: i64,
        action: String,
        send_to: Vec<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<StoredCall>,
    },
}

#[derive(Serialize, Deserialize)]
struct StoredCall {
    tool: String,
    with: serde_json::Value,
}

/// An agency's MCP server as kept in the `mcp_servers` column (JSON). Only a URL and the names
/// of server variables, never a secret.
#[derive(Serialize, Deserialize)]
struct StoredMcpServer {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    headers_env: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_concurrency: Option<u32>,
}

pub(crate) fn mcp_servers_json(servers: &[(String, agency_core::McpServer)]) -> String {
    use agency_core::McpTransport;
    let stored: Vec<StoredMcpServer> = servers
        .iter()
        .filter_map(|(name, s)| {
            let mut out = StoredMcpServer {
                name: name.clone(),
                url: None,
                command: None,
                args: Vec::new(),
                env: Default::default(),
                headers_env: Default::default(),
                timeout_secs: s.timeout_secs,
                max_concurrency: s.max_concurrency,
            };
            match &s.transport {
                McpTransport::Builtin => return None,
                McpTransport::Stdio { command, args, env } => {
                    out.command = Some(command.clone());
                    out.args = args.clone();
                    out.env = env.clone();
                }
                McpTransport::Http { url, headers_env } => {
                    out.url = Some(url.clone());
                    out.headers_env = headers_env.clone();
                }
            }
            Some(out)
        })
        .collect();
    serde_json::to_string(&stored).unwrap_or_else(|_| "[]".into())
}

fn mcp_servers_of(json: &str) -> Result<Vec<(String, agency_core::McpServer)>, StoreError> {
    use agency_core::{McpServer, McpTransport};
    let stored: Vec<StoredMcpServer> = serde_json::from_str(json).map_err(corrupt)?;
    stored
        .into_iter()
        .map(|s| {
            let transport = match (s.url, s.command) {
                (Some(url), None) => McpTransport::Http {
                    url,
                    headers_env: s.headers_env,
                },
                (None, Some(command)) => McpTransport::Stdio {
                    command,
                    args: s.args,
                    env: s.env,
                },
                _ => return Err(corrupt(&s.name)),
            };
            Ok((
                s.name,
                McpServer {
                    transport,
                    timeout_secs: s.timeout_secs,
                    max_concurrency: s.max_concurrency,
                },
            ))
        })
        .collect()
}

/// A provider as kept in the `providers` column (JSON). Never a key: only its variable's name.
#[derive(Serialize, Deserialize)]
struct StoredProvider {
    name: String,
    kind: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    requests_per_minute: Option<u32>,
    /// `[model, input, output]`, micro-dollars per million tokens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    prices: Vec<(String, u64, u64)>,
}

pub(crate) fn providers_json(providers: &[agency_core::ProviderSpec]) -> String {
    let stored: Vec<StoredProvider> = providers
        .iter()
        .map(|p| StoredProvider {
            name: p.name.clone(),
            kind: p.kind.as_str().to_string(),
            base_url: p.base_url.clone(),
            api_key_env: p.api_key_env.clone(),
            max_concurrency: p.max_concurrency,
            requests_per_minute: p.requests_per_minute,
            prices: p
                .prices
                .iter()
                .map(|(m, price)| (m.clone(), price.input, price.output))
                .collect(),
        })
        .collect();
    serde_json::to_string(&stored).unwrap_or_else(|_| "[]".into())
}

fn providers_of(json: &str) -> Result<Vec<agency_core::ProviderSpec>, StoreError> {
    let stored: Vec<StoredProvider> = serde_json::from_str(json).map_err(corrupt)?;
    stored
        .into_iter()
        .map(|p| {
            Ok(agency_core::ProviderSpec {
                kind: agency_core::ProviderKind::parse(&p.kind).ok_or_else(|| corrupt(&p.kind))?,
                name: p.name,
                base_url: p.base_url,
                api_key_env: p.api_key_env,
                max_concurrency: p.max_concurrency,
                requests_per_minute: p.requests_per_minute,
                prices: p
                    .prices
                    .into_iter()
                    .map(|(m, input, output)| (m, agency_core::Price { input, output }))
                    .collect(),
            })
        })
        .collect()
}

/// Sampling parameters as kept in the `sampling` column (JSON).
#[derive(Serialize, Deserialize, Default)]
struct StoredSampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// The agent's memory settings ride along: they are per agent, optional, and few.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reflection_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reflection_half_life_hours: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    observe_chats: bool,
    /// And so do its tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tools: Vec<String>,
    /// And its approval policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    approve: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approve_timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approve_on_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    approve_edits: bool,
}

/// The agent's model settings (sampling, and its memory settings) as kept in the `sampling`
/// column.
pub(crate) fn settings_json(a: &Agent) -> String {
    let s = &a.sampling;
    let stored = StoredSampling {
        temperature: s.temperature,
        top_p: s.top_p,
        max_tokens: s.max_tokens,
        reflection_threshold: a.memory.reflection_threshold,
        reflection_half_life_hours: a.memory.half_life_hours,
        observe_chats: a.memory.observe_chats,
        tools: a.tools.0.clone(),
        approve: a.approve.tools.0.clone(),
        approve_timeout_secs: a.approve.timeout_secs,
        approve_on_timeout: (a.approve.on_timeout != agency_core::OnTimeout::Deny)
            .then(|| a.approve.on_timeout.as_str().to_string()),
        approve_edits: a.approve.edits,
    };
    serde_json::to_string(&stored).unwrap_or_else(|_| "{}".into())
}

fn settings_of(
    json: &str,
) -> Result<
    (
        agency_core::Sampling,
        agency_core::memory::MemorySettings,
        agency_core::ToolGrants,
        agency_core::ApprovalPolicy,
    ),
    StoreError,
> {
    let s: StoredSampling = serde_json::from_str(json).map_err(corrupt)?;
    Ok((
        agency_core::Sampling {
            temperature: s.temperature,
            top_p: s.top_p,
            max_tokens: s.max_tokens,
        },
        agency_core::memory::MemorySettings {
            reflection_threshold: s.reflection_threshold,
            half_life_hours: s.reflection_half_life_hours,
            observe_chats: s.observe_chats,
        },
        agency_core::ToolGrants(s.tools),
        agency_core::ApprovalPolicy {
            tools: agency_core::ToolGrants(s.approve),
            timeout_secs: s.approve_timeout_secs,
            on_timeout: s
                .approve_on_timeout
                .as_deref()
                .and_then(agency_core::OnTimeout::parse)
                .unwrap_or_default(),
            edits: s.approve_edits,
        },
    ))
}

/// `when`: -1 is anyone, 0 the user, else an agent. `send_to`: 0 the user, else an agent.
const ANY: i64 = -1;

pub(crate) fn blocks_json(blocks: &[Block]) -> String {
    let stored: Vec<StoredBlock> = blocks
        .iter()
        .map(|b| match b {
            Block::Text(text) => StoredBlock::Text { text: text.clone() },
            Block::Rule(r) => StoredBlock::Rule {
                when: match r.when {
                    Party::Any => ANY,
                    Party::User => 0,
                    Party::Agent(id) => i64::from(id.get()),
                },
                action: r.action.clone(),
                send_to: r.send_to.iter().map(|to| i64::from(to.number())).collect(),
                call: r.call.as_ref().map(|c| StoredCall {
                    tool: c.tool.clone(),
                    with: c.with.clone(),
                }),
            },
        })
        .collect();
    serde_json::to_string(&stored).unwrap_or_else(|_| "[]".into())
}

fn blocks_of(json: &str) -> Result<Vec<Block>, StoreError> {
    let stored: Vec<StoredBlock> = serde_json::from_str(json).map_err(corrupt)?;
    stored
        .into_iter()
        .map(|b| {
            Ok(match b {
                StoredBlock::Text { text } => Block::Text(text),
                StoredBlock::Rule {
                    when,
                    action,
                    send_to,
                    call,
                } => Block::Rule(agency_core::Rule {
                    call: call.map(|c| agency_core::RuleCall {
                        tool: c.tool,
                        with: c.with,
                    }),
                    when: match when {
                        ANY => Party::Any,
                        0 => Party::User,
                        n => Party::Agent(agent_id(n)?),
                    },
                    action,
                    send_to: send_to
                        .into_iter()
                        .map(|n| match n {
                            0 => Ok(Recipient::User),
                            n => agent_id(n).map(Recipient::Agent),
                        })
                        .collect::<Result<_, StoreError>>()?,
                }),
            })
        })
        .collect()
}

/// Agencies with their agents (`agents` may hold those of other agencies too).
pub(crate) fn agencies_of(
    rows: Vec<AgencyRow>,
    agents: Vec<AgentRow>,
) -> Result<Vec<Agency>, StoreError> {
    let mut by_agency: std::collections::HashMap<Uuid, Vec<AgentRow>> =
        std::collections::HashMap::new();
    for a in agents {
        by_agency.entry(a.agency_id).or_default().push(a);
    }
    rows.into_iter()
        .map(|row| {
            let agents = by_agency.remove(&row.id).unwrap_or_default();
            agency_of(row, agents)
        })
        .collect()
}

/// The agency's budget and turn cap as their columns (`budget_usd`, `budget_period`,
/// `max_turn_cost_usd`), in micro-dollars.
pub(crate) fn spend_columns(agency: &Agency) -> (Option<i64>, &'static str, Option<i64>) {
    let l = &agency.limits;
    (
        l.budget.map(|b| i64::try_from(b.usd).unwrap_or(i64::MAX)),
        l.budget.map_or("month", |b| b.period.as_str()),
        l.max_turn_cost
            .map(|c| i64::try_from(c.0 / 1_000_000).unwrap_or(i64::MAX)),
    )
}

pub(crate) fn deadline_ms(agency: &Agency) -> i64 {
    i64::try_from(agency.limits.turn_deadline.as_millis()).unwrap_or(i64::MAX)
}

pub(crate) fn name_taken(agency: &Agency) -> StoreError {
    StoreError::Conflict(format!("an agency named `{}` already exists", agency.name))
}

fn agency_of(row: AgencyRow, agents: Vec<AgentRow>) -> Result<Agency, StoreError> {
    Ok(Agency {
        id: AgencyId(row.id),
        owner: row.owner,
        name: row.name,
        handle: row.handle,
        protocol: Protocol::parse(&row.protocol).ok_or_else(|| corrupt(&row.protocol))?,
        manager: agent_id(row.manager)?,
        limits: Limits {
            max_hops: u32_of(row.max_hops, "max_hops")?,
            turn_deadline: std::time::Duration::from_millis(
                u64::try_from(row.deadline_ms).map_err(corrupt)?,
            ),
            budget: match row.budget_usd {
                None => None,
                Some(usd) => Some(agency_core::Budget {
                    usd: u64::try_from(usd).map_err(corrupt)?,
                    period: agency_core::Period::parse(&row.budget_period)
                        .ok_or_else(|| corrupt(&row.budget_period))?,
                }),
            },
            max_turn_cost: row
                .max_turn_cost_usd
                .map(|micro| {
                    u64::try_from(micro).map(|m| agency_core::Cost(m.saturating_mul(1_000_000)))
                })
                .transpose()
                .map_err(corrupt)?,
        },
        providers: providers_of(&row.providers)?,
        mcp_servers: mcp_servers_of(&row.mcp_servers)?,
        agents: agents
            .into_iter()
            .map(|a| {
                let (sampling, memory, tools, approve) = settings_of(&a.sampling)?;
                Ok(Agent {
                    tools,
                    approve,
                    id: agent_id(a.id)?,
                    model: ModelRef::parse(&a.model).ok_or_else(|| corrupt(&a.model))?,
                    sampling,
                    memory,
                    blocks: blocks_of(&a.blocks)?,
                    name: a.name,
                    handle: a.handle,
                    role: a.role,
                })
            })
            .collect::<Result<_, StoreError>>()?,
        version: None,
    })
}

pub(crate) fn agency_state(
    (revision, published): (i64, Option<i64>),
) -> Result<crate::AgencyState, StoreError> {
    Ok(crate::AgencyState {
        revision,
        published: published.map(|v| u32_of(v, "version")).transpose()?,
    })
}

/// Each agency with its state, read by [`STATES_OF_OWNER`] (an agency made in between reads
/// as never published).
pub(crate) fn with_states(
    agencies: Vec<Agency>,
    states: Vec<(uuid::Uuid, i64, Option<i64>)>,
) -> Result<Vec<(Agency, crate::AgencyState)>, StoreError> {
    let mut by_id = std::collections::HashMap::with_capacity(states.len());
    for (id, revision, published) in states {
        by_id.insert(id, agency_state((revision, published))?);
    }
    Ok(agencies
        .into_iter()
        .map(|a| {
            let state = by_id.remove(&a.id.0).unwrap_or(crate::AgencyState {
                revision: 0,
                published: None,
            });
            (a, state)
        })
        .collect())
}

pub(crate) fn published(
    version: i64,
    published_at: DateTime<Utc>,
) -> Result<agency_core::Published, StoreError> {
    Ok(agency_core::Published {
        version: u32_of(version, "version")?,
        published_at,
    })
}
