//! Agencies as the schema kept them before their body (SQLite's migration 0025, PostgreSQL's
//! 0027): columns of `agencies` and rows of an `agents` table. Read once, by the migration that
//! writes each agency's body ([`bodies`]); nothing else reads this shape. It can go once no
//! database older than that is upgraded.

use agency_core::{Agency, AgencyId, Agent, Block, Limits, ModelRef, Party, Protocol, Recipient};
use serde::Deserialize;
use uuid::Uuid;

use super::{agent_id, corrupt, u32_of};
use crate::StoreError;

/// Every agency, read in the transaction that writes their bodies (read again after an
/// interrupted upgrade, each gives the same body).
pub(crate) const OLD_AGENCIES: &str = "SELECT id, owner, name, handle, protocol, manager, \
     max_hops, deadline_ms, providers, mcp_servers, budget_usd, budget_period, \
     max_turn_cost_usd FROM agencies";
/// Their agents, in order.
pub(crate) const OLD_AGENTS: &str = "SELECT agency_id, id, name, handle, role, model, sampling, \
     blocks FROM agents ORDER BY agency_id, position";
pub(crate) const SET_BODY: &str = "UPDATE agencies SET body = $1 WHERE id = $2";

#[derive(sqlx::FromRow)]
pub(crate) struct OldAgency {
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
pub(crate) struct OldAgent {
    pub agency_id: Uuid,
    pub id: i64,
    pub name: String,
    pub handle: Option<String>,
    pub role: Option<String>,
    pub model: String,
    pub sampling: String,
    pub blocks: String,
}

/// Each agency's id and body: its draft's JSON, the shape the store keeps now. An agency
/// these rows cannot describe fails the migration, naming it, and nothing is changed: the old
/// columns are dropped only once every agency has its body.
pub(crate) fn bodies(
    agencies: Vec<OldAgency>,
    agents: Vec<OldAgent>,
) -> Result<Vec<(Uuid, String)>, StoreError> {
    let mut by_agency: std::collections::HashMap<Uuid, Vec<OldAgent>> =
        std::collections::HashMap::new();
    for a in agents {
        by_agency.entry(a.agency_id).or_default().push(a);
    }
    agencies
        .into_iter()
        .map(|row| {
            let (id, name) = (row.id, row.name.clone());
            let agents = by_agency.remove(&id).unwrap_or_default();
            let failed = |why: String| {
                StoreError::Migrate(format!(
                    "agency `{name}` ({id}) cannot be kept as its draft: {why}"
                ))
            };
            let owner = row.owner.clone();
            let agency = agency_of(row, agents).map_err(|e| failed(e.to_string()))?;
            let body = super::agencies::body_of(&agency).map_err(|e| failed(e.to_string()))?;
            // The columns go for good: the body must read back as this very agency.
            let back = super::agencies::agency_of(super::agencies::AgencyRow {
                id,
                owner,
                name: name.clone(),
                body: body.clone(),
            })
            .map_err(|e| failed(e.to_string()))?;
            if back != agency {
                return Err(failed(difference(&agency, &back)));
            }
            Ok((id, body))
        })
        .collect()
}

/// Where two agencies first differ, as a person would look for it.
fn difference(saved: &Agency, back: &Agency) -> String {
    let saved: Vec<char> = format!("{saved:?}").chars().collect();
    let back: Vec<char> = format!("{back:?}").chars().collect();
    let at = saved.iter().zip(&back).take_while(|(a, b)| a == b).count();
    let around = |s: &[char]| -> String {
        s[at.saturating_sub(80).min(s.len())..(at + 40).min(s.len())]
            .iter()
            .collect()
    };
    format!(
        "saved as …{}…, it would read back as …{}…",
        around(&saved),
        around(&back)
    )
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OldBlock {
    Text {
        text: String,
    },
    Rule {
        when: i64,
        action: String,
        send_to: Vec<i64>,
        #[serde(default)]
        call: Option<OldCall>,
    },
}

#[derive(Deserialize)]
struct OldCall {
    tool: String,
    with: serde_json::Value,
}

#[derive(Deserialize)]
struct OldMcpServer {
    name: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    headers_env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    max_concurrency: Option<u32>,
}

fn mcp_servers_of(json: &str) -> Result<Vec<(String, agency_core::McpServer)>, StoreError> {
    use agency_core::{McpServer, McpTransport};
    let stored: Vec<OldMcpServer> = serde_json::from_str(json).map_err(corrupt)?;
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

#[derive(Deserialize)]
struct OldProvider {
    name: String,
    kind: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    #[serde(default)]
    max_concurrency: Option<u32>,
    #[serde(default)]
    requests_per_minute: Option<u32>,
    /// `[model, input, output]`, micro-dollars per million tokens.
    #[serde(default)]
    prices: Vec<(String, u64, u64)>,
}

fn providers_of(json: &str) -> Result<Vec<agency_core::ProviderSpec>, StoreError> {
    let stored: Vec<OldProvider> = serde_json::from_str(json).map_err(corrupt)?;
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

/// The `sampling` column: sampling, and the agent's memory settings, tools and approval
/// policy, which rode along.
#[derive(Deserialize, Default)]
struct OldSettings {
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u32>,
    #[serde(default)]
    reflection_threshold: Option<f64>,
    #[serde(default)]
    reflection_half_life_hours: Option<f64>,
    #[serde(default)]
    observe_chats: bool,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    approve: Vec<String>,
    #[serde(default)]
    approve_timeout_secs: Option<u64>,
    #[serde(default)]
    approve_on_timeout: Option<String>,
    #[serde(default)]
    approve_edits: bool,
}

/// The agent its row describes.
fn agent_of(a: OldAgent) -> Result<Agent, StoreError> {
    let s: OldSettings = serde_json::from_str(&a.sampling).map_err(corrupt)?;
    Ok(Agent {
        id: agent_id(a.id)?,
        model: ModelRef::parse(&a.model).ok_or_else(|| corrupt(&a.model))?,
        sampling: agency_core::Sampling {
            temperature: s.temperature,
            top_p: s.top_p,
            max_tokens: s.max_tokens,
        },
        memory: agency_core::memory::MemorySettings {
            reflection_threshold: s.reflection_threshold,
            half_life_hours: s.reflection_half_life_hours,
            observe_chats: s.observe_chats,
        },
        tools: agency_core::ToolGrants(s.tools),
        approve: agency_core::ApprovalPolicy {
            tools: agency_core::ToolGrants(s.approve),
            timeout_secs: s.approve_timeout_secs,
            on_timeout: s
                .approve_on_timeout
                .as_deref()
                .and_then(agency_core::OnTimeout::parse)
                .unwrap_or_default(),
            edits: s.approve_edits,
        },
        blocks: blocks_of(&a.blocks)?,
        name: a.name,
        handle: a.handle,
        role: a.role,
    })
}

/// `when`: -1 is anyone, 0 the user, else an agent. `send_to`: 0 the user, else an agent.
const ANY: i64 = -1;

fn blocks_of(json: &str) -> Result<Vec<Block>, StoreError> {
    let stored: Vec<OldBlock> = serde_json::from_str(json).map_err(corrupt)?;
    stored
        .into_iter()
        .map(|b| {
            Ok(match b {
                OldBlock::Text { text } => Block::Text(text),
                OldBlock::Rule {
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

fn agency_of(row: OldAgency, agents: Vec<OldAgent>) -> Result<Agency, StoreError> {
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
            .map(agent_of)
            .collect::<Result<_, StoreError>>()?,
        version: None,
    })
}

#[cfg(test)]
mod tests;
