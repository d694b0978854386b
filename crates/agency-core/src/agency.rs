//! Agencies, agents and their instructions, validated once at the boundary.
//!
//! A [`AgencyDraft`] is what a person wrote (a file, a form, the API's body: `crate::draft`):
//! plain strings, names where ids will be. [`AgencyDraft::validate`] (in `draft/validate.rs`)
//! turns it into an [`Agency`] whose invariants hold for the rest of the program, or lists every
//! problem with the path of the field that has it; [`Agency::to_draft`] writes it back.

use std::fmt;
use std::time::Duration;

pub use crate::draft::validate::{
    Declared, ListedTools, ValidationError, ValidationErrors, server_name_problem,
    validate_mcp_servers, validate_providers,
};
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
    /// What the agency may spend per period (every key, the playground, MQTT).
    pub budget: Option<crate::spend::Budget>,
    /// What one turn may cost before the manager is told to answer.
    pub max_turn_cost: Option<crate::price::Cost>,
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
            budget: None,
            max_turn_cost: None,
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
    /// Which of its calls wait for a person's approval.
    pub approve: crate::approval::ApprovalPolicy,
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
            max_turn_cost_usd: self
                .limits
                .max_turn_cost
                .map(|c| crate::price::format_dollars(c.0 / 1_000_000)),
            budget_usd: self
                .limits
                .budget
                .map(|b| crate::price::format_dollars(b.usd)),
            budget_period: self.limits.budget.map(|b| b.period.as_str().to_string()),
            providers: self.providers.iter().map(provider_draft).collect(),
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
                        observe_chats: a.memory.observe_chats.then_some(true),
                        instructions: (!text.is_empty()).then(|| text.join("\n\n")),
                        tools: a.tools.0.clone(),
                        approve: a.approve.tools.0.clone(),
                        approve_timeout_secs: a.approve.timeout_secs,
                        // Written whenever it is not the default, as `approve_timeout_secs`
                        // is: the draft is the stored form, so what validates must come back.
                        approve_on_timeout: (a.approve.on_timeout
                            != crate::approval::OnTimeout::Deny)
                            .then(|| a.approve.on_timeout.as_str().to_string()),
                        approve_edits: a.approve.edits.then_some(true),
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

/// A provider as an agency file writes it.
fn provider_draft(p: &ProviderSpec) -> ProviderDraft {
    ProviderDraft {
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
                let dollars = crate::price::format_dollars;
                let (input, output) = (dollars(price.input), dollars(price.output));
                (m.clone(), PriceDraft { input, output })
            })
            .collect(),
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
        // A policy's fields set without tools to approve yet come back too.
        let mut d = draft();
        d.agents[1].approve_on_timeout = Some("approve".into());
        d.agents[1].approve_timeout_secs = Some(30);
        let a = d.validate(AgencyId::new(), "local", &serves).unwrap();
        assert_eq!(a.to_draft().validate(a.id, "local", &serves).unwrap(), a);
    }
}

/// A published version of an agency: frozen when it was published, served by the agency's API
/// until a newer one is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub version: u32,
    pub published_at: chrono::DateTime<chrono::Utc>,
}
