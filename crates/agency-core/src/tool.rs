//! Tools: what an agent may call besides writing to other agents, and the calls and results
//! that go through its context.
//!
//! A tool is named `server/tool`: the MCP server that serves it (`builtin` for the tools served
//! in the process) and the tool's own name on that server. An agent lists what it may call
//! (`files/read_text_file`, or `files/*` for every tool of a server).

use std::collections::BTreeMap;

/// The server of the tools served in the process (`builtin/now`, `builtin/calculate`).
pub const BUILTIN_SERVER: &str = "builtin";

/// Longest result text kept in a context; the rest is cut, and the agent is told.
pub const MAX_RESULT_CHARS: usize = 100_000;

/// What a call that never got its result (the turn ended, the server stopped) is answered
/// with when its agent is called again.
pub const NO_RESULT: &str = "No result: the turn ended before the tool answered.";

/// A tool a model may call: its qualified name, what it does, and a JSON Schema of its
/// arguments (an object schema).
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// `server/tool`.
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// One call of a tool in an agent's reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolCall {
    /// Unique within the reply's turn; the result names it.
    pub id: String,
    /// `server/tool` (as the model wrote it: it may name a tool that does not exist).
    pub name: String,
    /// The arguments as the model wrote them: JSON text, perhaps malformed.
    pub arguments: String,
}

/// What a tool result message answers: the call's id and tool, and whether it is an error.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub is_error: bool,
}

/// Whether and how a model must call a tool: what an API client asks of the manager
/// (`tool_choice`), for the client's tools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// It must call some tool.
    Required,
    /// It must call this tool (its qualified name).
    Named(String),
}

/// How a model call may use its tools: the choice, and whether it may make several calls in
/// one reply (`None`: the provider's default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolUse {
    pub choice: ToolChoice,
    pub parallel: Option<bool>,
}

/// What a message carries besides its text: an agent's tool calls (on a reply), or the result of
/// one (on a tool result).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ToolPart {
    Calls(Vec<ToolCall>),
    Result(ToolResult),
}

impl ToolPart {
    pub fn calls(&self) -> &[ToolCall] {
        match self {
            ToolPart::Calls(calls) => calls,
            ToolPart::Result(_) => &[],
        }
    }

    pub fn result(&self) -> Option<&ToolResult> {
        match self {
            ToolPart::Result(r) => Some(r),
            ToolPart::Calls(_) => None,
        }
    }
}

/// A tool's progress while it runs (MCP's progress notifications).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolProgress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl ToolProgress {
    /// Percent done, when the total is known.
    pub fn percent(&self) -> Option<u8> {
        let total = self.total.filter(|t| *t > 0.0)?;
        Some(((self.progress / total) * 100.0).clamp(0.0, 100.0).round() as u8)
    }
}

/// An MCP server as declared: how to reach it, and the limits of its calls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct McpServer {
    pub transport: McpTransport,
    /// Longest a call may run (unset: [`DEFAULT_CALL_TIMEOUT_SECS`]).
    pub timeout_secs: Option<u64>,
    /// Calls in flight at once (unset: [`DEFAULT_MAX_CONCURRENCY`]).
    pub max_concurrency: Option<u32>,
}

/// Default longest call of a tool.
pub const DEFAULT_CALL_TIMEOUT_SECS: u64 = 60;
/// Default calls of one server in flight at once.
pub const DEFAULT_MAX_CONCURRENCY: u32 = 16;

impl McpServer {
    pub fn new(transport: McpTransport) -> Self {
        Self {
            transport,
            timeout_secs: None,
            max_concurrency: None,
        }
    }
}

/// How an MCP server is reached.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum McpTransport {
    /// The tools served in this process ([`BUILTIN_SERVER`]).
    Builtin,
    /// A process started from a command, spoken to over its stdin and stdout. Only the
    /// operator's configuration may declare one: it runs on the server's machine.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Variables set for the process (the operator's, so trusted).
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP at an address.
    Http {
        url: String,
        /// Header → the server variable holding its value (operator configuration only).
        headers_env: BTreeMap<String, String>,
    },
}

/// `server/tool` split at its first `/`; `None` when either part is empty or there is none.
pub fn split(qualified: &str) -> Option<(&str, &str)> {
    let (server, tool) = qualified.split_once('/')?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// What an agent may call, as its definition lists it: `server/tool`, or `server/*`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolGrants(pub Vec<String>);

impl ToolGrants {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `qualified` (`server/tool`) is one of them.
    pub fn allows(&self, qualified: &str) -> bool {
        let Some((server, tool)) = split(qualified) else {
            return false;
        };
        self.0.iter().any(|g| match split(g) {
            Some((s, "*")) => s == server,
            Some((s, t)) => s == server && t == tool,
            None => false,
        })
    }

    /// The servers named, each once, in the order first named.
    pub fn servers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for s in self.0.iter().filter_map(|g| split(g).map(|(s, _)| s)) {
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The error result of a call to `name`, which these grants do not allow: what the model
    /// reads instead of a result.
    pub fn refusal(&self, name: &str) -> String {
        let yours = if self.is_empty() {
            "you may call no tools".to_string()
        } else {
            format!("you may call {}", self.0.join(", "))
        };
        format!("Not run: `{name}` is not one of your tools ({yours}).")
    }

    /// The tools of `available` (qualified names) the agent may call, in their order.
    pub fn select<'a>(&self, available: &'a [Tool]) -> Vec<&'a Tool> {
        available.iter().filter(|t| self.allows(&t.name)).collect()
    }
}

/// `calls` with ids a context can link results to: an empty id, or one an earlier call of
/// the same reply has, is replaced by `call_{tag}_{i}`.
pub fn unique_ids(calls: Vec<ToolCall>, tag: impl std::fmt::Display) -> Vec<ToolCall> {
    let mut seen = std::collections::HashSet::new();
    calls
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            if c.id.trim().is_empty() || !seen.insert(c.id.clone()) {
                c.id = format!("call_{tag}_{i}");
                seen.insert(c.id.clone());
            }
            c
        })
        .collect()
}

/// A result's text as a context keeps it: at most [`MAX_RESULT_CHARS`] characters.
pub fn clip_result(text: String) -> String {
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        None => text,
        Some((end, _)) => format!(
            "{}\n[cut: the result was longer than {MAX_RESULT_CHARS} characters]",
            &text[..end]
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_name_tools_or_whole_servers() {
        let g = ToolGrants(vec![
            "files/read".into(),
            "builtin/*".into(),
            "files/list".into(),
        ]);
        assert!(g.allows("files/read"));
        assert!(!g.allows("files/write"));
        assert!(g.allows("builtin/now"));
        assert!(!g.allows("builtin"));
        assert!(!g.allows("other/read"));
        assert_eq!(g.servers(), ["files", "builtin"]);
    }

    #[test]
    fn names_split_at_the_first_slash() {
        assert_eq!(split("a/b/c"), Some(("a", "b/c")));
        assert_eq!(split("/b"), None);
        assert_eq!(split("a/"), None);
        assert_eq!(split("ab"), None);
    }

    #[test]
    fn progress_is_a_percentage_when_the_total_is_known() {
        let p = |progress, total| ToolProgress {
            progress,
            total,
            message: None,
        };
        assert_eq!(p(5.0, Some(10.0)).percent(), Some(50));
        assert_eq!(p(15.0, Some(10.0)).percent(), Some(100));
        assert_eq!(p(5.0, None).percent(), None);
    }

    #[test]
    fn long_results_are_cut_on_a_character() {
        let long = "é".repeat(MAX_RESULT_CHARS + 5);
        let cut = clip_result(long);
        assert!(cut.starts_with(&"é".repeat(MAX_RESULT_CHARS)));
        assert!(cut.ends_with("characters]"));
        assert_eq!(clip_result("short".into()), "short");
    }
}
