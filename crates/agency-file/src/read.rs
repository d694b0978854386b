//! Reading: YAML text → marked-yaml nodes → [`AgencyDraft`] plus field positions.
//!
//! The nodes are walked by hand rather than through serde: marked-yaml's serde errors carry no
//! position for unknown fields, missing fields or values of the wrong type, it stops at the first
//! problem, and it reads `null` into an `Option<String>` as `Some("null")`. The fields each
//! mapping may hold are the draft types' own (`fields_of`), and each reader builds its type
//! whole (no `..Default::default()`), so a field added to a type is known here at once and does
//! not compile until it is read.

use std::collections::HashMap;

use agency_core::draft::fields_of;
use agency_core::{AgencyDraft, AgentDraft, McpServerDraft, PriceDraft, ProviderDraft, RuleDraft};
use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode};
use marked_yaml::{LoaderOptions, Node, Span};

use crate::{Pos, Problem};

mod document;
use document::{bounds, load_problem, second_document, start, top_level_problem};

/// The fields of a server configuration file (not a type of its own: two of an agency's).
const CONFIG_FIELDS: &[&str] = &["providers", "mcp_servers"];

/// The protocol of an agency whose file names none.
const DEFAULT_PROTOCOL: &str = "json";

/// What was read, and where each field stood; or every problem found.
type Read<T> = Result<(T, HashMap<String, Pos>), Vec<Problem>>;

pub(crate) fn parse(text: &str) -> Read<AgencyDraft> {
    read(text, Reader::agency)
}

/// A server configuration file: `providers:` and `mcp_servers:` as in an agency file.
pub(crate) fn parse_config(text: &str) -> Read<(Vec<ProviderDraft>, Vec<McpServerDraft>)> {
    read(text, |reader, root| {
        let f = Fields {
            map: root,
            path: "",
            pos: node_pos(root),
        };
        reader.unknown_fields(&f, CONFIG_FIELDS, "a server configuration");
        (reader.providers(&f), reader.mcp_servers(&f))
    })
}

fn read<T>(text: &str, what: impl FnOnce(&mut Reader, &MarkedMappingNode) -> T) -> Read<T> {
    // Editors on Windows may start a file with a byte order mark; it is not part of line 1.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    bounds(text).map_err(|p| vec![p])?;
    let options = LoaderOptions::default()
        // Tells quoted scalars from plain ones, so that `"null"` is a string and `null` is not.
        .prevent_coercion(true)
        // marked-yaml keeps the last of two equal keys by default, silently.
        .error_on_duplicate_keys(true);
    let root = marked_yaml::parse_yaml_with_options(0, text, options)
        .map_err(|e| vec![load_problem(&e)])?;
    let Some(root) = root.as_mapping() else {
        return Err(vec![top_level_problem(start(root.span()))]);
    };
    let mut reader = Reader::default();
    if let Some(line) = second_document(text, node_pos(root).map_or(1, |p| p.0)) {
        reader.problems.push(Problem {
            line: Some(line),
            column: Some(1),
            path: String::new(),
            message: "a second YAML document starts here (after `---` or `...`); a file holds \
                      one document: remove it or move it to a file of its own"
                .into(),
        });
    }
    let value = what(&mut reader, root);
    if reader.problems.is_empty() {
        Ok((value, reader.positions))
    } else {
        Err(reader.problems)
    }
}

/// An agency file larger than this is refused before it is read.
pub const MAX_BYTES: usize = 1 << 20;
/// Lists and mappings nested deeper than this are refused before anything recursive reads
/// them: marked-yaml's loader recurses once per level, and a few thousand levels of `- - - …`
/// (two bytes each) overflow a thread's stack. A real agency file nests five deep.
pub const MAX_DEPTH: usize = 64;

/// Where a node starts. A block mapping's own mark is its first `:`, so its first key is used
/// when that comes earlier.
fn node_pos(node: &impl Spanned) -> Option<Pos> {
    let own = start(node.span_of());
    match (own, node.first_key().and_then(|k| start(k.span()))) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Nodes that have a span, and maybe keys.
trait Spanned {
    fn span_of(&self) -> &Span;
    fn first_key(&self) -> Option<&MarkedScalarNode>;
}

impl Spanned for Node {
    fn span_of(&self) -> &Span {
        self.span()
    }
    fn first_key(&self) -> Option<&MarkedScalarNode> {
        self.as_mapping().and_then(|m| m.keys().next())
    }
}

impl Spanned for MarkedMappingNode {
    fn span_of(&self) -> &Span {
        self.span()
    }
    fn first_key(&self) -> Option<&MarkedScalarNode> {
        self.keys().next()
    }
}

/// A plain `null`, `~` or nothing at all: the field is there but has no value.
fn is_null(s: &MarkedScalarNode) -> bool {
    s.may_coerce() && matches!(s.as_str(), "" | "~" | "null" | "Null" | "NULL")
}

/// Where a field's value stands; an empty value is marked at the next token, so the key is used.
fn value_pos(key: &MarkedScalarNode, value: &Node) -> Option<Pos> {
    let key_pos = start(key.span());
    match value.as_scalar() {
        Some(s) if s.may_coerce() && s.as_str().is_empty() => key_pos,
        _ => node_pos(value).or(key_pos),
    }
}

/// How a value that is not what was expected is described.
fn found(node: &Node) -> String {
    match node {
        Node::Scalar(s) if is_null(s) => "nothing".into(),
        Node::Scalar(s) => {
            let text: String = s.as_str().chars().take(40).collect();
            let more = if text.len() < s.as_str().len() {
                "…"
            } else {
                ""
            };
            format!("`{text}{more}`")
        }
        Node::Sequence(_) => "a list".into(),
        Node::Mapping(_) => "a mapping".into(),
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[derive(Default)]
struct Reader {
    problems: Vec<Problem>,
    positions: HashMap<String, Pos>,
}

/// One mapping being read: its path and position, for the fields in it.
struct Fields<'a> {
    map: &'a MarkedMappingNode,
    path: &'a str,
    pos: Option<Pos>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<(&'a MarkedScalarNode, &'a Node)> {
        self.map.iter().find(|(k, _)| k.as_str() == key)
    }
}

impl Reader {
    fn problem(&mut self, pos: Option<Pos>, path: String, message: String) {
        self.problems.push(Problem {
            line: pos.map(|p| p.0),
            column: pos.map(|p| p.1),
            path,
            message,
        });
    }

    /// Reports the keys that are not fields; `what` names the thing (`an agency`).
    fn unknown_fields(&mut self, f: &Fields<'_>, known: &[&str], what: &str) {
        for key in f.map.keys() {
            let name = key.as_str();
            if known.contains(&name) {
                continue;
            }
            let hint = closest(name, known)
                .map(|k| format!(" did you mean `{k}`?"))
                .unwrap_or_default();
            self.problem(
                start(key.span()),
                child(f.path, name),
                format!(
                    "unknown field `{name}` in {what};{hint} the fields are {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }

    /// A field's value, its position recorded; `None` when absent or null.
    fn field<'a>(&mut self, f: &Fields<'a>, key: &str) -> Option<(String, &'a Node)> {
        let (k, v) = f.get(key)?;
        let path = child(f.path, key);
        if let Some(pos) = value_pos(k, v) {
            self.positions.insert(path.clone(), pos);
        }
        match v {
            Node::Scalar(s) if is_null(s) => None,
            _ => Some((path, v)),
        }
    }

    fn missing(&mut self, f: &Fields<'_>, key: &str, what: &str, example: &str) {
        let message = match f.get(key) {
            Some(_) => format!("`{key}` needs a value, e.g. `{key}: {example}`"),
            None => format!("{what} needs a `{key}` field, e.g. `{key}: {example}`"),
        };
        let pos = f.get(key).and_then(|(k, v)| value_pos(k, v)).or(f.pos);
        self.problem(pos, child(f.path, key), message);
    }

    fn optional_string(&mut self, f: &Fields<'_>, key: &str) -> Option<String> {
        let (path, node) = self.field(f, key)?;
        match node {
            Node::Scalar(s) => Some(s.as_str().to_string()),
            other => {
                self.problem(
                    node_pos(other),
                    path,
                    format!("must be text, found {}", found(other)),
                );
                None
            }
        }
    }

    fn required_string(&mut self, f: &Fields<'_>, key: &str, what: &str, example: &str) -> String {
        if f.get(key)
            .is_some_and(|(_, v)| !matches!(v, Node::Scalar(s) if is_null(s)))
        {
            self.optional_string(f, key).unwrap_or_default()
        } else {
            self.field(f, key);
            self.missing(f, key, what, example);
            String::new()
        }
    }

    fn number<T: Whole>(&mut self, f: &Fields<'_>, key: &str) -> Option<T> {
        let (path, node) = self.field(f, key)?;
        let text = match node {
            Node::Scalar(s) => s.as_str().trim(),
            other => {
                self.problem(
                    node_pos(other),
                    path,
                    format!("must be a whole number, found {}", found(other)),
                );
                return None;
            }
        };
        if let Ok(n) = text.parse::<T>() {
            return Some(n);
        }
        let digits = text.strip_prefix('+').unwrap_or(text);
        let message = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            format!("{text} is too large (at most {})", T::MAX)
        } else {
            format!("must be a whole number, found {}", found(node))
        };
        self.problem(node_pos(node), path, message);
        None
    }

    /// An amount of dollars, kept as written (validation reads it exactly).
    fn dollars(&mut self, f: &Fields<'_>, key: &str) -> Option<String> {
        let (path, node) = self.field(f, key)?;
        match node {
            Node::Scalar(s) => Some(s.as_str().to_string()),
            other => {
                let m = format!(
                    "must be an amount of dollars such as 5.00, found {}",
                    found(other)
                );
                self.problem(node_pos(other), path, m);
                None
            }
        }
    }

    fn boolean(&mut self, f: &Fields<'_>, key: &str) -> Option<bool> {
        let (path, node) = self.field(f, key)?;
        let parsed = match node {
            Node::Scalar(s) => match s.as_str().trim() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            _ => None,
        };
        if parsed.is_none() {
            let m = format!("must be true or false, found {}", found(node));
            self.problem(node_pos(node), path, m);
        }
        parsed
    }

    fn decimal(&mut self, f: &Fields<'_>, key: &str) -> Option<f64> {
        let (path, node) = self.field(f, key)?;
        let parsed = match node {
            Node::Scalar(s) => s
                .as_str()
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite()),
            _ => None,
        };
        if parsed.is_none() {
            self.problem(
                node_pos(node),
                path,
                format!("must be a number, found {}", found(node)),
            );
        }
        parsed
    }

    /// The entries of a mapping field (`key: { name: value, ... }`): each name, its path and
    /// value, with its position recorded. A field that is not a mapping is a problem.
    fn named<'a>(
        &mut self,
        f: &Fields<'a>,
        key: &str,
        what: &str,
        example: &str,
    ) -> Vec<(String, String, &'a Node)> {
        let Some((path, node)) = self.field(f, key) else {
            return Vec::new();
        };
        let Node::Mapping(map) = node else {
            self.problem(
                node_pos(node),
                path,
                format!("must map {what}, e.g. {example}, found {}", found(node)),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, value) in map.iter() {
            let name = k.as_str().to_string();
            let item_path = format!("{path}.{name}");
            if let Some(pos) = value_pos(k, value) {
                self.positions.insert(item_path.clone(), pos);
            }
            out.push((name, item_path, value));
        }
        out
    }

    /// `prices:` — a mapping of model names to dollars per million tokens,
    /// `{ input: 2.50, output: 10 }`, kept as written (validation reads them exactly).
    fn prices(&mut self, f: &Fields<'_>) -> Vec<(String, PriceDraft)> {
        let mut out = Vec::new();
        let example = "`prices: { gpt-4o: { input: 2.50, output: 10 } }`";
        for (model, item_path, value) in self.named(
            f,
            "prices",
            "model names to prices in dollars per million tokens",
            example,
        ) {
            let Some(item) = self.item(&item_path, value, "a price") else {
                continue;
            };
            self.unknown_fields(&item, fields_of::<PriceDraft>(), "a price");
            let mut dollars = |key: &str| -> String {
                let Some((path, node)) = self.field(&item, key) else {
                    self.missing(&item, key, "a price", "2.50");
                    return String::new();
                };
                match node {
                    Node::Scalar(s) => s.as_str().to_string(),
                    other => {
                        let m =
                            format!("must be dollars per million tokens, found {}", found(other));
                        self.problem(node_pos(other), path, m);
                        String::new()
                    }
                }
            };
            let (input, output) = (dollars("input"), dollars("output"));
            out.push((model, PriceDraft { input, output }));
        }
        out
    }

    /// `providers:` — a mapping of provider names to their settings.
    fn providers(&mut self, f: &Fields<'_>) -> Vec<ProviderDraft> {
        let mut out = Vec::new();
        let example =
            "`providers: { local: { kind: openai, base_url: \"http://localhost:11434/v1\" } }`";
        for (name, item_path, value) in
            self.named(f, "providers", "provider names to settings", example)
        {
            let Some(item) = self.item(&item_path, value, "a provider") else {
                continue;
            };
            self.unknown_fields(&item, fields_of::<ProviderDraft>(), "a provider");
            let kind = self.required_string(&item, "kind", "a provider", "openai");
            let base_url = self.optional_string(&item, "base_url");
            let api_key_env = self.optional_string(&item, "api_key_env");
            let max_concurrency = self.number(&item, "max_concurrency");
            let requests_per_minute = self.number(&item, "requests_per_minute");
            let prices = self.prices(&item);
            out.push(ProviderDraft {
                name,
                kind,
                base_url,
                api_key_env,
                max_concurrency,
                requests_per_minute,
                prices,
            });
        }
        out
    }

    /// `mcp_servers:` — a mapping of server names to a `url` or a `command`.
    fn mcp_servers(&mut self, f: &Fields<'_>) -> Vec<McpServerDraft> {
        let mut out = Vec::new();
        let example = "`mcp_servers: { search: { url: \"https://mcp.example.com/mcp\" } }`";
        for (name, item_path, value) in
            self.named(f, "mcp_servers", "server names to settings", example)
        {
            let Some(item) = self.item(&item_path, value, "an MCP server") else {
                continue;
            };
            self.unknown_fields(&item, fields_of::<McpServerDraft>(), "an MCP server");
            out.push(McpServerDraft {
                name,
                url: self.optional_string(&item, "url"),
                command: self.optional_string(&item, "command"),
                args: self.strings(&item, "args", "arguments"),
                env: self.string_map(&item, "env", "variable names to values"),
                headers_env: self.string_map(
                    &item,
                    "headers_env",
                    "header names to the server variables holding their values",
                ),
                timeout_secs: self.number(&item, "timeout_secs"),
                max_concurrency: self.number(&item, "max_concurrency"),
            });
        }
        out
    }

    /// A list of strings (`[a, b]`); empty when absent.
    fn strings(&mut self, f: &Fields<'_>, key: &str, of: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (path, node) in self.list(f, key, of) {
            match node {
                Node::Scalar(s) if !is_null(s) => out.push(s.as_str().to_string()),
                other => self.problem(
                    node_pos(other),
                    path,
                    format!("must be text, found {}", found(other)),
                ),
            }
        }
        out
    }

    /// A mapping of names to text values.
    fn string_map(&mut self, f: &Fields<'_>, key: &str, what: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, path, node) in self.named(f, key, what, "`{ NAME: value }`") {
            match node {
                Node::Scalar(s) if !is_null(s) => out.push((name, s.as_str().to_string())),
                other => self.problem(
                    node_pos(other),
                    path,
                    format!("must be text, found {}", found(other)),
                ),
            }
        }
        out
    }

    /// Any value, as JSON: plain scalars that read as `null`, `true`, `false` or a number are
    /// those; every other scalar (and every quoted one) is text.
    fn json(&mut self, f: &Fields<'_>, key: &str) -> Option<serde_json::Value> {
        let (_, node) = self.field(f, key)?;
        Some(to_json(node))
    }

    /// A list field's items with their paths; empty when absent or null.
    fn list<'a>(&mut self, f: &Fields<'a>, key: &str, of: &str) -> Vec<(String, &'a Node)> {
        let Some((path, node)) = self.field(f, key) else {
            return Vec::new();
        };
        let Node::Sequence(items) = node else {
            self.problem(
                node_pos(node),
                path,
                format!(
                    "must be a list of {of} (one `- ` item each), found {}",
                    found(node)
                ),
            );
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let item_path = format!("{path}[{i}]");
                if let Some(pos) = node_pos(item) {
                    self.positions.insert(item_path.clone(), pos);
                }
                (item_path, item)
            })
            .collect()
    }

    /// The fields of a list item that must be a mapping.
    fn item<'a>(&mut self, path: &'a str, node: &'a Node, what: &str) -> Option<Fields<'a>> {
        match node {
            Node::Mapping(map) => Some(Fields {
                map,
                path,
                pos: node_pos(node),
            }),
            other => {
                self.problem(
                    node_pos(other),
                    path.to_string(),
                    format!(
                        "expected {what} (a mapping of `field: value`), found {}",
                        found(other)
                    ),
                );
                None
            }
        }
    }

    fn agency(&mut self, root: &MarkedMappingNode) -> AgencyDraft {
        let f = Fields {
            map: root,
            path: "",
            pos: node_pos(root),
        };
        self.unknown_fields(&f, fields_of::<AgencyDraft>(), "an agency");
        let name = self.required_string(&f, "name", "an agency", "studio");
        let handle = self.optional_string(&f, "handle");
        let protocol = self
            .optional_string(&f, "protocol")
            .unwrap_or_else(|| DEFAULT_PROTOCOL.to_string());
        let manager = self.required_string(&f, "manager", "an agency", "manager");
        let max_hops = self.number(&f, "max_hops");
        let turn_deadline_secs = self.number(&f, "turn_deadline_secs");
        let max_turn_cost_usd = self.dollars(&f, "max_turn_cost_usd");
        let budget_usd = self.dollars(&f, "budget_usd");
        let budget_period = self.optional_string(&f, "budget_period");
        let providers = self.providers(&f);
        let mcp_servers = self.mcp_servers(&f);
        if f.get("agents").is_none() {
            self.missing(
                &f,
                "agents",
                "an agency",
                "[{ name: manager, model: builtin/rules }]",
            );
        }
        let agents = self
            .list(&f, "agents", "agents")
            .into_iter()
            .filter_map(|(path, node)| {
                let item = self.item(&path, node, "an agent")?;
                Some(self.agent(&item))
            })
            .collect();
        AgencyDraft {
            name,
            handle,
            protocol,
            manager,
            max_hops,
            turn_deadline_secs,
            max_turn_cost_usd,
            budget_usd,
            budget_period,
            providers,
            mcp_servers,
            agents,
        }
    }

    fn agent(&mut self, f: &Fields<'_>) -> AgentDraft {
        self.unknown_fields(f, fields_of::<AgentDraft>(), "an agent");
        let id = self.number(f, "id");
        let name = self.required_string(f, "name", "an agent", "programmer");
        let handle = self.optional_string(f, "handle");
        let role = self.optional_string(f, "role");
        let model = self.required_string(f, "model", "an agent", "builtin/rules");
        let temperature = self.decimal(f, "temperature");
        let top_p = self.decimal(f, "top_p");
        let max_tokens = self.number(f, "max_tokens");
        let reflection_threshold = self.decimal(f, "reflection_threshold");
        let reflection_half_life_hours = self.decimal(f, "reflection_half_life_hours");
        let observe_chats = self.boolean(f, "observe_chats");
        let instructions = self.optional_string(f, "instructions");
        let tools = self.strings(f, "tools", "tools (`server/tool`)");
        let approve = self.strings(f, "approve", "tools (`server/tool`)");
        let approve_timeout_secs = self.number(f, "approve_timeout_secs");
        let approve_on_timeout = self.optional_string(f, "approve_on_timeout");
        let approve_edits = self.boolean(f, "approve_edits");
        let rules = self
            .list(f, "rules", "rules")
            .into_iter()
            .filter_map(|(path, node)| {
                let item = self.item(&path, node, "a rule")?;
                Some(self.rule(&item))
            })
            .collect();
        AgentDraft {
            id,
            name,
            handle,
            role,
            model,
            temperature,
            top_p,
            max_tokens,
            instructions,
            rules,
            reflection_threshold,
            reflection_half_life_hours,
            observe_chats,
            tools,
            approve,
            approve_timeout_secs,
            approve_on_timeout,
            approve_edits,
        }
    }

    fn rule(&mut self, f: &Fields<'_>) -> RuleDraft {
        self.unknown_fields(f, fields_of::<RuleDraft>(), "a rule");
        let when = self.required_string(f, "when", "a rule", "user");
        let action = self.required_string(f, "do", "a rule", "\"Reply to: {{message}}\"");
        let call = self.optional_string(f, "call");
        let with = self.json(f, "with");
        if f.get("send_to").is_none() {
            self.missing(f, "send_to", "a rule", "user");
        }
        let send_to = match self.field(f, "send_to") {
            None => Vec::new(),
            Some((_, Node::Scalar(s))) => vec![s.as_str().to_string()],
            Some((path, Node::Sequence(items))) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item {
                    Node::Scalar(s) if !is_null(s) => Some(s.as_str().to_string()),
                    other => {
                        self.problem(
                            node_pos(other),
                            format!("{path}[{i}]"),
                            format!(
                                "each recipient must be an agent's name or `user`, found {}",
                                found(other)
                            ),
                        );
                        None
                    }
                })
                .collect(),
            Some((path, other)) => {
                self.problem(
                    node_pos(other),
                    path,
                    format!(
                        "must be a name or a list of names (`[a, b]`), found {}",
                        found(other)
                    ),
                );
                Vec::new()
            }
        };
        RuleDraft {
            when,
            action,
            send_to,
            call,
            with,
        }
    }
}

fn to_json(node: &Node) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Node::Scalar(s) if !s.may_coerce() => Value::String(s.as_str().to_string()),
        Node::Scalar(s) if is_null(s) => Value::Null,
        Node::Scalar(s) => match s.as_str() {
            "true" | "True" | "TRUE" => Value::Bool(true),
            "false" | "False" | "FALSE" => Value::Bool(false),
            t => t
                .parse::<i64>()
                .map(Value::from)
                .ok()
                .or_else(|| {
                    t.parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite() && t.chars().any(|c| c.is_ascii_digit()))
                        .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                })
                .unwrap_or_else(|| Value::String(t.to_string())),
        },
        Node::Sequence(items) => Value::Array(items.iter().map(to_json).collect()),
        Node::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.as_str().to_string(), to_json(v)))
                .collect(),
        ),
    }
}

/// The whole-number types of fields.
trait Whole: std::str::FromStr + std::fmt::Display {
    const MAX: Self;
}

impl Whole for u32 {
    const MAX: Self = u32::MAX;
}

impl Whole for u64 {
    const MAX: Self = u64::MAX;
}

/// The known field a mistyped one most likely meant: same letters ignoring case, `-` for `_`,
/// or at most two edits away.
fn closest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', ' '], "_");
    let n = norm(name);
    known
        .iter()
        .map(|k| (edits(&n, &norm(k)), *k))
        .filter(|(d, k)| *d <= 2.min(k.len() / 2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Edit distance in characters, a swap of two neighbours counting as one edit (optimal string
/// alignment).
fn edits(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut best = (d[(i - 1) * w + j] + 1)
                    .min(d[i * w + j - 1] + 1)
                    .min(d[(i - 1) * w + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(d[(i - 2) * w + j - 2] + 1);
                }
                best
            };
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn mistyped_fields_find_their_match() {
        assert_eq!(closest("sendto", fields_of::<RuleDraft>()), Some("send_to"));
        assert_eq!(
            closest("Send-To", fields_of::<RuleDraft>()),
            Some("send_to")
        );
        assert_eq!(closest("modle", fields_of::<AgentDraft>()), Some("model"));
        assert_eq!(closest("colour", fields_of::<AgentDraft>()), None);
        assert_eq!(closest("x", fields_of::<RuleDraft>()), None);
    }

    #[test]
    fn only_content_after_a_marker_is_a_second_document() {
        assert_eq!(second_document("a: 1\n", 1), None);
        assert_eq!(second_document("---\na: 1\n...\n# done\n", 2), None);
        assert_eq!(second_document("a: 1\n---\nb: 2\n", 1), Some(3));
        assert_eq!(second_document("a: 1\n--- b\n", 1), Some(2));
        assert_eq!(second_document("a: |\n  ---\n", 1), None);
    }
}
