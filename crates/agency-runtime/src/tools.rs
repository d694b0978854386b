//! The tools agents call: which server a `server/tool` name means for an agency, what an agent
//! may call, and the calls themselves, all through one [`ToolHub`] per process.
//!
//! A name's server is, in order: `builtin` (served in this process), one of the agency's own
//! servers (HTTP only; an account's follow the network rule of its other URLs), one of the
//! operator's (`mcp_servers` in `--config`).

use std::collections::HashMap;
use std::sync::Arc;

use agency_core::tool::{self, BUILTIN_SERVER};
use agency_core::{
    Agency, AgentId, Declared, McpServer, McpTransport, Tool, ToolCall, ToolGrants, ToolProgress,
    ValidationErrors,
};
use agency_store::Store;
use agency_tools::{Credentials, Declarer, ToolHub, ToolOutput};
use secrecy::{ExposeSecret, SecretString};

use crate::RuntimeError;
use crate::providers::Settings;
use crate::providers::is_operator;
use crate::secrets::{self, CREDENTIALS_PREFIX, MasterKey, MasterKeySource, credentials_name};

fn declarer(declared: Declared, credentials: Option<&Credentials>) -> Declarer<'_> {
    match declared {
        Declared::Operator => Declarer::Operator,
        Declared::Account => Declarer::Account(credentials),
    }
}

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
    /// Where accounts' credentials for their servers are kept, sealed (set as the runtime is
    /// assembled; without it, accounts' servers are called without any).
    secrets: Option<(Arc<dyn Store>, MasterKeySource)>,
    /// Credentials as opened, by owner and server (none stored: `None`), and when: listings
    /// and calls — every model call of an agent with such tools — read no row and open no
    /// seal. Forgotten when this process stores or deletes them, read again after
    /// [`CREDENTIALS_FRESH`] (another process may have).
    opened: std::sync::Mutex<HashMap<(String, String), Opened>>,
}

type Opened = (std::time::Instant, Option<Credentials>);

/// How long opened credentials are used before they are read again.
const CREDENTIALS_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// The bounds of an account's credentials for one server.
pub use agency_tools::{MAX_HEADERS, MAX_NAME_BYTES, MAX_VALUE_BYTES};

impl Tools {
    /// Tools served by `operator`'s servers and the built-in ones; accounts' servers on
    /// loopback and private networks only when `allow_private`.
    pub fn new(operator: Vec<(String, McpServer)>, allow_private: bool) -> Self {
        Self {
            hub: ToolHub::new(allow_private),
            operator,
            secrets: None,
            opened: Default::default(),
        }
    }

    /// How long an MCP server's connection is kept unused before it is closed (its process
    /// stopped); zero keeps it. [`agency_tools::DEFAULT_IDLE`] unless set.
    pub fn set_idle(&self, idle: std::time::Duration) {
        self.hub.set_idle(idle);
    }

    /// Closes the MCP servers' connections (their processes stopped), for a process about to
    /// exit.
    pub async fn close(&self) {
        self.hub.close().await;
    }

    /// Where accounts' sealed credentials are read from.
    pub(crate) fn attach(&mut self, store: Arc<dyn Store>, master: Option<MasterKeySource>) {
        self.secrets = master.map(|m| (store, m));
    }

    /// What `scope`'s owner stored for its HTTP server `name` (declared by an account), opened.
    async fn credentials(
        &self,
        scope: Scope<'_>,
        name: &str,
        spec: &McpServer,
        declared: Declared,
    ) -> Result<Option<Credentials>, String> {
        if declared != Declared::Account || !matches!(spec.transport, McpTransport::Http { .. }) {
            return Ok(None);
        }
        let Some((store, master)) = &self.secrets else {
            return Ok(None);
        };
        let key = (scope.owner.to_string(), name.to_string());
        if let Some((at, known)) = self.opened_credentials().get(&key)
            && at.elapsed() < CREDENTIALS_FRESH
        {
            return Ok(known.clone());
        }
        let opened = secrets::provider_key(&**store, master, scope.owner, &credentials_name(name))
            .await
            .map_err(|e| format!("the credentials stored for `{name}` cannot be used: {e}"))?;
        let credentials = match opened {
            None => None,
            Some(json) => serde_json::from_str::<Vec<(String, String)>>(json.expose_secret())
                .map_err(|_| {
                    format!("the credentials stored for `{name}` are damaged: store them again")
                })
                .and_then(|pairs: Vec<(String, String)>| Credentials::new(&pairs))
                .map(Some)?,
        };
        self.opened_credentials()
            .insert(key, (std::time::Instant::now(), credentials.clone()));
        Ok(credentials)
    }

    fn opened_credentials(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Opened>> {
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets `owner`'s credentials for `server` as opened: the next call reads them again.
    fn forget_credentials(&self, owner: &str, server: &str) {
        self.opened_credentials()
            .remove(&(owner.to_string(), server.to_string()));
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
        let credentials = match self.credentials(scope, server, &spec, declared).await {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        Some(
            self.hub
                .tools(&spec, declarer(declared, credentials.as_ref()))
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
        let credentials = match self.credentials(scope, server, &spec, declared).await {
            Ok(c) => c,
            Err(text) => {
                return ToolOutput {
                    text,
                    is_error: true,
                };
            }
        };
        self.hub
            .call(
                &spec,
                declarer(declared, credentials.as_ref()),
                name,
                &call.arguments,
                progress,
            )
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

/// Credentials an account stored for one of its MCP servers: what may be shown of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCredentials {
    pub server: String,
    /// The headers' names (lower case); their values are never shown again.
    pub headers: Vec<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

fn stored(sealed: &agency_store::SealedKey) -> Option<StoredCredentials> {
    Some(StoredCredentials {
        server: sealed
            .provider
            .strip_prefix(CREDENTIALS_PREFIX)?
            .to_string(),
        headers: sealed
            .suffix
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect(),
        created_at: sealed.created_at,
    })
}

impl Settings<'_> {
    /// Stores (or replaces) the headers `owner`'s agencies send to their HTTP MCP server named
    /// `server`, sealed like provider keys; only the headers' names are ever shown again.
    pub async fn put_mcp_credentials(
        &self,
        owner: &str,
        server: &str,
        headers: Vec<(String, SecretString)>,
    ) -> Result<StoredCredentials, RuntimeError> {
        if let Some(problem) = agency_core::agency::server_name_problem(server) {
            return Err(RuntimeError::field("server", problem));
        }
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.clone(), v.expose_secret().to_string()))
            .collect();
        let checked = Credentials::new(&pairs).map_err(|e| RuntimeError::field("headers", e))?;
        let source = self.rt.master_key.as_ref().ok_or_else(|| {
            RuntimeError::Invalid("this server has no master key to seal credentials with".into())
        })?;
        let json =
            SecretString::from(serde_json::to_string(&pairs).map_err(|e| {
                RuntimeError::Invalid(format!("cannot write the credentials: {e}"))
            })?);
        let master = MasterKey::load_or_create(source)?;
        let mut sealed = master.seal(owner, &credentials_name(server), &json)?;
        // What a list shows: the headers' names, never a character of their values.
        sealed.suffix = checked.names().collect::<Vec<_>>().join(",");
        self.rt.store.put_provider_key(&sealed).await?;
        self.rt.tools.forget_credentials(owner, server);
        Ok(StoredCredentials {
            server: server.to_string(),
            headers: checked.names().map(str::to_string).collect(),
            created_at: sealed.created_at,
        })
    }

    /// The credentials `owner` stored for its MCP servers.
    pub async fn mcp_credentials(
        &self,
        owner: &str,
    ) -> Result<Vec<StoredCredentials>, RuntimeError> {
        Ok(self
            .rt
            .store
            .provider_keys(owner)
            .await?
            .iter()
            .filter_map(stored)
            .collect())
    }

    /// Deletes `owner`'s credentials for `server`: no call made after this sends them. False
    /// when none were stored.
    pub async fn delete_mcp_credentials(
        &self,
        owner: &str,
        server: &str,
    ) -> Result<bool, RuntimeError> {
        let deleted = self
            .rt
            .store
            .delete_provider_key(owner, &credentials_name(server))
            .await?;
        self.rt.tools.forget_credentials(owner, server);
        Ok(deleted)
    }
}
