//! The tools agents call: which server a `server/tool` name means for an agency, what an agent
//! may call, and the calls themselves, all through one [`ToolHub`] per process.
//!
//! A name's server is, in order: `builtin` (served in this process), one of the agency's own
//! servers (HTTP only; an account's follow the network rule of its other URLs), one of the
//! operator's (`mcp_servers` in `--config`).

use agency_core::tool::{self, BUILTIN_SERVER};
use agency_core::{
    Agency, AgentId, Declared, McpServer, McpTransport, Tool, ToolCall, ToolGrants, ToolProgress,
    ValidationErrors,
};
use agency_tools::{ToolHub, ToolOutput};

use crate::providers::is_operator;

/// Where `server/tool` names are resolved: an agency's own servers (and whose they are), or
/// for a room without an agency its owner's, with none of its own.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    pub owner: &'a str,
    pub servers: &'a [(String, McpServer)],
}

impl<'a> From<&'a Agency> for Scope<'a> {
    fn from(agency: &'a Agency) -> Self {
        Self {
            owner: &agency.owner,
            servers: &agency.mcp_servers,
        }
    }
}

/// The MCP servers this server knows, and the connections to them.
pub struct Tools {
    hub: ToolHub,
    /// The operator's servers, by name.
    operator: Vec<(String, McpServer)>,
}

impl Tools {
    /// Tools served by `operator`'s servers and the built-in ones; accounts' servers on
    /// loopback and private networks only when `allow_private`.
    pub fn new(operator: Vec<(String, McpServer)>, allow_private: bool) -> Self {
        Self {
            hub: ToolHub::new(allow_private),
            operator,
        }
    }

    /// The operator's servers' names.
    pub fn operator_servers(&self) -> impl Iterator<Item = &str> {
        self.operator.iter().map(|(n, _)| n.as_str())
    }

    /// The server `name` means in `scope`, and who declared it.
    fn server(&self, scope: Scope<'_>, name: &str) -> Option<(McpServer, Declared)> {
        if name == BUILTIN_SERVER {
            return Some((McpServer::new(McpTransport::Builtin), Declared::Operator));
        }
        let own = if is_operator(scope.owner) {
            Declared::Operator
        } else {
            Declared::Account
        };
        scope
            .servers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| (s.clone(), own))
            .or_else(|| {
                self.operator
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, s)| (s.clone(), Declared::Operator))
            })
    }

    /// A server's tools, named `server/tool`.
    pub async fn listed(
        &self,
        scope: Scope<'_>,
        server: &str,
    ) -> Option<Result<Vec<Tool>, String>> {
        let (spec, declared) = self.server(scope, server)?;
        Some(
            self.hub
                .tools(&spec, declared)
                .await
                .map(|tools| {
                    tools
                        .into_iter()
                        .map(|t| Tool {
                            name: format!("{server}/{}", t.name),
                            ..t
                        })
                        .collect()
                })
                .map_err(|e| e.to_string()),
        )
    }

    /// What `agent` may call, as its model is told (see [`Tools::granted`]).
    pub async fn of_agent(&self, agency: &Agency, agent: AgentId) -> Vec<Tool> {
        match agency.agent(agent) {
            Some(a) => self.granted(agency.into(), &a.tools).await,
            None => Vec::new(),
        }
    }

    /// Every listed tool `grants` allow in `scope`. A server that cannot be listed now adds
    /// none (its calls, if the model makes some, say why).
    pub async fn granted(&self, scope: Scope<'_>, grants: &ToolGrants) -> Vec<Tool> {
        let mut out = Vec::new();
        for server in grants.servers() {
            match self.listed(scope, server).await {
                Some(Ok(tools)) => out.extend(tools.into_iter().filter(|t| grants.allows(&t.name))),
                Some(Err(e)) => {
                    tracing::warn!(server, error = %e, "an MCP server's tools could not be listed");
                }
                None => {}
            }
        }
        out
    }

    /// Runs `call` in `scope`. Never fails: what goes wrong is an error result.
    pub async fn call(
        &self,
        scope: Scope<'_>,
        call: &ToolCall,
        progress: Option<tokio::sync::mpsc::UnboundedSender<ToolProgress>>,
    ) -> ToolOutput {
        let Some((server, name)) = tool::split(&call.name) else {
            return ToolOutput {
                text: format!("`{}` is not a tool name (`server/tool`).", call.name),
                is_error: true,
            };
        };
        let Some((spec, declared)) = self.server(scope, server) else {
            return ToolOutput {
                text: format!("No MCP server is named `{server}`."),
                is_error: true,
            };
        };
        self.hub
            .call(&spec, declared, name, &call.arguments, progress)
            .await
    }

    /// Every server `scope` may use (`builtin`, its own, the operator's) with the tools it
    /// lists, or why they could not be listed: what an editor offers.
    pub async fn available(&self, scope: Scope<'_>) -> Vec<(String, Result<Vec<Tool>, String>)> {
        let mut names: Vec<String> = vec![BUILTIN_SERVER.to_string()];
        for n in scope
            .servers
            .iter()
            .map(|(n, _)| n)
            .chain(self.operator.iter().map(|(n, _)| n))
        {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        let listed = futures::future::join_all(names.iter().map(|n| self.listed(scope, n))).await;
        names
            .into_iter()
            .zip(listed)
            .filter_map(|(n, l)| Some((n, l?)))
            .collect()
    }

    /// The agency's tools checked against what their servers list (see
    /// [`Agency::check_tools`]).
    pub async fn check(&self, agency: &Agency) -> Result<(), ValidationErrors> {
        let mut listed = Vec::new();
        for server in agency.tool_servers() {
            let tools = self.listed(agency.into(), server).await.map(|r| {
                r.map(|tools| {
                    tools
                        .into_iter()
                        .filter_map(|t| tool::split(&t.name).map(|(_, n)| n.to_string()))
                        .collect::<Vec<_>>()
                })
            });
            listed.push((server.to_string(), tools));
        }
        agency.check_tools(&|server| {
            listed
                .iter()
                .find(|(s, _)| s == server)
                .and_then(|(_, t)| t.clone())
        })
    }
}
