//! The process's MCP connections: one per declared server, started on first use, restarted
//! after it dies, each with its call timeout and concurrency limit; closed after it has not
//! been used for a while (reopened on the next use), by one reaper task per hub.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tracing::Instrument;

use agency_core::tool::{
    DEFAULT_CALL_TIMEOUT_SECS, DEFAULT_MAX_CONCURRENCY, McpServer, Tool, ToolProgress,
};
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientRequest, JsonObject, ProgressToken,
    Request, RequestId, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient, ServiceError};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::{Instant, timeout_at};

use crate::ToolError;
use crate::connection::{self, Connection, Handler};
use crate::credentials::{Credentials, Declarer};
use crate::output::{self, ToolOutput};

/// How long a connection is kept unused before it is closed, unless the operator says
/// otherwise ([`ToolHub::set_idle`]).
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

/// The longest the reaper sleeps between looks at the connections.
const REAP_PERIOD_MAX: Duration = Duration::from_secs(60);

/// The shortest (for tiny idle times).
const REAP_PERIOD_MIN: Duration = Duration::from_millis(50);

/// The MCP servers this process talks to. Cheap to clone; clones share the connections, so
/// build one per process (like the providers) and hand it around.
#[derive(Clone)]
pub struct ToolHub {
    inner: Arc<Inner>,
}

struct Inner {
    /// Whether servers accounts declare may be on loopback and private networks.
    allow_private: bool,
    /// By who declared them (the operator's, then accounts'): a server declared by the operator and
    /// the same declared by an account are reached apart, the account's only through the
    /// guarded client.
    /// An account's server is reached apart for each set of credentials stored for it.
    slots: Mutex<[HashMap<SlotKey, Arc<Slot>>; 2]>,
    /// Milliseconds a connection is kept unused; 0: kept until it breaks.
    idle_millis: AtomicU64,
    /// Whether the reaper task runs.
    reaping: AtomicBool,
}

/// A server, and the credentials its connection sends.
type SlotKey = (McpServer, Option<Credentials>);

/// One declared server: its connection (made and remade under the lock, so at most one
/// attempt at a time) and its limits, which outlive any one connection.
struct Slot {
    label: String,
    timeout: Duration,
    permits: Arc<Semaphore>,
    state: tokio::sync::Mutex<SlotState>,
    /// Connection attempts so far: a call that waited for the lock through a failed attempt
    /// takes that failure instead of trying again at once.
    attempts: AtomicU64,
}

#[derive(Default)]
struct SlotState {
    live: Option<Arc<Connection>>,
    failure: Option<ToolError>,
}

impl std::fmt::Debug for ToolHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHub")
            .field("allow_private", &self.inner.allow_private)
            .finish_non_exhaustive()
    }
}

impl ToolHub {
    /// `allow_private_addresses`: whether HTTP servers accounts declare may be on loopback and
    /// private networks (the operator's `--allow-private-addresses`; see
    /// [`agency_providers::http::net`]).
    pub fn new(allow_private_addresses: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                allow_private: allow_private_addresses,
                slots: Mutex::default(),
                idle_millis: AtomicU64::new(millis(DEFAULT_IDLE)),
                reaping: AtomicBool::new(false),
            }),
        }
    }

    /// Closes connections unused for `idle` (a stdio server's processes stopped, an HTTP
    /// session ended); the next use opens a new one. A call in flight keeps its connection.
    /// Zero keeps them until they break. [`DEFAULT_IDLE`] unless set.
    pub fn set_idle(&self, idle: Duration) {
        self.inner
            .idle_millis
            .store(millis(idle), Ordering::Relaxed);
    }

    /// Closes every connection no call holds (stdio servers' processes stopped, HTTP
    /// sessions ended), and waits until those servers' processes are gone (a couple of
    /// seconds at most): for a process about to exit. A later use opens them again.
    pub async fn close(&self) {
        let mut stopping = Vec::new();
        for slot in self.inner.all_slots() {
            let mut state = slot.state.lock().await;
            if let Some(live) = state.live.take_if(|live| Arc::strong_count(live) == 1) {
                stopping.extend(live.stopping());
            }
        }
        crate::group::all_gone(stopping).await;
    }

    /// Starts the reaper if it does not run (on the runtime of the caller).
    fn reap_idle(&self) {
        if self.inner.reaping.swap(true, Ordering::AcqRel) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(reap(Arc::downgrade(&self.inner)));
            }
            Err(_) => self.inner.reaping.store(false, Ordering::Release),
        }
    }

    /// The server's tools, with their names as the server lists them (unqualified),
    /// connecting on first use. Listed once per connection and again after the server says
    /// its list changed.
    pub async fn tools<'a>(
        &self,
        server: &McpServer,
        declared: impl Into<Declarer<'a>>,
    ) -> Result<Vec<Tool>, ToolError> {
        let declared = declared.into();
        connection::check_declaration(server, declared.declared())?;
        let slot = self.slot(server, declared);
        let deadline = Instant::now() + slot.timeout;
        let conn = self.connection(&slot, server, declared, deadline).await?;
        let tools = match conn.cached_tools() {
            Some(tools) => tools,
            None => {
                let listed = slot.list(&conn, deadline).await;
                conn.touch();
                listed.inspect_err(|e| {
                    if matches!(e, ToolError::Closed { .. }) {
                        conn.mark_broken();
                    }
                })?
            }
        };
        Ok(tools.as_ref().clone())
    }

    /// Calls `tool` with `arguments` (JSON text from a model: malformed, or not an object, is
    /// an error output and no call; empty is `{}`). Never fails and never outlasts the
    /// server's timeout: whatever goes wrong — the server cannot start, dies, times out,
    /// answers with an error or a result marked as one — is an output with `is_error` and a
    /// text the model can act on. The call's progress notifications go to `progress`.
    pub async fn call<'a>(
        &self,
        server: &McpServer,
        declared: impl Into<Declarer<'a>>,
        tool: &str,
        arguments: &str,
        progress: Option<UnboundedSender<ToolProgress>>,
    ) -> ToolOutput {
        let arguments = match parse_arguments(arguments) {
            Ok(arguments) => arguments,
            Err(message) => return ToolOutput::error(message),
        };
        match self
            .try_call(server, declared.into(), tool, arguments, progress)
            .await
        {
            Ok(output) => output,
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }

    async fn try_call(
        &self,
        server: &McpServer,
        declared: Declarer<'_>,
        tool: &str,
        arguments: JsonObject,
        progress: Option<UnboundedSender<ToolProgress>>,
    ) -> Result<ToolOutput, ToolError> {
        connection::check_declaration(server, declared.declared())?;
        let slot = self.slot(server, declared);
        let deadline = Instant::now() + slot.timeout;
        let conn = self.connection(&slot, server, declared, deadline).await?;
        let output = slot.call(&conn, tool, arguments, progress, deadline).await;
        conn.touch();
        if let Err(ToolError::Closed { .. }) = output {
            conn.mark_broken();
        }
        output
    }

    fn slot(&self, server: &McpServer, declared: Declarer<'_>) -> Arc<Slot> {
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slots = &mut slots[match declared {
            Declarer::Operator => 0,
            Declarer::Account(_) => 1,
        }];
        let key = (server.clone(), declared.credentials().cloned());
        if let Some(slot) = slots.get(&key) {
            return slot.clone();
        }
        let permits = server
            .max_concurrency
            .unwrap_or(DEFAULT_MAX_CONCURRENCY)
            .max(1);
        let slot = Arc::new(Slot {
            label: connection::label(server),
            timeout: Duration::from_secs(
                server
                    .timeout_secs
                    .unwrap_or(DEFAULT_CALL_TIMEOUT_SECS)
                    .max(1),
            ),
            permits: Arc::new(Semaphore::new(permits as usize)),
            state: tokio::sync::Mutex::default(),
            attempts: AtomicU64::new(0),
        });
        slots.insert(key, slot.clone());
        slot
    }

    /// The live connection to the slot's server: the current one, or a new one when there is
    /// none or the last has closed. Held while it is used, so the reaper leaves it open.
    async fn connection(
        &self,
        slot: &Slot,
        server: &McpServer,
        declared: Declarer<'_>,
        deadline: Instant,
    ) -> Result<Arc<Connection>, ToolError> {
        let attempts_before = slot.attempts.load(Ordering::Acquire);
        let mut state = timeout_at(deadline, slot.state.lock())
            .await
            .map_err(|_| slot.timed_out())?;
        if let Some(live) = &state.live {
            if !live.is_closed() {
                live.touch();
                return Ok(live.clone());
            }
            tracing::warn!(server = %slot.label, "MCP server connection closed; reconnecting");
            state.live = None;
        }
        if slot.attempts.load(Ordering::Acquire) != attempts_before
            && let Some(failure) = &state.failure
        {
            return Err(failure.clone());
        }
        slot.attempts.fetch_add(1, Ordering::AcqRel);
        // In a span of its own, not the caller's: the connection's tasks (and the MCP SDK's
        // spans) outlive the call that opened it, and would hold its request's spans open.
        let attempt = connection::connect(server, declared, self.inner.allow_private)
            .instrument(tracing::info_span!(parent: None, "mcp_connection", server = %slot.label));
        let result = match timeout_at(deadline, attempt).await {
            Ok(result) => result,
            Err(_) => Err(slot.timed_out()),
        };
        match result {
            Ok(conn) => {
                let conn = Arc::new(conn);
                state.live = Some(conn.clone());
                state.failure = None;
                drop(state);
                self.reap_idle();
                Ok(conn)
            }
            Err(e) => {
                tracing::warn!(server = %slot.label, error = %e, "MCP server connection failed");
                state.failure = Some(e.clone());
                Err(e)
            }
        }
    }
}

impl Inner {
    /// How long a connection is kept unused, if it is closed at all.
    fn idle(&self) -> Option<Duration> {
        match self.idle_millis.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    fn all_slots(&self) -> Vec<Arc<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .flat_map(|slots| slots.values().cloned())
            .collect()
    }

    /// Closes the connections unused for the idle time (or found closed) that no call holds.
    fn reap(&self) {
        let Some(idle) = self.idle() else { return };
        for slot in self.all_slots() {
            // A slot being connected is busy, not idle.
            let Ok(mut state) = slot.state.try_lock() else {
                continue;
            };
            // Only the slot holds it (a caller clones it under this lock): no call in flight.
            if let Some(live) = &state.live
                && Arc::strong_count(live) == 1
                && (live.is_closed() || live.idle() >= idle)
            {
                tracing::debug!(server = %slot.label, "MCP server connection unused; closed");
                state.live = None;
            }
        }
    }
}

/// The hub's reaper: looks at its connections a few times per idle time (at most every
/// [`REAP_PERIOD_MAX`]), until the hub is dropped.
async fn reap(hub: Weak<Inner>) {
    /// Notes that the reaper stopped (also when its runtime shuts down), so the next
    /// connection starts another.
    struct Running(Weak<Inner>);
    impl Drop for Running {
        fn drop(&mut self) {
            if let Some(inner) = self.0.upgrade() {
                inner.reaping.store(false, Ordering::Release);
            }
        }
    }
    let _running = Running(hub.clone());
    loop {
        let period = match hub.upgrade() {
            Some(inner) => inner
                .idle()
                .map_or(REAP_PERIOD_MAX, |idle| idle / 4)
                .clamp(REAP_PERIOD_MIN, REAP_PERIOD_MAX),
            None => return,
        };
        tokio::time::sleep(period).await;
        match hub.upgrade() {
            Some(inner) => inner.reap(),
            None => return,
        }
    }
}

/// A duration in whole milliseconds, saturated.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Slot {
    /// Calls `tool` on `conn`, within the server's concurrency limit and `deadline`.
    async fn call(
        &self,
        conn: &Connection,
        tool: &str,
        arguments: JsonObject,
        progress: Option<UnboundedSender<ToolProgress>>,
        deadline: Instant,
    ) -> Result<ToolOutput, ToolError> {
        if let Some(missing) = self.unknown_tool(conn, tool, deadline).await? {
            return Ok(ToolOutput::error(missing));
        }
        let _permit = timeout_at(deadline, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| self.timed_out())?
            .map_err(|_| self.closed())?;

        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        // On timeout rmcp sends the server `notifications/cancelled` for the request.
        let mut options =
            PeerRequestOptions::with_timeout(deadline.saturating_duration_since(Instant::now()));
        // The call's trace context goes with the request (see `traced`).
        if let Some(meta) = crate::traced::meta() {
            options = options.with_meta(meta);
        }
        let handle = conn
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.service_error(e))?;
        // Registered right after the request is queued, well before the server can answer it
        // (its progress arrives after a round trip through the server).
        let watch = Watch {
            peer: conn.peer().clone(),
            handler: conn.handler().clone(),
            id: handle.id.clone(),
            token: handle.progress_token.clone(),
            answered: false,
        };
        if let Some(progress) = progress {
            watch.handler.watch(watch.token.clone(), progress);
        }
        let answer = handle.await_response().await;
        watch.answered();
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(output::from_result(result)),
            Ok(_) => Err(ToolError::Server {
                server: self.label.clone(),
                message: "it answered the call with something other than a tool result".into(),
            }),
            Err(e) => Err(self.service_error(e)),
        }
    }

    async fn list(
        &self,
        conn: &Connection,
        deadline: Instant,
    ) -> Result<Arc<Vec<Tool>>, ToolError> {
        timeout_at(deadline, conn.list_tools())
            .await
            .map_err(|_| self.timed_out())?
            .map_err(|e| self.service_error(e))
    }

    /// Why `tool` cannot be called, when the server does not list it (the list fetched again
    /// first, in case it changed unannounced).
    async fn unknown_tool(
        &self,
        conn: &Connection,
        tool: &str,
        deadline: Instant,
    ) -> Result<Option<String>, ToolError> {
        if let Some(tools) = conn.cached_tools()
            && tools.iter().any(|t| t.name == tool)
        {
            return Ok(None);
        }
        let tools = self.list(conn, deadline).await?;
        if tools.iter().any(|t| t.name == tool) {
            return Ok(None);
        }
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        Ok(Some(format!(
            "the MCP server {} has no tool `{tool}`; its tools are: {}",
            self.label,
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        )))
    }

    fn timed_out(&self) -> ToolError {
        ToolError::Timeout {
            server: self.label.clone(),
            secs: self.timeout.as_secs(),
        }
    }

    fn closed(&self) -> ToolError {
        ToolError::Closed {
            server: self.label.clone(),
        }
    }

    fn service_error(&self, e: ServiceError) -> ToolError {
        match e {
            ServiceError::Timeout { .. } => self.timed_out(),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => self.closed(),
            ServiceError::McpError(e) => ToolError::Server {
                server: self.label.clone(),
                message: e.message.into_owned(),
            },
            ServiceError::Cancelled { reason } => ToolError::Server {
                server: self.label.clone(),
                message: format!(
                    "the request was cancelled ({})",
                    reason.as_deref().unwrap_or("no reason given")
                ),
            },
            other => ToolError::Server {
                server: self.label.clone(),
                message: other.to_string(),
            },
        }
    }
}

/// A call in flight: stops its progress going anywhere when it ends, and when the caller
/// gives up on it before the answer, tells the server (`notifications/cancelled`).
struct Watch {
    peer: Peer<RoleClient>,
    handler: Handler,
    id: RequestId,
    token: ProgressToken,
    answered: bool,
}

impl Watch {
    fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.handler.unwatch(&self.token);
        if self.answered {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let param = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the caller stopped waiting".into()),
        );
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(param).await;
        });
    }
}

/// A model's arguments as a JSON object.
fn parse_arguments(text: &str) -> Result<JsonObject, String> {
    if text.trim().is_empty() {
        return Ok(JsonObject::new());
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(arguments)) => Ok(arguments),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object (named arguments), not {}; nothing was called",
            match other {
                serde_json::Value::Null => "null",
                serde_json::Value::Bool(_) => "a boolean",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::Object(_) => "an object",
            }
        )),
        Err(e) => Err(format!(
            "the arguments are not valid JSON ({e}); nothing was called: send a JSON object"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object() {
        assert!(parse_arguments(r#"{"a": 1}"#).is_ok());
        assert_eq!(parse_arguments("  ").map(|a| a.len()), Ok(0));
        assert!(parse_arguments("[1]").unwrap_err().contains("not an array"));
        assert!(
            parse_arguments("{\"a\":")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}
