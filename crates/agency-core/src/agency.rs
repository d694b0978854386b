//! Agencies, agents and their instructions, validated once at the boundary.
//!
//! A [`AgencyDraft`] is what a person wrote (a file, a form): plain strings, names where ids
//! will be. [`AgencyDraft::validate`] turns it into an [`Agency`] whose invariants hold for the
//! rest of the program, or lists every problem with the path of the field that has it.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

pub use crate::draft::{
    AgencyDraft, AgentDraft, McpServerDraft, PriceDraft, ProviderDraft, RuleDraft,
};
use crate::ids::{AgencyId, AgentId};
use crate::tool::{McpServer, McpTransport, ToolGrants};

/// How agents address each other in an agency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Spec 000: `{"to": 143, "context": "..."}`, `to: 0` is the user.
    Json,
    /// Spec 001: `TO programmer: ...`, delivered as `FROM manager: ...`.
    Directives,
    /// No addressing: a roundtable room, where an agent's reply is its message to the room
    /// and what it receives is plain chat. Not for agencies (files name only the two above).
    Plain,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Json => "json",
            Protocol::Directives => "directives",
            Protocol::Plain => "plain",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "json" => Some(Protocol::Json),
            "directives" => Some(Protocol::Directives),
            _ => None,
        }
    }
}

/// Guards on one turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Replies the agents may make in one turn before the manager is told to answer.
    pub max_hops: u32,
    /// Wall time a turn may take before the manager is told to answer.
    pub turn_deadline: Duration,
}

impl Limits {
    pub const DEFAULT_MAX_HOPS: u32 = 16;
    pub const MAX_MAX_HOPS: u32 = 100_000;
    pub const DEFAULT_DEADLINE_SECS: u64 = 300;
    pub const MAX_DEADLINE_SECS: u64 = 86_400;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_hops: Self::DEFAULT_MAX_HOPS,
            turn_deadline: Duration::from_secs(Self::DEFAULT_DEADLINE_SECS),
        }
    }
}

/// `provider/model`, e.g. `builtin/rules` or `openai/gpt-4o`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl ModelRef {
    pub fn parse(s: &str) -> Option<Self> {
        let (provider, model) = s.trim().split_once('/')?;
        let ok = |p: &str| !p.is_empty() && !p.chars().any(char::is_whitespace);
        (ok(provider) && ok(model)).then(|| Self {
            provider: provider.to_string(),
            model: model.to_string(),
        })
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Who a rule listens to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Party {
    Any,
    User,
    Agent(AgentId),
}

/// Where a message goes: the end user or an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Recipient {
    User,
    Agent(AgentId),
}

impl Recipient {
    /// The number used on the wire: 0 for the user.
    pub fn number(self) -> u32 {
        match self {
            Recipient::User => AgentId::USER,
            Recipient::Agent(id) => id.get(),
        }
    }

    pub fn agent(self) -> Option<AgentId> {
        match self {
            Recipient::User => None,
            Recipient::Agent(id) => Some(id),
        }
    }
}

/// An "ad lib" rule (spec 001, item 7): when a message is from `when`, do `action`, and send the
/// response to `send_to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub when: Party,
    pub action: String,
    pub send_to: Vec<Recipient>,
    /// Call a tool first; `action` then sends its result (`{{result}}`).
    pub call: Option<RuleCall>,
}

/// A rule's tool call: the tool (`server/tool`) and its arguments, whose strings may hold the
/// rule's placeholders (`{{message}}`, `{{from}}`, `{{count}}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleCall {
    pub tool: String,
    pub with: serde_json::Value,
}

/// One block of an agent's instructions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    Text(String),
    Rule(Rule),
}

/// Sampling parameters an agent's model calls use (unset: the provider's default).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sampling {
    /// 0 to 2.
    pub temperature: Option<f64>,
    /// 0 to 1.
    pub top_p: Option<f64>,
    /// Longest answer, in tokens.
    pub max_tokens: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Agent {
    pub id: AgentId,
    pub name: String,
    /// A string id for other systems (MQTT's `{agentId}`), e.g. `FERM-DATA-AGENT-001`.
    pub handle: Option<String>,
    pub role: Option<String>,
    pub model: ModelRef,
    pub sampling: Sampling,
    pub blocks: Vec<Block>,
    /// When it reflects on what it observed (spec 002's memory).
    pub memory: crate::memory::MemorySettings,
    /// The tools it may call.
    pub tools: ToolGrants,
}

/// The wire format a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI's Chat Completions, and every server that copies it (Ollama, vLLM, llama.cpp,
    /// LiteLLM, OpenRouter).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Some(ProviderKind::OpenAi),
            "anthropic" => Some(ProviderKind::Anthropic),
            _ => None,
        }
    }
}

/// A provider an agency names for its own agents (`model: local/qwen2.5`). Its key is never
/// here: only the name of the environment variable that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSpec {
    pub name: String,
    pub kind: ProviderKind,
    /// Unset: the kind's public endpoint.
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// Calls in flight at once (unset: the server's default).
    pub max_concurrency: Option<u32>,
    /// Calls started per minute (unset: no limit).
    pub requests_per_minute: Option<u32>,
    /// Its models' prices, by model name, for what turns cost.
    pub prices: Vec<(String, crate::price::Price)>,
}

impl Agent {
    /// The id other systems know it by (MQTT's `{agentId}`): its handle, else its name.
    pub fn handle_or_name(&self) -> &str {
        self.handle.as_deref().unwrap_or(&self.name)
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.blocks.iter().filter_map(|b| match b {
            Block::Rule(r) => Some(r),
            Block::Text(_) => None,
        })
    }
}

/// A way a message may go between an agency's agents, as their rules say ([`Agency::edges`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    pub from: AgentId,
    pub to: Recipient,
    /// A rule sends to several at once along it.
    pub fan_out: bool,
    /// The tool its rule calls before sending.
    pub tool: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Agency {
    pub id: AgencyId,
    pub owner: String,
    pub name: String,
    pub handle: Option<String>,
    pub protocol: Protocol,
    pub manager: AgentId,
    pub limits: Limits,
    /// Providers of this agency's own, beside the server's.
    pub providers: Vec<ProviderSpec>,
    /// MCP servers of this agency's own (HTTP only), beside the server's, by name.
    pub mcp_servers: Vec<(String, McpServer)>,
    /// In display order; ids and names are unique, the manager is one of them.
    pub agents: Vec<Agent>,
    /// The published version this is (`None`: the draft being edited).
    pub version: Option<u32>,
}

impl Agency {
    pub fn agent(&self, id: AgentId) -> Option<&Agent> {
        self.agents.iter().find(|a| a.id == id)
    }

    pub fn roster(&self) -> Roster {
        Roster::new(self.agents.iter().map(|a| (a.id, a.name.clone())))
    }

    /// The id other systems know the agency by (MQTT's `{teamId}`): its handle, else its name.
    pub fn team_id(&self) -> &str {
        self.handle.as_deref().unwrap_or(&self.name)
    }

    /// The agent other systems call `handle`: by handle, else by name (both without regard to
    /// case).
    pub fn agent_by_handle(&self, handle: &str) -> Option<&Agent> {
        self.agents
            .iter()
            .find(|a| {
                a.handle
                    .as_deref()
                    .is_some_and(|h| h.eq_ignore_ascii_case(handle))
            })
            .or_else(|| {
                self.agents
                    .iter()
                    .find(|a| a.name.eq_ignore_ascii_case(handle))
            })
    }

    /// The edges its agents' rules allow, in agent and rule order, each once: who may send to
    /// whom (the user's message reaching the manager is not among them). Another agent's rule
    /// that sends to the user reaches the manager, as the engine delivers it. `fan_out` marks an
    /// edge of a rule that sends to several at once; `tool` the tool such a rule calls first.
    pub fn edges(&self) -> Vec<Edge> {
        let mut out: Vec<Edge> = Vec::new();
        for a in &self.agents {
            for rule in a.rules() {
                for to in &rule.send_to {
                    let to = match to {
                        Recipient::User if a.id != self.manager => Recipient::Agent(self.manager),
                        other => *other,
                    };
                    let fan_out = rule.send_to.len() > 1;
                    let tool = rule.call.as_ref().map(|c| c.tool.clone());
                    match out.iter_mut().find(|e| e.from == a.id && e.to == to) {
                        Some(e) => {
                            e.fan_out |= fan_out;
                            if e.tool.is_none() {
                                e.tool = tool;
                            }
                        }
                        None => out.push(Edge {
                            from: a.id,
                            to,
                            fan_out,
                            tool,
                        }),
                    }
                }
            }
        }
        out
    }

    /// The agency as one agent alone sees it when someone talks to that agent directly: it is
    /// the only agent, so it answers the user. Its rules that address other agents are left
    /// out (there is no one to send to). `None` when the agency has no such agent.
    pub fn solo(&self, id: AgentId) -> Option<Agency> {
        let mut agent = self.agent(id)?.clone();
        agent.blocks.retain(|b| match b {
            Block::Text(_) => true,
            Block::Rule(r) => r.send_to.iter().all(|to| match to {
                Recipient::User => true,
                Recipient::Agent(a) => *a == id,
            }),
        });
        Some(Agency {
            manager: id,
            agents: vec![agent],
            ..self.clone()
        })
    }

    /// The draft this agency would be written back as (for export and editing).
    pub fn to_draft(&self) -> AgencyDraft {
        let roster = self.roster();
        let party = |p: &Party| match p {
            Party::Any => "any".to_string(),
            Party::User => "user".to_string(),
            Party::Agent(id) => roster.name(*id).unwrap_or("?").to_string(),
        };
        let recipient = |r: &Recipient| match r {
            Recipient::User => "user".to_string(),
            Recipient::Agent(id) => roster.name(*id).unwrap_or("?").to_string(),
        };
        AgencyDraft {
            name: self.name.clone(),
            handle: self.handle.clone(),
            protocol: self.protocol.as_str().to_string(),
            manager: roster.name(self.manager).unwrap_or("?").to_string(),
            max_hops: Some(self.limits.max_hops),
            turn_deadline_secs: Some(self.limits.turn_deadline.as_secs()),
            providers: self
                .providers
                .iter()
                .map(|p| ProviderDraft {
                    name: p.name.clone(),
                    kind: p.kind.as_str().to_string(),
                    base_url: p.base_url.clone(),
                    api_key_env: p.api_key_env.clone(),
                    max_concurrency: p.max_concurrency,
                    requests_per_minute: p.requests_per_minute,
                    prices: p
                        .prices
                        .iter()
                        .map(|(m, price)| {
                            (
                                m.clone(),
                                PriceDraft {
                                    input: crate::price::format_dollars(price.input),
                                    output: crate::price::format_dollars(price.output),
                                },
                            )
                        })
                        .collect(),
                })
                .collect(),
            mcp_servers: self
                .mcp_servers
                .iter()
                .map(|(name, server)| McpServerDraft::of(name, server))
                .collect(),
            agents: self
                .agents
                .iter()
                .map(|a| {
                    let text: Vec<&str> = a
                        .blocks
                        .iter()
                        .filter_map(|b| match b {
                            Block::Text(t) => Some(t.as_str()),
                            Block::Rule(_) => None,
                        })
                        .collect();
                    AgentDraft {
                        id: Some(a.id.get()),
                        name: a.name.clone(),
                        handle: a.handle.clone(),
                        role: a.role.clone(),
                        model: a.model.to_string(),
                        temperature: a.sampling.temperature,
                        top_p: a.sampling.top_p,
                        max_tokens: a.sampling.max_tokens,
                        reflection_threshold: a.memory.reflection_threshold,
                        reflection_half_life_hours: a.memory.half_life_hours,
                        instructions: (!text.is_empty()).then(|| text.join("\n\n")),
                        tools: a.tools.0.clone(),
                        rules: a
                            .rules()
                            .map(|r| RuleDraft {
                                when: party(&r.when),
                                action: r.action.clone(),
                                send_to: r.send_to.iter().map(recipient).collect(),
                                call: r.call.as_ref().map(|c| c.tool.clone()),
                                with: r.call.as_ref().map(|c| c.with.clone()),
                            })
                            .collect(),
                    }
                })
                .collect(),
        }
    }
}

/// The agents of an agency by id and name, as the other agents see them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roster {
    entries: Vec<(AgentId, String)>,
}

impl Roster {
    pub fn new(entries: impl IntoIterator<Item = (AgentId, String)>) -> Self {
        Self {
            entries: entries.into_iter().collect(),
        }
    }

    pub fn entries(&self) -> &[(AgentId, String)] {
        &self.entries
    }

    pub fn name(&self, id: AgentId) -> Option<&str> {
        self.entries
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, n)| n.as_str())
    }

    pub fn contains(&self, id: AgentId) -> bool {
        self.entries.iter().any(|(i, _)| *i == id)
    }

    /// Names match without regard to case; `user` is the end user.
    pub fn resolve(&self, name: &str) -> Option<Recipient> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("user") {
            return Some(Recipient::User);
        }
        self.entries
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(id, _)| Recipient::Agent(*id))
    }

    /// The display name of a party: an agent's name, or `user`.
    pub fn display(&self, who: Option<AgentId>) -> &str {
        match who {
            None => "user",
            Some(id) => self.name(id).unwrap_or("unknown"),
        }
    }
}

/// One problem with a draft: the path of the field (`agents[1].rules[0].send_to`) and what is
/// wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in a draft, in the order of the fields.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

const NAME_MAX: usize = 64;
const HANDLE_MAX: usize = 128;

/// Names are used in URLs, `TO Name:` directives and `@mentions`: a letter, then letters,
/// digits, `_`, `-` or `.`.
fn name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Some("must not be empty".into()),
        Some(c) if !c.is_ascii_alphabetic() => {
            return Some(format!("`{name}` must start with a letter"));
        }
        _ => {}
    }
    if name.len() > NAME_MAX {
        return Some(format!("`{name}` is longer than {NAME_MAX} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Some(format!(
            "`{name}` may only hold letters, digits, `_`, `-` and `.` (found {c:?})"
        ));
    }
    None
}

/// Handles appear in MQTT topics: no separators, wildcards or white space.
fn handle_problem(handle: &str) -> Option<String> {
    if handle.is_empty() || handle.len() > HANDLE_MAX {
        return Some(format!("must be 1 to {HANDLE_MAX} characters"));
    }
    if let Some(c) = handle
        .chars()
        .find(|c| matches!(c, '/' | '+' | '#') || c.is_whitespace() || c.is_control())
    {
        return Some(format!("`{handle}` must not contain {c:?}"));
    }
    None
}

struct Problems(Vec<ValidationError>);

impl Problems {
    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ValidationError {
            path: path.into(),
            message: message.into(),
        });
    }
}

impl AgencyDraft {
    /// Checks every field and reference; `serves` says whether some provider serves a model.
    pub fn validate(
        &self,
        id: AgencyId,
        owner: &str,
        serves: &dyn Fn(&ModelRef) -> bool,
    ) -> Result<Agency, ValidationErrors> {
        let mut p = Problems(Vec::new());
        let (protocol, max_hops, deadline) = self.check_settings(&mut p);
        let providers = check_providers(&self.providers, &mut p);
        let mcp_servers = check_mcp_servers(&self.mcp_servers, Declared::Account, &mut p);
        let own_provider = |m: &ModelRef| providers.iter().any(|q| q.name == m.provider);
        let ids = agent_ids(&self.agents, &mut p);
        let by_name = check_agents(
            &self.agents,
            &ids,
            &|m| own_provider(m) || serves(m),
            &mut p,
        );
        let manager = match by_name.get(&self.manager.to_ascii_lowercase()) {
            Some(id) => Some(*id),
            None => {
                p.add(
                    "manager",
                    format!(
                        "`{}` is not one of the agents{}",
                        self.manager,
                        known(&self.agents)
                    ),
                );
                None
            }
        };
        let agents: Vec<Agent> = self
            .agents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let tools = tools_of(i, a, &mut p);
                let blocks = blocks_of(i, a, ids[i], &by_name, &self.agents, &tools, &mut p);
                agent_of(a, ids[i], blocks, tools)
            })
            .collect();

        match manager {
            Some(manager) if p.0.is_empty() => Ok(Agency {
                id,
                owner: owner.to_string(),
                name: self.name.clone(),
                handle: self.handle.clone(),
                protocol,
                manager,
                limits: Limits {
                    max_hops,
                    turn_deadline: Duration::from_secs(deadline),
                },
                providers,
                mcp_servers,
                agents,
                version: None,
            }),
            _ => Err(ValidationErrors(p.0)),
        }
    }

    /// The agency's own fields: its name and handle, protocol, limits, and that it has agents.
    fn check_settings(&self, p: &mut Problems) -> (Protocol, u32, u64) {
        if let Some(m) = name_problem(&self.name) {
            p.add("name", m);
        } else if uuid::Uuid::parse_str(&self.name).is_ok() {
            p.add("name", "must not look like an id (a uuid)");
        }
        if let Some(h) = &self.handle
            && let Some(m) = handle_problem(h)
        {
            p.add("handle", m);
        }
        let protocol = Protocol::parse(&self.protocol).unwrap_or_else(|| {
            p.add(
                "protocol",
                format!(
                    "`{}` is not a protocol: use `json` or `directives`",
                    self.protocol
                ),
            );
            Protocol::Json
        });
        let max_hops = self.max_hops.unwrap_or(Limits::DEFAULT_MAX_HOPS);
        if !(1..=Limits::MAX_MAX_HOPS).contains(&max_hops) {
            p.add(
                "max_hops",
                format!("must be from 1 to {}", Limits::MAX_MAX_HOPS),
            );
        }
        let deadline = self
            .turn_deadline_secs
            .unwrap_or(Limits::DEFAULT_DEADLINE_SECS);
        if !(1..=Limits::MAX_DEADLINE_SECS).contains(&deadline) {
            p.add(
                "turn_deadline_secs",
                format!("must be from 1 to {}", Limits::MAX_DEADLINE_SECS),
            );
        }
        if self.agents.is_empty() {
            p.add("agents", "an agency needs at least one agent (its manager)");
        }
        (protocol, max_hops, deadline)
    }
}

/// Each agent's id: the ones given first (not 0, not taken twice), then the lowest free
/// numbers for the rest.
fn agent_ids(agents: &[AgentDraft], p: &mut Problems) -> Vec<AgentId> {
    // Ids: explicit ones first, then the lowest free numbers for the rest.
    let mut used: HashSet<u32> = HashSet::new();
    let mut ids: Vec<Option<AgentId>> = Vec::with_capacity(agents.len());
    for (i, a) in agents.iter().enumerate() {
        match a.id {
            None => ids.push(None),
            Some(0) => {
                p.add(
                    format!("agents[{i}].id"),
                    "0 is the user; agent ids start at 1",
                );
                ids.push(None);
            }
            Some(n) if !used.insert(n) => {
                p.add(
                    format!("agents[{i}].id"),
                    format!("id {n} is used by another agent"),
                );
                ids.push(None);
            }
            Some(n) => ids.push(AgentId::new(n)),
        }
    }
    let ids: Vec<AgentId> = ids
        .into_iter()
        .map(|id| {
            id.unwrap_or_else(|| {
                let id = AgentId::first_free(1, |n| used.contains(&n));
                used.insert(id.get());
                id
            })
        })
        .collect();
    ids
}

/// Each agent's own fields; the agents by lower-case name (for rules and the manager).
fn check_agents(
    agents: &[AgentDraft],
    ids: &[AgentId],
    known_model: &dyn Fn(&ModelRef) -> bool,
    p: &mut Problems,
) -> HashMap<String, AgentId> {
    let mut by_name: HashMap<String, AgentId> = HashMap::new();
    let mut handles: HashSet<&str> = HashSet::new();
    for (i, a) in agents.iter().enumerate() {
        if let Some(m) = name_problem(&a.name) {
            p.add(format!("agents[{i}].name"), m);
        } else if a.name.eq_ignore_ascii_case("user") || a.name.eq_ignore_ascii_case("any") {
            p.add(
                format!("agents[{i}].name"),
                format!(
                    "`{}` is reserved (it names the end user or any sender)",
                    a.name
                ),
            );
        } else if by_name
            .insert(a.name.to_ascii_lowercase(), ids[i])
            .is_some()
        {
            p.add(
                format!("agents[{i}].name"),
                format!(
                    "`{}` is the name of another agent (names ignore case)",
                    a.name
                ),
            );
        }
        if let Some(h) = &a.handle {
            if let Some(m) = handle_problem(h) {
                p.add(format!("agents[{i}].handle"), m);
            } else if !handles.insert(h) {
                p.add(
                    format!("agents[{i}].handle"),
                    format!("`{h}` is used by another agent"),
                );
            }
        }
        match ModelRef::parse(&a.model) {
            None => p.add(
                format!("agents[{i}].model"),
                format!(
                    "`{}` is not a model reference: write `provider/model`, e.g. `builtin/rules`",
                    a.model
                ),
            ),
            Some(m) if !known_model(&m) => p.add(
                format!("agents[{i}].model"),
                format!("no configured provider serves `{m}`"),
            ),
            Some(_) => {}
        }
        if let Some(t) = a.temperature
            && !(0.0..=2.0).contains(&t)
        {
            p.add(format!("agents[{i}].temperature"), "must be from 0 to 2");
        }
        if let Some(t) = a.top_p
            && !(0.0..=1.0).contains(&t)
        {
            p.add(format!("agents[{i}].top_p"), "must be from 0 to 1");
        }
        if a.max_tokens == Some(0) {
            p.add(format!("agents[{i}].max_tokens"), "must be at least 1");
        }
        let positive = |v: f64| v.is_finite() && v > 0.0 && v <= crate::memory::MAX_SETTING;
        if let Some(t) = a.reflection_threshold
            && !positive(t)
        {
            p.add(
                format!("agents[{i}].reflection_threshold"),
                "must be a number above 0 (the default is 2.0)",
            );
        }
        if let Some(h) = a.reflection_half_life_hours
            && !positive(h)
        {
            p.add(
                format!("agents[{i}].reflection_half_life_hours"),
                "must be a number of hours above 0 (the default is 24)",
            );
        }
    }
    by_name
}

/// An agent's blocks: its instructions, then its rules with their parties resolved.
fn blocks_of(
    i: usize,
    a: &AgentDraft,
    me: AgentId,
    by_name: &HashMap<String, AgentId>,
    all: &[AgentDraft],
    tools: &ToolGrants,
    p: &mut Problems,
) -> Vec<Block> {
    let mut blocks = Vec::new();
    if let Some(text) = a.instructions.as_deref().map(str::trim)
        && !text.is_empty()
    {
        blocks.push(Block::Text(text.to_string()));
    }
    for (j, r) in a.rules.iter().enumerate() {
        let path = format!("agents[{i}].rules[{j}]");
        let when = match r.when.trim().to_ascii_lowercase().as_str() {
            "any" | "anyone" | "*" => Some(Party::Any),
            "user" => Some(Party::User),
            other => match by_name.get(other) {
                Some(id) if *id == me => {
                    p.add(
                        format!("{path}.when"),
                        "an agent never receives its own messages",
                    );
                    None
                }
                Some(id) => Some(Party::Agent(*id)),
                None => {
                    p.add(
                        format!("{path}.when"),
                        format!(
                            "`{}` is not `user`, `any` or one of the agents{}",
                            r.when,
                            known(all)
                        ),
                    );
                    None
                }
            },
        };
        if r.send_to.is_empty() {
            p.add(format!("{path}.send_to"), "names no recipient");
        }
        let mut send_to = Vec::new();
        for name in &r.send_to {
            let lower = name.trim().to_ascii_lowercase();
            if lower == "user" {
                send_to.push(Recipient::User);
            } else {
                match by_name.get(&lower) {
                    Some(id) if *id == me => {
                        p.add(format!("{path}.send_to"), "an agent cannot send to itself")
                    }
                    Some(id) => send_to.push(Recipient::Agent(*id)),
                    None => p.add(
                        format!("{path}.send_to"),
                        format!("`{name}` is not `user` or one of the agents{}", known(all)),
                    ),
                }
            }
        }
        let call = rule_call(&path, r, tools, p);
        if let Some(when) = when {
            blocks.push(Block::Rule(Rule {
                when,
                action: r.action.clone(),
                send_to,
                call,
            }));
        }
    }
    blocks
}

/// The agent a checked draft describes.
fn agent_of(a: &AgentDraft, id: AgentId, blocks: Vec<Block>, tools: ToolGrants) -> Agent {
    Agent {
        id,
        name: a.name.clone(),
        handle: a.handle.clone(),
        role: a.role.clone().filter(|r| !r.trim().is_empty()),
        model: ModelRef::parse(&a.model).unwrap_or(ModelRef {
            provider: String::new(),
            model: String::new(),
        }),
        sampling: Sampling {
            temperature: a.temperature,
            top_p: a.top_p,
            max_tokens: a.max_tokens,
        },
        blocks,
        memory: crate::memory::MemorySettings {
            reflection_threshold: a.reflection_threshold,
            half_life_hours: a.reflection_half_life_hours,
        },
        tools,
    }
}

/// The agent's `tools`: each `server/tool` or `server/*`.
fn tools_of(i: usize, a: &AgentDraft, p: &mut Problems) -> ToolGrants {
    let mut grants = Vec::new();
    for (k, t) in a.tools.iter().enumerate() {
        let t = t.trim();
        match crate::tool::split(t) {
            Some(_) if grants.iter().any(|g| g == t) => p.add(
                format!("agents[{i}].tools[{k}]"),
                format!("`{t}` is listed twice"),
            ),
            Some(_) => grants.push(t.to_string()),
            None => p.add(
                format!("agents[{i}].tools[{k}]"),
                format!(
                    "`{t}` is not a tool: write `server/tool` (e.g. `builtin/now`), or `server/*` for every tool of a server"
                ),
            ),
        }
    }
    ToolGrants(grants)
}

/// A rule's `call` and `with`: a tool its agent may call, and an object of arguments.
fn rule_call(path: &str, r: &RuleDraft, tools: &ToolGrants, p: &mut Problems) -> Option<RuleCall> {
    let Some(tool) = r.call.as_deref().map(str::trim) else {
        if r.with.is_some() {
            p.add(
                format!("{path}.with"),
                "gives arguments, but the rule has no `call`",
            );
        }
        return None;
    };
    let mut ok = true;
    if crate::tool::split(tool).is_none() || tool.ends_with("/*") {
        p.add(
            format!("{path}.call"),
            format!("`{tool}` is not a tool: write `server/tool` (e.g. `builtin/now`)"),
        );
        ok = false;
    } else if !tools.allows(tool) {
        let listed = if tools.is_empty() {
            "the agent lists no `tools`".to_string()
        } else {
            format!("its tools are {}", tools.0.join(", "))
        };
        p.add(
            format!("{path}.call"),
            format!("`{tool}` is not one of this agent's tools ({listed}): add it to the agent's `tools`"),
        );
        ok = false;
    }
    let with = r.with.clone().unwrap_or_else(|| serde_json::json!({}));
    if !with.is_object() {
        p.add(
            format!("{path}.with"),
            "must be a mapping of the tool's arguments (`with: { path: \"{{message}}\" }`)",
        );
        ok = false;
    }
    ok.then(|| RuleCall {
        tool: tool.to_string(),
        with,
    })
}

/// Who declared MCP servers: the operator (the server's configuration, trusted) or an account
/// (an agency file or draft).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Declared {
    Operator,
    Account,
}

/// Validates MCP servers on their own (the server's configuration declares them too).
pub fn validate_mcp_servers(
    drafts: &[McpServerDraft],
    declared: Declared,
) -> Result<Vec<(String, McpServer)>, ValidationErrors> {
    let mut p = Problems(Vec::new());
    let servers = check_mcp_servers(drafts, declared, &mut p);
    if p.0.is_empty() {
        Ok(servers)
    } else {
        Err(ValidationErrors(p.0))
    }
}

fn check_mcp_servers(
    drafts: &[McpServerDraft],
    declared: Declared,
    p: &mut Problems,
) -> Vec<(String, McpServer)> {
    let mut out: Vec<(String, McpServer)> = Vec::new();
    for d in drafts {
        let path = format!("mcp_servers.{}", d.name);
        let before = p.0.len();
        if let Some(m) = server_name_problem(&d.name) {
            p.add(path.clone(), m);
        } else if d.name == crate::tool::BUILTIN_SERVER {
            p.add(
                path.clone(),
                "`builtin` is the server of the built-in tools: choose another name",
            );
        } else if out.iter().any(|(n, _)| *n == d.name) {
            p.add(path.clone(), format!("`{}` is declared twice", d.name));
        }
        let operator = declared == Declared::Operator;
        let transport = match (&d.url, &d.command) {
            (Some(_), Some(_)) => {
                p.add(path.clone(), "has both `url` and `command`: give one");
                None
            }
            (None, None) => {
                p.add(
                    path.clone(),
                    "gives neither `url` (a Streamable HTTP server) nor `command` (a stdio server)",
                );
                None
            }
            (None, Some(_)) if !operator => {
                p.add(
                    format!("{path}.command"),
                    "a stdio server starts a process on the server's machine, so only the server's own configuration may declare one: give the MCP server's `url` instead",
                );
                None
            }
            (None, Some(command)) => {
                if command.trim().is_empty() {
                    p.add(format!("{path}.command"), "is empty");
                }
                if !d.headers_env.is_empty() {
                    p.add(
                        format!("{path}.headers_env"),
                        "is for `url` servers; a stdio server gets `env`",
                    );
                }
                Some(McpTransport::Stdio {
                    command: command.trim().to_string(),
                    args: d.args.clone(),
                    env: d.env.iter().cloned().collect(),
                })
            }
            (Some(url), None) => {
                let u = url.trim();
                let scheme_ok = ["http://", "https://"].iter().any(|s| {
                    u.get(..s.len()).is_some_and(|x| x.eq_ignore_ascii_case(s)) && u.len() > s.len()
                });
                if !scheme_ok {
                    p.add(
                        format!("{path}.url"),
                        format!("`{u}` is not an http:// or https:// address"),
                    );
                }
                if !d.args.is_empty() || !d.env.is_empty() {
                    p.add(
                        path.clone(),
                        "`args` and `env` are for a `command` (stdio) server",
                    );
                }
                if !operator && !d.headers_env.is_empty() {
                    p.add(
                        format!("{path}.headers_env"),
                        format!("names server variables, which only the server's own configuration may read: store the headers for `{}` as your MCP credentials instead (PUT /api/mcp-credentials/{})", d.name, d.name),
                    );
                }
                Some(McpTransport::Http {
                    url: u.to_string(),
                    headers_env: d.headers_env.iter().cloned().collect(),
                })
            }
        };
        if d.timeout_secs.is_some_and(|t| !(1..=3600).contains(&t)) {
            p.add(
                format!("{path}.timeout_secs"),
                "must be from 1 to 3600 seconds",
            );
        }
        if d.max_concurrency.is_some_and(|c| !(1..=256).contains(&c)) {
            p.add(format!("{path}.max_concurrency"), "must be from 1 to 256");
        }
        if let Some(transport) = transport
            && p.0.len() == before
        {
            out.push((
                d.name.clone(),
                McpServer {
                    transport,
                    timeout_secs: d.timeout_secs,
                    max_concurrency: d.max_concurrency,
                },
            ));
        }
    }
    out
}

/// A server's name: what `server/tool` starts with.
pub fn server_name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 40 {
        return Some("a server's name has 1 to 40 characters".into());
    }
    let ok = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    (!ok).then(|| {
        format!("`{name}` may hold only lower-case letters, digits, `-` and `_` (it starts each tool's name: `{name}/tool`)")
    })
}

impl McpServerDraft {
    /// The draft a declared server is written back as.
    pub fn of(name: &str, server: &McpServer) -> Self {
        let mut d = McpServerDraft {
            name: name.to_string(),
            timeout_secs: server.timeout_secs,
            max_concurrency: server.max_concurrency,
            ..Default::default()
        };
        match &server.transport {
            McpTransport::Builtin => {}
            McpTransport::Stdio { command, args, env } => {
                d.command = Some(command.clone());
                d.args = args.clone();
                d.env = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            }
            McpTransport::Http { url, headers_env } => {
                d.url = Some(url.clone());
                d.headers_env = headers_env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
            }
        }
        d
    }
}

/// What a server lists, for [`Agency::check_tools`]: `None` when no server has that name.
pub type ListedTools<'a> = &'a dyn Fn(&str) -> Option<Result<Vec<String>, String>>;

impl Agency {
    /// Checks the agents' tools against what their servers list: each server exists, each
    /// named tool is one it lists, each rule calls a listed tool. `listed(server)` gives a
    /// server's tools, or why they could not be listed.
    pub fn check_tools(&self, listed: ListedTools<'_>) -> Result<(), ValidationErrors> {
        let mut p = Problems(Vec::new());
        let known = |path: String, qualified: &str, p: &mut Problems| {
            let Some((server, tool)) = crate::tool::split(qualified) else {
                return;
            };
            match listed(server) {
                None => p.add(
                    path,
                    format!("no MCP server is named `{server}`: declare it under `mcp_servers`, or use `builtin`"),
                ),
                Some(Err(why)) => p.add(path, format!("the tools of `{server}` could not be listed: {why}")),
                Some(Ok(tools)) if tool != "*" && !tools.iter().any(|t| t == tool) => p.add(
                    path,
                    format!(
                        "`{server}` has no tool `{tool}`; it lists {}",
                        if tools.is_empty() { "none".to_string() } else { tools.join(", ") }
                    ),
                ),
                Some(Ok(_)) => {}
            }
        };
        for (i, a) in self.agents.iter().enumerate() {
            for (k, t) in a.tools.0.iter().enumerate() {
                known(format!("agents[{i}].tools[{k}]"), t, &mut p);
            }
            for (j, r) in a.rules().enumerate() {
                if let Some(call) = &r.call {
                    known(format!("agents[{i}].rules[{j}].call"), &call.tool, &mut p);
                }
            }
        }
        if p.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors(p.0))
        }
    }

    /// Every server the agents' tools name, once each.
    pub fn tool_servers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for a in &self.agents {
            for s in a.tools.servers() {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }
}

/// Validates providers on their own (a server's configuration names providers too).
pub fn validate_providers(drafts: &[ProviderDraft]) -> Result<Vec<ProviderSpec>, ValidationErrors> {
    let mut p = Problems(Vec::new());
    let providers = check_providers(drafts, &mut p);
    if p.0.is_empty() {
        Ok(providers)
    } else {
        Err(ValidationErrors(p.0))
    }
}

fn check_providers(drafts: &[ProviderDraft], p: &mut Problems) -> Vec<ProviderSpec> {
    let mut providers: Vec<ProviderSpec> = Vec::new();
    for d in drafts {
        let path = format!("providers.{}", d.name);
        if let Some(m) = name_problem(&d.name) {
            p.add(path.clone(), m);
        } else if providers.iter().any(|q| q.name == d.name) {
            p.add(
                path.clone(),
                format!("provider `{}` is defined twice", d.name),
            );
        } else if d.name == "builtin" {
            p.add(path.clone(), "`builtin` is the server's own provider");
        }
        let kind = ProviderKind::parse(&d.kind);
        if kind.is_none() {
            p.add(
                format!("{path}.kind"),
                format!("`{}` is not a provider kind: use `openai` (any OpenAI-compatible server) or `anthropic`", d.kind),
            );
        }
        if let Some(url) = &d.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            p.add(
                format!("{path}.base_url"),
                format!("`{url}` must start with http:// or https://"),
            );
        }
        if let Some(var) = &d.api_key_env
            && (var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            p.add(
                format!("{path}.api_key_env"),
                format!("`{var}` is not an environment variable name (letters, digits and _)"),
            );
        }
        if d.max_concurrency == Some(0) {
            p.add(format!("{path}.max_concurrency"), "must be at least 1");
        }
        if d.requests_per_minute == Some(0) {
            p.add(
                format!("{path}.requests_per_minute"),
                "must be at least 1 (leave it out for no limit)",
            );
        }
        let mut prices = Vec::new();
        for (i, (model, price)) in d.prices.iter().enumerate() {
            let at = format!("{path}.prices.{model}");
            if model.trim().is_empty() {
                p.add(format!("{path}.prices"), "a price names its model");
            } else if d.prices[..i].iter().any(|(m, _)| m == model) {
                p.add(at.clone(), format!("`{model}` is priced twice"));
            }
            let mut dollars = |field: &str, text: &str| {
                crate::price::parse_dollars(text).unwrap_or_else(|m| {
                    p.add(format!("{at}.{field}"), m.to_string());
                    0
                })
            };
            let input = dollars("input", &price.input);
            let output = dollars("output", &price.output);
            prices.push((model.clone(), crate::price::Price { input, output }));
        }
        if let Some(kind) = kind {
            providers.push(ProviderSpec {
                name: d.name.clone(),
                kind,
                base_url: d.base_url.clone(),
                api_key_env: d.api_key_env.clone(),
                max_concurrency: d.max_concurrency,
                requests_per_minute: d.requests_per_minute,
                prices,
            });
        }
    }
    providers
}

fn known(agents: &[AgentDraft]) -> String {
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(" (agents: {})", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> AgencyDraft {
        AgencyDraft {
            name: "studio".into(),
            protocol: "json".into(),
            manager: "manager".into(),
            agents: vec![
                AgentDraft {
                    id: Some(4522),
                    name: "manager".into(),
                    model: "builtin/rules".into(),
                    rules: vec![RuleDraft {
                        when: "user".into(),
                        action: "Please build: {{message}}".into(),
                        send_to: vec!["programmer".into()],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                AgentDraft {
                    name: "programmer".into(),
                    model: "builtin/rules".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    fn serves(m: &ModelRef) -> bool {
        m.provider == "builtin"
    }

    fn paths(d: &AgencyDraft) -> Vec<String> {
        match d.validate(AgencyId::new(), "local", &serves) {
            Ok(_) => vec![],
            Err(e) => e.0.into_iter().map(|e| e.path).collect(),
        }
    }

    #[test]
    fn a_valid_draft_gets_ids_and_resolved_rules() {
        let a = draft().validate(AgencyId::new(), "local", &serves).unwrap();
        assert_eq!(a.manager.get(), 4522);
        assert_eq!(a.agents[1].id.get(), 1, "free ids start at 1");
        assert_eq!(a.limits, Limits::default());
        let rule = a.agents[0].rules().next().unwrap();
        assert_eq!(rule.send_to, vec![Recipient::Agent(a.agents[1].id)]);
        assert_eq!(rule.when, Party::User);
    }

    #[test]
    fn edges_follow_the_rules_and_fan_outs_are_marked() {
        let mut d = draft();
        d.agents.push(AgentDraft {
            name: "reviewer".into(),
            model: "builtin/rules".into(),
            rules: vec![RuleDraft {
                when: "any".into(),
                action: "ok".into(),
                send_to: vec!["user".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
        d.agents[1].rules = vec![RuleDraft {
            when: "manager".into(),
            action: "built".into(),
            send_to: vec!["manager".into(), "reviewer".into()],
            ..Default::default()
        }];
        let a = d.validate(AgencyId::new(), "local", &serves).unwrap();
        let (m, p, r) = (a.agents[0].id, a.agents[1].id, a.agents[2].id);
        let edges: Vec<_> = a
            .edges()
            .iter()
            .map(|e| (e.from, e.to, e.fan_out))
            .collect();
        assert_eq!(
            edges,
            vec![
                (m, Recipient::Agent(p), false),
                (p, Recipient::Agent(m), true),
                (p, Recipient::Agent(r), true),
                // Only the manager reaches the user: the reviewer's answer goes to it.
                (r, Recipient::Agent(m), false),
            ]
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let mut d = draft();
        d.manager = "boss".into();
        d.protocol = "xml".into();
        d.agents[1].id = Some(4522);
        d.agents[1].model = "openai/gpt-4o".into();
        d.agents[0].rules[0].send_to = vec!["programer".into()];
        d.agents.push(AgentDraft {
            name: "Programmer".into(),
            model: "nonsense".into(),
            ..Default::default()
        });
        assert_eq!(
            paths(&d),
            vec![
                "protocol",
                "agents[1].id",
                "agents[1].model",
                "agents[2].name",
                "agents[2].model",
                "manager",
                "agents[0].rules[0].send_to",
            ]
        );
    }

    #[test]
    fn names_are_checked() {
        for bad in ["", "1abc", "has space", "user", "ANY", "a/b"] {
            let mut d = draft();
            d.agents[1].name = bad.into();
            assert!(paths(&d).contains(&"agents[1].name".to_string()), "{bad:?}");
        }
        let mut d = draft();
        d.name = "0190f3c2-6b5e-7cc0-8d2a-4b6f1e2d3c4b".into();
        assert_eq!(paths(&d), vec!["name"]);
    }

    #[test]
    fn self_addressed_rules_and_zero_ids_are_refused() {
        let mut d = draft();
        d.agents[0].id = Some(0);
        d.agents[1].rules = vec![RuleDraft {
            when: "programmer".into(),
            action: "x".into(),
            send_to: vec!["programmer".into()],
            ..Default::default()
        }];
        assert_eq!(
            paths(&d),
            vec![
                "agents[0].id",
                "agents[1].rules[0].when",
                "agents[1].rules[0].send_to"
            ]
        );
    }

    #[test]
    fn agency_providers_serve_their_agents() {
        let mut d = draft();
        d.providers = vec![ProviderDraft {
            name: "local".into(),
            kind: "openai".into(),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            api_key_env: None,
            max_concurrency: Some(2),
            requests_per_minute: Some(60),
            prices: vec![(
                "qwen2.5".into(),
                PriceDraft {
                    input: "0.1".into(),
                    output: "0.3".into(),
                },
            )],
        }];
        d.agents[1].model = "local/qwen2.5".into();
        d.agents[1].temperature = Some(0.2);
        let a = d.validate(AgencyId::new(), "local", &serves).unwrap();
        assert_eq!(a.providers[0].kind, ProviderKind::OpenAi);
        assert_eq!(a.agents[1].sampling.temperature, Some(0.2));
        assert_eq!(a.to_draft().validate(a.id, "local", &serves).unwrap(), a);
    }

    #[test]
    fn bad_providers_and_sampling_are_named() {
        let mut d = draft();
        let provider =
            |name: &str, kind: &str, url: Option<&str>, env: Option<&str>| ProviderDraft {
                name: name.into(),
                kind: kind.into(),
                base_url: url.map(Into::into),
                api_key_env: env.map(Into::into),
                max_concurrency: Some(0),
                requests_per_minute: None,
                prices: Vec::new(),
            };
        d.providers = vec![
            provider("local", "ollama", Some("localhost:11434"), Some("MY KEY")),
            provider("builtin", "openai", None, None),
        ];
        d.agents[0].temperature = Some(2.5);
        d.agents[0].top_p = Some(-0.1);
        d.agents[1].max_tokens = Some(0);
        d.agents[1].model = "local/x".into();
        assert_eq!(
            paths(&d),
            vec![
                "providers.local.kind",
                "providers.local.base_url",
                "providers.local.api_key_env",
                "providers.local.max_concurrency",
                "providers.builtin",
                "providers.builtin.max_concurrency",
                "agents[0].temperature",
                "agents[0].top_p",
                "agents[1].model",
                "agents[1].max_tokens",
            ]
        );
    }

    #[test]
    fn drafts_round_trip() {
        let a = draft().validate(AgencyId::new(), "local", &serves).unwrap();
        let again = a.to_draft().validate(a.id, "local", &serves).unwrap();
        assert_eq!(a, again);
    }
}

/// A published version of an agency: frozen when it was published, served by the agency's API
/// until a newer one is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub version: u32,
    pub published_at: chrono::DateTime<chrono::Utc>,
}
