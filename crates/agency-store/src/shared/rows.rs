//! Rows as the database holds them, and their conversion to and from the domain.

use agency_core::{
    Agency, AgencyId, Agent, AgentId, Block, Conversation, ConversationId, Limits, Message,
    MessageId, MessageKind, ModelRef, Party, Protocol, Recipient, StopReason, TurnId, TurnRecord,
    Usage,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::StoreError;

/// A stored value this code cannot read back.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn agent_id(n: i64) -> Result<AgentId, StoreError> {
    u32::try_from(n)
        .ok()
        .and_then(AgentId::new)
        .ok_or_else(|| corrupt(format!("agent id {n}")))
}

fn opt_agent(n: Option<i64>) -> Result<Option<AgentId>, StoreError> {
    n.map(agent_id).transpose()
}

fn u32_of(n: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|_| corrupt(format!("{what} {n}")))
}

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
    },
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
    };
    serde_json::to_string(&stored).unwrap_or_else(|_| "{}".into())
}

fn settings_of(
    json: &str,
) -> Result<(agency_core::Sampling, agency_core::memory::MemorySettings), StoreError> {
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
                } => Block::Rule(agency_core::Rule {
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
        },
        providers: providers_of(&row.providers)?,
        agents: agents
            .into_iter()
            .map(|a| {
                let (sampling, memory) = settings_of(&a.sampling)?;
                Ok(Agent {
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

pub(crate) fn published(
    version: i64,
    published_at: DateTime<Utc>,
) -> Result<agency_core::Published, StoreError> {
    Ok(agency_core::Published {
        version: u32_of(version, "version")?,
        published_at,
    })
}

pub(crate) fn email_taken(email: &agency_core::Email) -> StoreError {
    StoreError::Conflict(format!(
        "an account with {email} exists already: log in instead"
    ))
}

#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    pub id: String,
    pub email: String,
    pub password_hash: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<UserRow> for agency_core::User {
    type Error = StoreError;
    fn try_from(r: UserRow) -> Result<Self, StoreError> {
        Ok(agency_core::User {
            id: r
                .id
                .parse()
                .map_err(|_| corrupt(format!("user id {}", r.id)))?,
            email: agency_core::Email::parse(&r.email).map_err(corrupt)?,
            password_hash: agency_core::PasswordHash(r.password_hash),
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ConversationRow {
    pub id: Uuid,
    pub agency_id: Uuid,
    pub version: Option<i64>,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<ConversationRow> for Conversation {
    type Error = StoreError;
    fn try_from(r: ConversationRow) -> Result<Self, StoreError> {
        Ok(Conversation {
            id: ConversationId(r.id),
            agency_id: AgencyId(r.agency_id),
            version: r.version.map(|v| u32_of(v, "version")).transpose()?,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct MessageRow {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub turn_id: Option<Uuid>,
    pub seq: i64,
    pub agent_id: Option<i64>,
    pub kind: String,
    pub linked_message_id: Option<Uuid>,
    pub from_agent: Option<i64>,
    pub to_agent: Option<i64>,
    pub text: String,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub latency_ms: Option<i64>,
    pub included: bool,
    pub created_at: DateTime<Utc>,
}

impl From<&Message> for MessageRow {
    fn from(m: &Message) -> Self {
        Self {
            id: m.id.0,
            conversation_id: m.conversation_id.0,
            turn_id: m.turn_id.map(|t| t.0),
            seq: m.seq,
            agent_id: m.agent.map(|a| i64::from(a.get())),
            kind: m.kind.as_str().to_string(),
            linked_message_id: m.linked.map(|l| l.0),
            from_agent: m.from.map(|a| i64::from(a.get())),
            to_agent: m.to.map(|a| i64::from(a.get())),
            text: m.text.clone(),
            prompt_tokens: m.usage.map(|u| i64::from(u.prompt_tokens)),
            completion_tokens: m.usage.map(|u| i64::from(u.completion_tokens)),
            latency_ms: m.latency_ms.map(i64::from),
            included: m.included,
            created_at: m.created_at,
        }
    }
}

impl TryFrom<MessageRow> for Message {
    type Error = StoreError;
    fn try_from(r: MessageRow) -> Result<Self, StoreError> {
        let usage = match (r.prompt_tokens, r.completion_tokens) {
            (Some(p), Some(c)) => Some(Usage {
                prompt_tokens: u32_of(p, "prompt_tokens")?,
                completion_tokens: u32_of(c, "completion_tokens")?,
            }),
            _ => None,
        };
        Ok(Message {
            id: MessageId(r.id),
            conversation_id: ConversationId(r.conversation_id),
            turn_id: r.turn_id.map(TurnId),
            seq: r.seq,
            agent: opt_agent(r.agent_id)?,
            kind: MessageKind::parse(&r.kind).ok_or_else(|| corrupt(&r.kind))?,
            linked: r.linked_message_id.map(MessageId),
            from: opt_agent(r.from_agent)?,
            to: opt_agent(r.to_agent)?,
            text: r.text,
            usage,
            latency_ms: r.latency_ms.map(|l| u32_of(l, "latency_ms")).transpose()?,
            included: r.included,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct TurnRow {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub number: i64,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub stopped_by: Option<String>,
    pub hops: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub error: Option<String>,
    pub cost_pico: Option<i64>,
}

impl From<&TurnRecord> for TurnRow {
    fn from(t: &TurnRecord) -> Self {
        Self {
            id: t.id.0,
            conversation_id: t.conversation_id.0,
            number: i64::from(t.number),
            started_at: t.started_at,
            finished_at: t.finished_at,
            stopped_by: t.stopped_by.map(|s| s.as_str().to_string()),
            hops: i64::from(t.hops),
            prompt_tokens: i64::from(t.usage.prompt_tokens),
            completion_tokens: i64::from(t.usage.completion_tokens),
            error: t.error.clone(),
            cost_pico: t.cost.map(|c| i64::try_from(c.0).unwrap_or(i64::MAX)),
        }
    }
}

impl TryFrom<TurnRow> for TurnRecord {
    type Error = StoreError;
    fn try_from(r: TurnRow) -> Result<Self, StoreError> {
        Ok(TurnRecord {
            id: TurnId(r.id),
            conversation_id: ConversationId(r.conversation_id),
            number: u32_of(r.number, "turn number")?,
            started_at: r.started_at,
            finished_at: r.finished_at,
            stopped_by: r
                .stopped_by
                .map(|s| StopReason::parse(&s).ok_or_else(|| corrupt(&s)))
                .transpose()?,
            hops: u32_of(r.hops, "hops")?,
            usage: Usage {
                prompt_tokens: u32_of(r.prompt_tokens, "prompt_tokens")?,
                completion_tokens: u32_of(r.completion_tokens, "completion_tokens")?,
            },
            cost: r
                .cost_pico
                .map(|c| {
                    u64::try_from(c)
                        .map(agency_core::Cost)
                        .map_err(|_| corrupt(c))
                })
                .transpose()?,
            error: r.error,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct SealedKeyRow {
    pub owner: String,
    pub provider: String,
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
    pub suffix: String,
    pub created_at: DateTime<Utc>,
}

impl From<SealedKeyRow> for crate::SealedKey {
    fn from(r: SealedKeyRow) -> Self {
        crate::SealedKey {
            owner: r.owner,
            provider: r.provider,
            nonce: r.nonce,
            sealed: r.sealed,
            suffix: r.suffix,
            created_at: r.created_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ApiKeyRow {
    pub id: Uuid,
    pub agency_id: Uuid,
    pub name: String,
    pub prefix: String,
    pub hash: String,
    pub rate_limit_per_minute: i64,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TryFrom<ApiKeyRow> for agency_core::ApiKey {
    type Error = StoreError;
    fn try_from(r: ApiKeyRow) -> Result<Self, StoreError> {
        Ok(agency_core::ApiKey {
            id: r.id,
            agency_id: AgencyId(r.agency_id),
            name: r.name,
            prefix: r.prefix,
            hash: r.hash,
            rate_limit_per_minute: u32_of(r.rate_limit_per_minute, "rate_limit_per_minute")?,
            created_at: r.created_at,
            expires_at: r.expires_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
        })
    }
}

pub(crate) fn key_name_taken(key: &agency_core::ApiKey) -> StoreError {
    StoreError::Conflict(format!(
        "the agency already has a key named `{}`; revoke it or choose another name",
        key.name
    ))
}
