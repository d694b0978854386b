//! Runs conversations: drives the core's [`TurnEngine`], calls models, persists every message
//! before it is delivered, publishes events, and enforces the turn's deadline.
//!
//! One turn at a time per conversation (a per-conversation lock). A conversation's contexts are
//! loaded from the store once and then kept in memory with it, so a hop costs one write and no
//! read, however long the conversation grows.

pub mod accounts;
pub mod agencies;
pub mod api;
pub mod approvals;
mod call;
pub mod conversations;
mod error;
mod events;
pub mod format;
mod hex;
pub mod keys;
mod lock;
pub mod memory;
mod observe;
pub mod pipeline;
pub mod providers;
mod relay;
pub mod rooms;
pub mod secrets;
mod session;
pub mod spend;
pub mod tasks;
pub mod throttle;
pub mod tools;
mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};

use agency_core::{Agency, ConversationId, StopReason, TraceEntry, TurnId, Usage};
use agency_providers::Providers;
use agency_store::Store;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

pub use error::RuntimeError;
pub use events::Event;
pub use pipeline::{Ask, Caller, Turn, TurnEvent, TurnRequest};

use session::Session;

/// The owner of everything made without an account (the CLI on a local database).
pub const LOCAL_OWNER: &str = "local";

/// The id MQTT's topics know an agency by (`XMAGS/{teamId}/…`): the operator's agencies by
/// handle, else name, as stock XMAGS clients are configured; an account's by the agency's id.
/// Names are unique within an account only, and two accounts' teams must never share topics.
pub fn team_id(agency: &agency_core::Agency) -> std::borrow::Cow<'_, str> {
    if agency.owner == LOCAL_OWNER {
        agency.handle.as_deref().unwrap_or(&agency.name).into()
    } else {
        agency.id.to_string().into()
    }
}

/// Sessions kept in memory at most; idle ones beyond this are dropped (and reloaded on use).
const MAX_SESSIONS: usize = 1024;

/// What a turn produced.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    pub conversation_id: ConversationId,
    pub turn_id: TurnId,
    pub number: u32,
    /// The manager's answer; empty when the turn was cancelled.
    pub answer: String,
    pub stopped_by: StopReason,
    pub hops: u32,
    /// Summed over every model call the turn made before it answered.
    pub usage: Usage,
    /// What those calls cost; `None` when a model called has no price.
    pub cost: Option<agency_core::Cost>,
    /// The same, agent by agent (those whose models were called, in the order they answered).
    pub agent_costs: Vec<(agency_core::AgentId, Option<agency_core::Cost>)>,
    /// Who said what to whom, in order, from the user's message to the answer.
    pub trace: Vec<TraceEntry>,
    /// The agency's agents, to name the trace's parties.
    pub roster: Arc<agency_core::Roster>,
    /// The calls of the client's tools the turn paused on (`StopReason::ToolCalls`): the
    /// client's next request brings their results.
    pub tool_calls: Vec<agency_core::ToolCall>,
    /// The calls waiting for a person's approval the turn paused on
    /// (`StopReason::Approval`): the next request brings their answers.
    pub approvals: Vec<agency_core::Approval>,
}

/// What a turn needs of its agency.
pub(crate) struct AgencyView {
    pub agency: Arc<Agency>,
    pub roster: Arc<agency_core::Roster>,
    pub providers: Arc<Providers>,
}

/// The runtime: one context every area shares (the store, the providers, the events, the tools,
/// the conversations' sessions) with a service per area over it — [`Runtime::accounts`],
/// [`Runtime::agencies`], [`Runtime::conversations`], [`Runtime::rooms`], [`Runtime::memory`],
/// [`Runtime::settings`], and the keys' [`keys::Authenticator`] — and the one way a turn runs,
/// [`Runtime::begin`] (`pipeline.rs`).
pub struct Runtime {
    store: Arc<dyn Store>,
    providers: Arc<Providers>,
    master_key: Option<secrets::MasterKeySource>,
    /// Every event: this process's, and those other processes on the store tell of.
    events: broadcast::Sender<Event>,
    /// This process's own events.
    local: broadcast::Sender<Event>,
    /// What this process tells the others (when the store is shared).
    relay: relay::Relay,
    /// This process among those on the store (see [`Runtime::keep_alive`]).
    process: uuid::Uuid,
    sessions: StdMutex<HashMap<ConversationId, lock::Slot>>,
    /// Agencies as last loaded, and their states as last read.
    agency_cache: agencies::Cache,
    /// Turns that answered while some agents were still working: their late replies are
    /// being persisted.
    settling: StdMutex<Vec<JoinHandle<()>>>,
    /// The turn running in each conversation, told to stop through its channel (see
    /// [`Runtime::cancel`]).
    running: StdMutex<HashMap<ConversationId, tokio::sync::watch::Sender<bool>>>,
    /// Failed log-ins, per email and per client address.
    logins: throttle::LoginThrottle,
    /// The MCP servers agents call, and the connections to them.
    tools: tools::Tools,
    /// How long a turn paused on the client's tools waits for their results, in seconds.
    client_tools_wait: std::sync::atomic::AtomicU64,
    /// Budgets' reservations (see [`spend`]).
    spending: spend::Spending,
    /// How long a call waits for a person's approval when its policy does not say, in
    /// seconds (see [`approvals`]).
    approval_timeout: std::sync::atomic::AtomicU64,
}

/// How long a turn paused on the client's tools waits for them unless the operator says.
pub const DEFAULT_CLIENT_TOOLS_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

impl Runtime {
    /// A runtime whose agencies may use `providers` (the server's). Agencies' own providers
    /// find no stored keys: see [`Runtime::with_master_key`].
    pub fn new(store: Arc<dyn Store>, providers: Providers) -> Arc<Self> {
        Self::with_master_key(store, providers, None)
    }

    /// A runtime whose server providers are `base` and the operator's `specs`, each key found
    /// among the operator's stored keys, else in the variable its spec names.
    /// Agents may call the built-in tools and those of the operator's `mcp_servers`.
    pub async fn open(
        store: Arc<dyn Store>,
        base: Providers,
        specs: &[agency_core::ProviderSpec],
        mcp_servers: Vec<(String, agency_core::McpServer)>,
        master_key: secrets::MasterKeySource,
    ) -> Result<Arc<Self>, RuntimeError> {
        let providers =
            providers::build(&base, specs, LOCAL_OWNER, &*store, Some(&master_key)).await?;
        let tools = tools::Tools::new(mcp_servers, providers.allows_private());
        Ok(Self::assemble(store, providers, Some(master_key), tools))
    }

    /// A runtime that opens stored provider keys with `master_key`; agents may call the
    /// built-in tools.
    pub fn with_master_key(
        store: Arc<dyn Store>,
        providers: Providers,
        master_key: Option<secrets::MasterKeySource>,
    ) -> Arc<Self> {
        let tools = tools::Tools::new(Vec::new(), providers.allows_private());
        Self::assemble(store, providers, master_key, tools)
    }

    /// A runtime whose agents call `tools`.
    pub fn assemble(
        store: Arc<dyn Store>,
        providers: Providers,
        master_key: Option<secrets::MasterKeySource>,
        mut tools: tools::Tools,
    ) -> Arc<Self> {
        tools.attach(store.clone(), master_key.clone());
        let process = uuid::Uuid::now_v7();
        let relay = relay::Relay::new(&store, process);
        let spending = spend::Spending::new(store.clone());
        Arc::new(Self {
            spending,
            store,
            providers: Arc::new(providers),
            master_key,
            events: broadcast::channel(1024).0,
            local: broadcast::channel(1024).0,
            relay,
            process,
            sessions: StdMutex::new(HashMap::new()),
            agency_cache: agencies::Cache::default(),
            settling: StdMutex::new(Vec::new()),
            running: StdMutex::new(HashMap::new()),
            logins: throttle::LoginThrottle::new(throttle::LoginLimits::default()),
            tools,
            client_tools_wait: DEFAULT_CLIENT_TOOLS_WAIT.as_secs().into(),
            approval_timeout: approvals::default_timeout().into(),
        })
    }

    /// Accounts: sign-up, log-in, sessions, passwords.
    pub fn accounts(&self) -> accounts::Accounts<'_> {
        accounts::Accounts { rt: self }
    }

    /// Agencies: drafts, validation, publishing and versions.
    pub fn agencies(&self) -> agencies::Agencies<'_> {
        agencies::Agencies { rt: self }
    }

    /// Conversations: started and read (turns run through [`Runtime::begin`]).
    pub fn conversations(&self) -> conversations::Conversations<'_> {
        conversations::Conversations { rt: self }
    }

    /// Roundtable rooms.
    pub fn rooms(self: &Arc<Self>) -> rooms::Rooms<'_> {
        rooms::Rooms { rt: self }
    }

    /// Agents' memory: observations, reflections, plans.
    pub fn memory(&self) -> memory::Memories<'_> {
        memory::Memories { rt: self }
    }

    /// Spend against budgets (the budgets themselves are the keys' and the agencies').
    pub fn spend(&self) -> spend::Spend<'_> {
        spend::Spend { rt: self }
    }

    /// A2A tasks.
    pub fn tasks(self: &Arc<Self>) -> tasks::Tasks<'_> {
        tasks::Tasks { rt: self }
    }

    /// An account's stored provider keys and MCP credentials.
    pub fn settings(&self) -> providers::Settings<'_> {
        providers::Settings { rt: self }
    }

    /// Reports the sessions held in memory as the `agency.sessions` gauge, for as long as
    /// this runtime lives (`agency serve`'s one runtime).
    pub fn observe_sessions(self: &Arc<Self>) {
        let rt = Arc::downgrade(self);
        agency_telemetry::metrics::observe_sessions(move || {
            rt.upgrade().map_or(0, |rt| {
                let sessions = match rt.sessions.lock() {
                    Ok(s) => s.len(),
                    Err(poisoned) => poisoned.into_inner().len(),
                };
                u64::try_from(sessions).unwrap_or(u64::MAX)
            })
        });
    }

    /// How long a turn paused on the client's tools (an API request's) waits for their
    /// results: a later answer starts a new turn instead of resuming it.
    pub fn set_client_tools_wait(&self, wait: std::time::Duration) {
        self.client_tools_wait
            .store(wait.as_secs(), std::sync::atomic::Ordering::Relaxed);
    }

    /// How long a connection to an MCP server is kept unused before it is closed (a stdio
    /// server's processes stopped); the next call opens another. Zero keeps them open.
    pub fn set_mcp_idle(&self, idle: std::time::Duration) {
        self.tools.set_idle(idle);
    }

    pub(crate) fn client_tools_wait(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.client_tools_wait
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// What stored provider keys are sealed under, when the server has it.
    pub fn master_key(&self) -> Option<&secrets::MasterKeySource> {
        self.master_key.as_ref()
    }

    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// Every event of every conversation, as it happens: this process's, and (once
    /// [`Runtime::hear_others`] runs) those of the other processes on the store.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// This process's own events alone: what a turn it runs does (MQTT progress, which the
    /// process that runs the turn sends).
    pub fn subscribe_local(&self) -> broadcast::Receiver<Event> {
        self.local.subscribe()
    }

    /// Records that this process is alive: `agency serve` does every
    /// [`rooms::ALIVE_EVERY`](crate::rooms::ALIVE_EVERY), so that the other processes on the
    /// store leave its rooms' answers in flight to it (see [`Rooms::recover`](crate::rooms::Rooms::recover)).
    /// Nothing where the store is not shared: no other process reads it there.
    pub async fn keep_alive(&self) -> Result<(), RuntimeError> {
        if !self.store.shared() {
            return Ok(());
        }
        Ok(self.store.alive(self.process, chrono::Utc::now()).await?)
    }

    /// Hears what the other processes on the store do, so that [`Runtime::subscribe`] shows
    /// their turns and rooms too: `agency serve` starts it, and it listens when this returns.
    /// Nothing where the store is not shared.
    pub async fn hear_others(&self) -> Result<(), RuntimeError> {
        if let Some(notices) = self.store.listen().await? {
            tokio::spawn(relay::hear(
                notices,
                self.process,
                self.store.clone(),
                self.events.clone(),
            ));
        }
        Ok(())
    }

    /// One turn: the user's `text` to the manager, and everything until the manager answers.
    /// The caller is this process itself (the CLI, benchmarks); faces that act for someone
    /// go through [`Runtime::begin`] with who that is.
    pub async fn send(
        self: &Arc<Self>,
        conversation: ConversationId,
        text: String,
    ) -> Result<TurnOutcome, RuntimeError> {
        let request = pipeline::TurnRequest::message(pipeline::Caller::Local, conversation, text);
        self.begin(request).await?.outcome().await
    }

    /// The conversation, locked for a turn (see [`lock`]), with its session loaded when not
    /// in memory or stale.
    async fn lock_conversation(
        &self,
        conversation: ConversationId,
    ) -> Result<lock::Locked, RuntimeError> {
        let mut locked =
            lock::Locked::take(&self.store, conversation, self.session_slot(conversation)).await?;
        if locked.session().is_none() {
            locked.put(Session::load(&*self.store, conversation).await?);
        }
        Ok(locked)
    }

    /// Cancels the turn running in `conversation`: it ends at once without an answer
    /// (`StopReason::Cancelled`, its record written), calls no more models, and the replies of
    /// calls still running are kept for the next turn like any late reply. False when no turn
    /// is running there (or it was already told to stop).
    pub fn cancel(&self, conversation: ConversationId) -> bool {
        let running = match self.running.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        running
            .get(&conversation)
            .is_some_and(|stop| !stop.send_replace(true))
    }

    /// Whether this server can take requests: its database answers with the schema this
    /// program knows. Why not is safe to show anyone: what a failed connection said (hosts,
    /// addresses) goes to the log only.
    pub async fn ready(&self) -> Result<(), String> {
        match self.store.ready().await {
            Ok(()) => Ok(()),
            Err(agency_store::StoreError::Migrate(schema)) => Err(schema),
            Err(e) => {
                tracing::warn!(error = %e, "not ready: the database does not answer");
                Err("the database does not answer".into())
            }
        }
    }

    /// Closes the connections to MCP servers, and waits (a couple of seconds at most) until
    /// the stdio servers' processes are gone: for a process about to exit, which would leave
    /// them running. Later calls open them again.
    pub async fn close_tools(&self) {
        self.tools.close().await;
    }

    /// Waits until the late replies of finished turns are persisted.
    pub async fn settle(&self) {
        loop {
            let handles: Vec<JoinHandle<()>> = match self.settling.lock() {
                Ok(mut s) => s.drain(..).collect(),
                Err(_) => return,
            };
            if handles.is_empty() {
                return;
            }
            for h in handles {
                let _ = h.await;
            }
        }
    }

    fn session_slot(&self, conversation: ConversationId) -> lock::Slot {
        let mut sessions = match self.sessions.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&conversation) {
            // Drop the sessions nobody is using; they reload from the store when needed.
            sessions.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        sessions.entry(conversation).or_default().clone()
    }

    fn track(&self, handle: JoinHandle<()>) {
        if let Ok(mut s) = self.settling.lock() {
            s.retain(|h| !h.is_finished());
            s.push(handle);
        }
    }

    /// Whether anyone hears events: a live view here, or (a shared store) other processes.
    fn listened(&self) -> bool {
        self.relay.is_on() || self.events.receiver_count() > 0 || self.local.receiver_count() > 0
    }

    fn publish(&self, event: impl FnOnce() -> Event) {
        if !self.listened() {
            return;
        }
        let event = event();
        self.relay.event(&event);
        if self.local.receiver_count() > 0 {
            let _ = self.local.send(event.clone());
        }
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(event);
        }
    }
}

/// The running turn's place in [`Runtime::cancel`]'s map, for as long as the turn runs (not
/// while its late replies settle).
pub(crate) struct Cancel {
    rt: Arc<Runtime>,
    conversation: ConversationId,
    pub(crate) stop: tokio::sync::watch::Receiver<bool>,
}

impl Cancel {
    pub(crate) fn register(rt: &Arc<Runtime>, conversation: ConversationId) -> Self {
        let (tx, stop) = tokio::sync::watch::channel(false);
        if let Ok(mut running) = rt.running.lock() {
            running.insert(conversation, tx);
        }
        Self {
            rt: rt.clone(),
            conversation,
            stop,
        }
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        if let Ok(mut running) = self.rt.running.lock()
            && running
                .get(&self.conversation)
                .is_some_and(|tx| self.stop.same_channel(&tx.subscribe()))
        {
            running.remove(&self.conversation);
        }
    }
}
