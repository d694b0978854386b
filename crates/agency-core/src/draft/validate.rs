//! [`AgencyDraft::validate`]: a draft as a person wrote it → the domain's [`Agency`], whose
//! invariants hold for the rest of the program, or every problem with the path of its field.
//! Also the drafts of the parts a server's configuration declares on their own (providers, MCP
//! servers), and the agents' tools checked against what their servers list.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use crate::agency::{
    Agency, Agent, Block, Limits, ModelRef, Party, Protocol, ProviderKind, ProviderSpec, Recipient,
    Rule, RuleCall, Sampling,
};
use crate::draft::{AgencyDraft, AgentDraft, McpServerDraft, ProviderDraft, RuleDraft};
use crate::ids::{AgencyId, AgentId};
use crate::tool::{McpServer, McpTransport, ToolGrants};

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
        let (budget, max_turn_cost) = self.check_spend(&mut p);
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
                let approve = approve_of(i, a, &tools, &mut p);
                let blocks = blocks_of(i, a, ids[i], &by_name, &self.agents, &tools, &mut p);
                let mut agent = agent_of(a, ids[i], blocks, tools);
                agent.approve = approve;
                agent
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
                    budget,
                    max_turn_cost,
                },
                providers,
                mcp_servers,
                agents,
                version: None,
            }),
            _ => Err(ValidationErrors(p.0)),
        }
    }

    /// The agency's budget and its turns' cost cap.
    fn check_spend(
        &self,
        p: &mut Problems,
    ) -> (Option<crate::spend::Budget>, Option<crate::price::Cost>) {
        let mut dollars = |field: &str, text: &Option<String>| {
            let text = text.as_deref()?;
            match crate::spend::parse_budget(text) {
                Ok(micro) => Some(micro),
                Err(e) => {
                    p.add(field, e.to_string());
                    None
                }
            }
        };
        let budget = dollars("budget_usd", &self.budget_usd);
        let cap = dollars("max_turn_cost_usd", &self.max_turn_cost_usd);
        let period = match self.budget_period.as_deref() {
            None => crate::spend::Period::default(),
            Some(text) => crate::spend::Period::parse(text).unwrap_or_else(|| {
                p.add(
                    "budget_period",
                    format!("`{text}` is not a period: use day, week, month or total"),
                );
                crate::spend::Period::default()
            }),
        };
        if self.budget_period.is_some() && self.budget_usd.is_none() {
            p.add(
                "budget_period",
                "is the period of `budget_usd`, which is not set",
            );
        }
        let budget = budget.map(|usd| crate::spend::Budget { usd, period });
        let cap = cap.map(|micro| crate::price::Cost(micro.saturating_mul(1_000_000)));
        (budget, cap)
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
            observe_chats: a.observe_chats.unwrap_or(false),
        },
        tools,
        approve: crate::approval::ApprovalPolicy::default(),
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
            (Some(url), None) => http_transport(&path, d, url, operator, p),
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

/// A `url` server's transport: an http(s) address, with headers read from server variables only
/// for the operator.
fn http_transport(
    path: &str,
    d: &McpServerDraft,
    url: &str,
    operator: bool,
    p: &mut Problems,
) -> Option<McpTransport> {
    let u = url.trim();
    let scheme_ok = ["http://", "https://"]
        .iter()
        .any(|s| u.get(..s.len()).is_some_and(|x| x.eq_ignore_ascii_case(s)) && u.len() > s.len());
    if !scheme_ok {
        p.add(
            format!("{path}.url"),
            format!("`{u}` is not an http:// or https:// address"),
        );
    }
    if !d.args.is_empty() || !d.env.is_empty() {
        p.add(path, "`args` and `env` are for a `command` (stdio) server");
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

mod approve;
use approve::approve_of;
