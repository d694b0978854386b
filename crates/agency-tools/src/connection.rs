//! One live connection to an MCP server: started from its declaration (after checking who
//! declared it may declare that), with the client side that routes progress notifications to
//! the calls that asked for them and notes when the server's tool list changed.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agency_core::tool::{McpServer, McpTransport, Tool, ToolProgress};
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::service::ClientInitializeError;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, Peer, RoleClient};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::mpsc::UnboundedSender;

use crate::builtin::Builtin;
use crate::credentials::Declarer;
use crate::group::{self, ProcessGroup};
use crate::traced::Traced;
use crate::{Declared, ToolError};

/// Times a broken Streamable HTTP response stream is resumed before the call fails.
const SSE_RETRIES: usize = 3;

/// Redirects an operator's HTTP server may answer in a row (rmcp's own client's limit).
const MAX_REDIRECTS: usize = 10;

/// Longest line of a server's stderr logged as it is; the rest of the line is dropped.
const STDERR_LINE_BYTES: u64 = 4096;

/// A connected server.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// The tool list, and the count of list changes it was fetched after.
    tools: Mutex<Option<(u64, Arc<Vec<Tool>>)>>,
    /// A request found the connection gone while rmcp has not noticed (an HTTP server that
    /// stopped answering leaves no stream to close): the next use reconnects.
    broken: AtomicBool,
    /// When it was opened, and then last used (milliseconds after that).
    opened: Instant,
    last_used: AtomicU64,
    /// A stdio server's process group, stopped when the connection drops (after `service`,
    /// whose end closes the server's input).
    group: Option<ProcessGroup>,
}

impl Connection {
    /// Notes that the connection is in use now.
    pub fn touch(&self) {
        let millis = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_used.fetch_max(millis, Ordering::Relaxed);
    }

    /// The stdio server's process group, to wait for once the connection drops.
    pub fn stopping(&self) -> Option<group::Stopping> {
        self.group.as_ref().map(ProcessGroup::stopping)
    }

    /// How long since it was last used.
    pub fn idle(&self) -> Duration {
        self.opened.elapsed().saturating_sub(Duration::from_millis(
            self.last_used.load(Ordering::Relaxed),
        ))
    }

    pub fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// Whether the connection is gone (the server exited or hung up).
    pub fn is_closed(&self) -> bool {
        self.broken.load(Ordering::Acquire) || self.service.peer().is_transport_closed()
    }

    /// Makes the next use reconnect.
    pub fn mark_broken(&self) {
        self.broken.store(true, Ordering::Release);
    }

    pub fn handler(&self) -> &Handler {
        self.service.service()
    }

    /// The tools as last listed, unless the server said its list changed since.
    pub fn cached_tools(&self) -> Option<Arc<Vec<Tool>>> {
        let changes = self.handler().tool_list_changes();
        let cached = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        cached
            .as_ref()
            .filter(|(seen, _)| *seen == changes)
            .map(|(_, tools)| tools.clone())
    }

    /// The tools, listed again.
    pub async fn list_tools(&self) -> Result<Arc<Vec<Tool>>, rmcp::ServiceError> {
        let changes = self.handler().tool_list_changes();
        let listed = self.peer().list_all_tools().await?;
        let tools: Arc<Vec<Tool>> = Arc::new(
            listed
                .into_iter()
                .map(|t| Tool {
                    description: t
                        .description
                        .map(|d| d.into_owned())
                        .or(t.title)
                        .unwrap_or_default(),
                    input_schema: serde_json::Value::Object(t.input_schema.as_ref().clone()),
                    name: t.name.into_owned(),
                })
                .collect(),
        );
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Some((changes, tools.clone()));
        Ok(tools)
    }
}

/// Our side of a connection: progress goes to the call that registered its token; a
/// `notifications/tools/list_changed` makes the cached list stale.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    progress: Arc<Mutex<HashMap<ProgressToken, UnboundedSender<ToolProgress>>>>,
    tool_list_changes: Arc<AtomicU64>,
}

impl Handler {
    fn tool_list_changes(&self) -> u64 {
        self.tool_list_changes.load(Ordering::Acquire)
    }

    /// Sends the progress of the request with `token` to `to` until [`Self::unwatch`].
    pub fn watch(&self, token: ProgressToken, to: UnboundedSender<ToolProgress>) {
        self.progress_map().insert(token, to);
    }

    pub fn unwatch(&self, token: &ProgressToken) {
        self.progress_map().remove(token);
    }

    fn progress_map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, UnboundedSender<ToolProgress>>> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let to = self.progress_map().get(&params.progress_token).cloned();
        if let Some(to) = to {
            let _ = to.send(ToolProgress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tool_list_changes.fetch_add(1, Ordering::AcqRel);
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agency", env!("CARGO_PKG_VERSION")),
        );
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }
}

/// How the handshake goes: servers of the 2026-07-28 protocol are asked with
/// `server/discover`; older ones (most stdio servers today) answer that with an error and are
/// initialized the older way.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// A short name of the server for messages and logs: `builtin`, the command's file name, or
/// the URL's host and port (never its path or query, which may carry a secret).
pub(crate) fn label(server: &McpServer) -> String {
    match &server.transport {
        McpTransport::Builtin => agency_core::tool::BUILTIN_SERVER.into(),
        McpTransport::Stdio { command, .. } => std::path::Path::new(command)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| command.clone()),
        McpTransport::Http { url, .. } => reqwest::Url::parse(url)
            .ok()
            .and_then(|u| {
                let host = u.host_str()?.to_string();
                Some(match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host,
                })
            })
            .unwrap_or_else(|| "(an invalid URL)".into()),
    }
}

/// Refuses what `declared` may not declare; `Ok` when it may.
pub(crate) fn check_declaration(server: &McpServer, declared: Declared) -> Result<(), ToolError> {
    if declared == Declared::Operator {
        return Ok(());
    }
    match &server.transport {
        McpTransport::Builtin => Ok(()),
        McpTransport::Stdio { .. } => Err(ToolError::Refused(
            "an account may not declare a stdio MCP server: it would start a process on this \
             server's machine; only the operator's configuration may (use an HTTP server instead)"
                .into(),
        )),
        McpTransport::Http { headers_env, .. } if !headers_env.is_empty() => {
            Err(ToolError::Refused(
                "an account's MCP server may not take headers from this server's variables \
                 (`headers_env` is for the operator's configuration only)"
                    .into(),
            ))
        }
        McpTransport::Http { .. } => Ok(()),
    }
}

/// Connects to `server` (its declaration already checked).
pub(crate) async fn connect(
    server: &McpServer,
    declared: Declarer<'_>,
    allow_private: bool,
) -> Result<Connection, ToolError> {
    let label = label(server);
    let fail = |message: String| ToolError::Connect {
        server: label.clone(),
        message,
    };
    let handler = Handler::default();
    let mut process_group = None;
    let service = match &server.transport {
        McpTransport::Builtin => handler
            .serve_with_lifecycle(Builtin::start(), lifecycle())
            .await
            .map_err(|e| fail(handshake_error(&e)))?,
        McpTransport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            // In a group of its own, stopped whole: a wrapper's children too.
            group::isolate(&mut cmd);
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| fail(format!("cannot start `{command}`: {e}")))?;
            // Held from here, so a failed handshake stops the group too.
            process_group = ProcessGroup::led_by(transport.id());
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(label.clone(), stderr));
            }
            handler
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| fail(handshake_error(&e)))?
        }
        McpTransport::Http { url, headers_env } => {
            let transport = http_transport(url, headers_env, declared, allow_private).await?;
            // The URL may carry a secret (the operator's): the messages name the host instead,
            // for the URL as written and as parsed (which the HTTP client's errors quote).
            let parsed = reqwest::Url::parse(url)
                .map(String::from)
                .unwrap_or_default();
            handler
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| {
                    let mut message = handshake_error(&e).replace(url.as_str(), &label);
                    if !parsed.is_empty() {
                        message = message.replace(&parsed, &label);
                    }
                    fail(message)
                })?
        }
    };
    tracing::debug!(
        server = %label,
        protocol = %service.peer().peer_info().map(|i| i.protocol_version.to_string()).unwrap_or_default(),
        "MCP server connected"
    );
    listen_for_tool_changes(&service, &label).await;
    Ok(Connection {
        service,
        tools: Mutex::new(None),
        broken: AtomicBool::new(false),
        opened: Instant::now(),
        last_used: AtomicU64::new(0),
        group: process_group,
    })
}

/// Why a handshake failed, in the words of the innermost errors (connection refused, a status,
/// a timeout) rather than rmcp's wrappers naming its transport types.
fn handshake_error(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::TransportError { error, .. } => {
            // reqwest's error inside rmcp's (which does not give it as its source).
            match error
                .error
                .downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                Some(StreamableHttpError::Client(e)) => causes(e),
                _ => causes(error.error.as_ref()),
            }
        }
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => handshake_error(fallback),
        other => other.to_string(),
    }
}

/// An error and its sources, each said once.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// On a connection of the 2026-07-28 protocol, a server announces a changed tool list only on
/// a `subscriptions/listen` stream that asked for it: opened here, before the first listing,
/// and read until the connection ends. (Older servers send the notification unasked, to
/// [`Handler::on_tool_list_changed`].)
async fn listen_for_tool_changes(service: &RunningService<RoleClient, Handler>, label: &str) {
    let Some(info) = service.peer().peer_info() else {
        return;
    };
    let filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .build()
        .supported_by(&info.capabilities);
    if info.protocol_version.has_initialize() || filter.tools_list_changed != Some(true) {
        return;
    }
    let mut subscription = match service.peer().listen(filter).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::warn!(server = %label, error = %e, "cannot listen for tool list changes");
            return;
        }
    };
    let changes = service.service().tool_list_changes.clone();
    tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                changes.fetch_add(1, Ordering::AcqRel);
            }
        }
    });
}

async fn http_transport(
    url: &str,
    headers_env: &std::collections::BTreeMap<String, String>,
    declared: Declarer<'_>,
    allow_private: bool,
) -> Result<StreamableHttpClientTransport<Traced>, ToolError> {
    use agency_providers::http::net;
    let what = "the MCP server's URL";
    let url = net::parse_url(url, what).map_err(|e| ToolError::Config(e.to_string()))?;
    // A broken response stream is resumed a few times within ~1.5 s, then given up, so a call
    // in flight on a server that died fails then rather than at its timeout.
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(SSE_RETRIES);
    retry.base_duration = Duration::from_millis(200);
    retry.max_delay = Some(Duration::from_secs(1));
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    config.retry_config = Arc::new(retry);
    match declared {
        Declarer::Operator => {
            let mut headers = HashMap::new();
            for (name, var) in headers_env {
                let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| ToolError::Config(format!("`{name}` is not a header name")))?;
                let value = std::env::var(var).map_err(|_| {
                    ToolError::Config(format!(
                        "the variable {var} (for the header {name}) is not set"
                    ))
                })?;
                let mut value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                    ToolError::Config(format!(
                        "the variable {var} (for the header {name}) is not a valid header value"
                    ))
                })?;
                value.set_sensitive(true);
                headers.insert(header, value);
            }
            // As rmcp's own client: same-origin redirects only, so headers never reach another
            // host, and no idle pool.
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .redirect(same_origin_redirects())
                .build()
                .map_err(|e| ToolError::Config(format!("cannot build an HTTP client: {e}")))?;
            Ok(StreamableHttpClientTransport::with_client(
                Traced(client),
                config.custom_headers(headers),
            ))
        }
        Declarer::Account(credentials) => {
            if let Some(credentials) = credentials {
                config = config.custom_headers(credentials.headers().collect());
            }
            if !allow_private {
                let refused =
                    |e: agency_providers::http::ProviderError| ToolError::Refused(e.to_string());
                net::refuse_literal(&url).map_err(refused)?;
                net::check_url(&url).await.map_err(refused)?;
            }
            // No proxy, no redirects, and every DNS answer checked at connect time. No idle
            // pool, as rmcp's own client (a reused connection can stall on a delayed ACK).
            let client = net::guard(
                reqwest::Client::builder().pool_max_idle_per_host(0),
                allow_private,
            )
            .build()
            .map_err(|e| ToolError::Config(format!("cannot build an HTTP client: {e}")))?;
            Ok(StreamableHttpClientTransport::with_client(
                Traced(client),
                config,
            ))
        }
    }
}

/// Redirects as rmcp's own client follows them: 307 and 308 (which keep the method and the
/// body) to the same origin, at most [`MAX_REDIRECTS`]; anything else is the answer.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// Logs what a stdio server writes to stderr, line by line, until it closes it.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(STDERR_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if line.last() != Some(&b'\n') && !skip_line(&mut reader).await {
                    break;
                }
                let text = String::from_utf8_lossy(&line);
                tracing::debug!(server = %server, "stderr: {}", text.trim_end());
            }
        }
    }
}

/// Reads past the rest of a line, a bounded piece at a time; false at the end of the stream.
async fn skip_line(reader: &mut BufReader<tokio::process::ChildStderr>) -> bool {
    let mut rest = Vec::new();
    loop {
        rest.clear();
        match (&mut *reader)
            .take(STDERR_LINE_BYTES)
            .read_until(b'\n', &mut rest)
            .await
        {
            Ok(0) | Err(_) => return false,
            Ok(_) if rest.last() == Some(&b'\n') => return true,
            Ok(_) => {}
        }
    }
}
