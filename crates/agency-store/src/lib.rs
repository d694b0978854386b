//! Persistence: one trait per area, SQLite and PostgreSQL behind them.
//!
//! The backend is chosen from the URL scheme (`sqlite://`, `postgres://`). Both run the same
//! SQL text and the same row conversions (`shared/<area>.rs`); each has a folder of its own
//! (`sqlite/`, `postgres/`) with one file per area, the same names throughout, and its own
//! migrations.
//! PostgreSQL goes through sqlx; SQLite through rusqlite, called in place: a statement takes
//! microseconds, far less than handing it to a worker thread would (see ARCHITECTURE.md).
//! Queries are built at run time, so building needs no database.

use std::sync::Arc;

use agency_core::room::{Definition, Participant, Room, RoomMessage};
use agency_core::{
    Agency, AgencyId, Conversation, ConversationId, DefinitionId, Email, LoginSession, Message,
    ParticipantId, PasswordHash, Published, RoomId, RoomMessageId, TurnId, TurnRecord, User,
    UserId,
};
use async_trait::async_trait;

mod postgres;
mod shared;
mod sqlite;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Storage failures. `Conflict` is the caller's to explain; the others are internal.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "`{0}` is not a database URL Agency can use: write sqlite://PATH or postgres://USER@HOST/DB"
    )]
    Scheme(String),
    /// The cause is kept as text in the message: as an error `source` too, a printed error
    /// chain would repeat it.
    #[error("cannot open the database {url}: {cause}")]
    Open { url: String, cause: String },
    #[error("cannot bring the database schema up to date: {0}")]
    Migrate(String),
    #[error("{0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("stored data is not valid: {0}")]
    Corrupt(String),
    /// A group commit failed as a whole, for every write in it.
    #[error("database error: {0}")]
    Commit(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Agencies and their agents.
#[async_trait]
pub trait AgencyStore: Send + Sync {
    /// Inserts the agency or replaces the one with its id (agents included), atomically.
    /// Another agency of the same owner with the same name is a [`StoreError::Conflict`].
    async fn save_agency(&self, agency: &Agency) -> Result<()>;
    async fn agency(&self, id: AgencyId) -> Result<Option<Agency>>;
    /// What a cached copy is checked against, in one small read (`None`: no such agency).
    async fn agency_state(&self, id: AgencyId) -> Result<Option<AgencyState>>;
    async fn agency_by_name(&self, owner: &str, name: &str) -> Result<Option<Agency>>;
    /// The owner's agencies, by name, each with its state: a constant number of statements,
    /// however many agencies.
    async fn list_agencies(&self, owner: &str) -> Result<Vec<(Agency, AgencyState)>>;
    /// Deletes the agency with everything of it (agents, versions, conversations, keys);
    /// false when there was none.
    async fn delete_agency(&self, id: AgencyId) -> Result<bool>;
    /// Stores `body` (the agency file) as the agency's next version, the one served from now
    /// on, and moves its revision.
    async fn publish(
        &self,
        id: AgencyId,
        body: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<Published>;
    /// A published version and its agency file.
    async fn version(&self, id: AgencyId, version: u32) -> Result<Option<(Published, String)>>;
    /// Every published version, newest first.
    async fn versions(&self, id: AgencyId) -> Result<Vec<Published>>;
}

/// Where an agency stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgencyState {
    /// Changes whenever the agency is saved or published.
    pub revision: i64,
    /// The version served (`None`: never published).
    pub published: Option<u32>,
}

/// People's accounts and their browsers' login sessions.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Another account with the same email is a [`StoreError::Conflict`].
    async fn create_user(&self, user: &User) -> Result<()>;
    async fn user(&self, id: UserId) -> Result<Option<User>>;
    async fn user_by_email(&self, email: &Email) -> Result<Option<User>>;
    async fn set_password(&self, id: UserId, hash: &PasswordHash) -> Result<()>;
    async fn create_session(&self, session: &LoginSession) -> Result<()>;
    /// The user of an unexpired session.
    async fn session_user(
        &self,
        token_hash: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<User>>;
    async fn delete_session(&self, token_hash: &str) -> Result<()>;
    /// Ends every session of the user but `keep` (after a password change).
    /// The time of the `nth` newest failed log-in counted under `key` after `since` (1 is the
    /// newest), when there are that many.
    async fn login_failure(
        &self,
        key: &str,
        since: chrono::DateTime<chrono::Utc>,
        nth: u32,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>>;
    /// Counts a failed log-in `at` under each of `keys`, and forgets every failure before
    /// `forget_before`.
    async fn add_login_failure(
        &self,
        keys: &[String],
        at: chrono::DateTime<chrono::Utc>,
        forget_before: chrono::DateTime<chrono::Utc>,
    ) -> Result<()>;
    async fn delete_other_sessions(&self, user: UserId, keep: &str) -> Result<()>;
}

/// What one step of a conversation writes, all of it or none: a new conversation, messages,
/// a turn's record, the transcript hash a Chat Completions request continues it by.
///
/// Concurrent writes may share one database transaction (group commit); each still succeeds
/// or fails alone.
#[derive(Clone, Debug, Default)]
pub struct Write {
    pub conversation: Option<Conversation>,
    pub messages: Vec<Message>,
    /// Inserted, or updated when they exist: the turn's record, or (a forked conversation)
    /// the records of the turns it copies.
    pub turns: Vec<TurnRecord>,
    pub thread: Option<ApiThread>,
}

impl Write {
    pub fn is_empty(&self) -> bool {
        self.conversation.is_none()
            && self.messages.is_empty()
            && self.turns.is_empty()
            && self.thread.is_none()
    }
}

/// A key's conversation and the hash of its visible transcript at the end of its turn number
/// `turn`: one for every answered turn, so that a request repeating any of them (a
/// regenerated or edited message) is found. A hash names one conversation (the latest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiThread {
    pub key: uuid::Uuid,
    pub hash: String,
    pub conversation: ConversationId,
    pub turn: u32,
}

/// A Responses API response as stored: its agency, the conversation and turn it answered (or
/// paused), and the response object and input items as the edge sent and took them (JSON).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiResponse {
    pub id: String,
    pub agency: AgencyId,
    pub conversation: ConversationId,
    pub turn: u32,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub body: String,
    pub input: String,
}

/// An A2A task (issue 34): a message an agency's key sent over A2A, and the turn it ran in
/// its conversation. `state` is the runtime's name for it; `ended` marks a final state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTask {
    pub id: uuid::Uuid,
    pub agency: AgencyId,
    pub conversation: ConversationId,
    pub state: String,
    pub ended: bool,
    /// The turn it ran, once it started.
    pub turn: Option<u32>,
    /// The client's id of the message, and its text.
    pub message_id: String,
    pub request: String,
    /// The answer, once there is one.
    pub answer: String,
    /// What the state says beside it (why it failed).
    pub note: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// Which of an agency's tasks [`TaskStore::tasks`] lists.
#[derive(Clone, Debug, Default)]
pub struct TaskFilter {
    pub conversation: Option<ConversationId>,
    pub state: Option<String>,
    pub offset: u32,
    pub limit: u32,
}

/// A stored transcript a request's history matched (see [`KeyStore::api_threads`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadMatch {
    pub hash: String,
    pub conversation: ConversationId,
    /// The turn whose answer ends the transcript (0: recorded before turns were; the latest).
    pub turn: u32,
    /// The conversation's latest turn now.
    pub last_turn: u32,
}

/// Conversations, their messages and their turns.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Writes it atomically and hands it back (its messages go on to contexts).
    async fn write(&self, write: Write) -> Result<Write>;
    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>>;
    /// Newest first.
    async fn list_conversations(&self, agency: AgencyId) -> Result<Vec<Conversation>>;
    /// Every message of the conversation, in `seq` order.
    async fn messages(&self, conversation: ConversationId) -> Result<Vec<Message>>;
    /// The messages written during one turn, in `seq` order.
    async fn turn_messages(
        &self,
        conversation: ConversationId,
        turn: TurnId,
    ) -> Result<Vec<Message>>;
    /// The messages of its turns numbered up to `number` and those of no turn (system prompts,
    /// seeded history), in `seq` order: what a fork after that turn copies.
    async fn messages_through(
        &self,
        conversation: ConversationId,
        number: u32,
    ) -> Result<Vec<Message>>;
    /// In order.
    async fn turns(&self, conversation: ConversationId) -> Result<Vec<TurnRecord>>;
    /// The latest turn's record, read alone.
    async fn last_turn(&self, conversation: ConversationId) -> Result<Option<TurnRecord>>;
    /// These messages of the conversation (those it has), in `seq` order.
    async fn messages_by_id(
        &self,
        conversation: ConversationId,
        ids: &[agency_core::MessageId],
    ) -> Result<Vec<Message>>;
    /// Takes the conversation's turn lock for `holder` until `lease` from now, or extends it
    /// when `holder` has it: one turn at a time in a conversation, across every process on the
    /// store. A lease not extended expires, so a dead process's lock frees by itself.
    async fn lock_turn(
        &self,
        conversation: ConversationId,
        holder: uuid::Uuid,
        lease: std::time::Duration,
    ) -> Result<TurnLock>;
    /// Gives the lock up, if `holder` still has it.
    async fn unlock_turn(&self, conversation: ConversationId, holder: uuid::Uuid) -> Result<()>;
}

/// Notices between the processes sharing a store, for their live views.
#[async_trait]
pub trait NoticeStore: Send + Sync {
    /// Whether other processes may share the store: PostgreSQL's may; a SQLite file is one
    /// process's.
    fn shared(&self) -> bool;
    /// Tells every process listening (this one too) these notices, in order; nothing where
    /// the store is not shared.
    async fn notify(&self, notices: &[String]) -> Result<()>;
    /// Every process's notices from now on (listening has begun when this returns), as they
    /// come; the stream reconnects by itself and misses what was told meanwhile. `None` where
    /// the store is not shared.
    async fn listen(&self) -> Result<Option<futures::stream::BoxStream<'static, String>>>;
}

/// What [`KeyStore::count_key_request`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeyRate {
    /// The request was counted: it may go on.
    pub allowed: bool,
    /// Requests counted this minute (before this one), and in the previous minute.
    pub current: u32,
    pub previous: u32,
    /// The share of the previous minute still within the last 60 seconds, 0 to 1.
    pub weight: f64,
}

/// What [`ConversationStore::lock_turn`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnLock {
    /// Taken: the conversation's next `seq`, read with the lock, so that a copy of its messages
    /// kept in memory can tell whether another process wrote since.
    Taken { next_seq: i64 },
    /// Another holder has it, and its lease has not expired.
    Held,
}

/// A provider key as stored: sealed bytes, never the key itself.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedKey {
    pub owner: String,
    pub provider: String,
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
    /// The key's last characters, to tell keys apart in lists.
    pub suffix: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl std::fmt::Debug for SealedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SealedKey({}/{} …{})",
            self.owner, self.provider, self.suffix
        )
    }
}

/// Provider keys users stored, sealed by the layer above.
#[async_trait]
pub trait SecretStore: Send + Sync {
    /// Stores or replaces the owner's key for a provider.
    async fn put_provider_key(&self, key: &SealedKey) -> Result<()>;
    /// Stores the key unless one is stored already; true when this one was stored.
    async fn add_provider_key(&self, key: &SealedKey) -> Result<bool>;
    async fn provider_key(&self, owner: &str, provider: &str) -> Result<Option<SealedKey>>;
    async fn provider_keys(&self, owner: &str) -> Result<Vec<SealedKey>>;
    /// Every owner's keys (to re-seal them under a new master key).
    async fn all_provider_keys(&self) -> Result<Vec<SealedKey>>;
    /// Replaces the sealed bytes of these keys, all or none.
    async fn reseal_provider_keys(&self, keys: &[SealedKey]) -> Result<()>;
    /// True when there was a key to delete.
    async fn delete_provider_key(&self, owner: &str, provider: &str) -> Result<bool>;
}

/// API keys, stored as keyed hashes.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Another unrevoked key of the agency with the same name is a [`StoreError::Conflict`].
    async fn create_api_key(&self, key: &agency_core::ApiKey) -> Result<()>;
    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<agency_core::ApiKey>>;
    /// Revoked ones included, oldest first.
    async fn api_keys(&self, agency: AgencyId) -> Result<Vec<agency_core::ApiKey>>;
    /// Revokes the agency's unrevoked key of that name; false when there is none.
    async fn revoke_api_key(
        &self,
        agency: AgencyId,
        name: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool>;
    /// Counts a request of `key` in the current minute (the database's clock) unless that would
    /// take its rate over `limit` a minute, estimated as this minute's count plus the previous
    /// minute's weighted by the share of it still within the last 60 seconds. `None` where one
    /// process has the store (SQLite): it counts in memory.
    async fn count_key_request(&self, key: uuid::Uuid, limit: u32) -> Result<Option<KeyRate>>;
    /// Sets the budgets of the agency's unrevoked key named `name`; false when it has none.
    async fn set_api_key_budgets(
        &self,
        agency: AgencyId,
        name: &str,
        budgets: &agency_core::KeyBudgets,
    ) -> Result<bool>;
    /// Records when keys were last used (never moving a time backwards), in one write.
    async fn touch_api_keys(
        &self,
        used: &[(uuid::Uuid, chrono::DateTime<chrono::Utc>)],
    ) -> Result<()>;
    /// The transcripts of `key` stored (by [`ConversationStore::write`]) under any of
    /// `hashes`, in one query.
    async fn api_threads(&self, key: uuid::Uuid, hashes: &[String]) -> Result<Vec<ThreadMatch>>;
    /// Stores a response; its id is new.
    async fn put_api_response(&self, response: &ApiResponse) -> Result<()>;
    /// The agency's response of that id.
    async fn api_response(&self, agency: AgencyId, id: &str) -> Result<Option<ApiResponse>>;
    /// True when the agency had a response of that id.
    async fn delete_api_response(&self, agency: AgencyId, id: &str) -> Result<bool>;
}

/// A2A tasks.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Stores a new task.
    async fn put_task(&self, task: &StoredTask) -> Result<()>;
    /// Writes the task's state, turn, answer, note, `ended` and `updated_at`, unless it had
    /// ended: false then (or when there is none).
    async fn update_task(&self, task: &StoredTask) -> Result<bool>;
    /// The agency's task of that id.
    async fn task(&self, agency: AgencyId, id: uuid::Uuid) -> Result<Option<StoredTask>>;
    /// The agency's tasks as `filter` says, newest first, and how many match in all.
    async fn tasks(&self, agency: AgencyId, filter: &TaskFilter) -> Result<(Vec<StoredTask>, u64)>;
}

/// One budget a call is paid from: its scope (`key:ID`, `user:KEY:END USER`, `agency:ID`),
/// the start of its current period (Unix seconds, 0 for a total budget) and its limit in
/// pico-dollars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpendLine {
    pub scope: String,
    pub period_start: i64,
    pub limit: i64,
}

/// What a scope spent in one period, in pico-dollars (and tokens).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpendRow {
    pub scope: String,
    pub period_start: i64,
    /// Settled: what the calls that ended cost.
    pub spent: i64,
    /// Held by calls still running.
    pub reserved: i64,
    pub tokens: i64,
}

/// Spend against budgets, held in the database so that every process on it sees one amount.
#[async_trait]
pub trait SpendStore: Send + Sync {
    /// Reserves `amount` on every line, unless one of them is spent (what it spent and holds
    /// reaches its limit): on all of them or none, atomically against every other process.
    /// `None` when reserved; else the index of the first line that refused.
    async fn reserve(&self, lines: &[SpendLine], amount: i64) -> Result<Option<usize>>;
    /// Settles a reservation of `reserved` on `lines` (the same lines, same periods) to what
    /// the call cost and the tokens it used. What each line has spent now, in order.
    async fn settle(
        &self,
        lines: &[SpendLine],
        reserved: i64,
        cost: i64,
        tokens: i64,
    ) -> Result<Vec<i64>>;
    /// What `scope` spent and holds in its period starting `period_start` (zero when nothing).
    async fn spent(&self, scope: &str, period_start: i64) -> Result<SpendRow>;
    /// The rows of the scopes that begin with `prefix`, newest period first, at most `limit`.
    async fn spend(&self, prefix: &str, limit: u32) -> Result<Vec<SpendRow>>;
}

/// Small server-wide facts.
#[async_trait]
pub trait SettingsStore: Send + Sync {
    /// Records `key` the first time it is claimed: true then, false ever after.
    async fn claim_once(&self, key: &str) -> Result<bool>;
    /// Whether `key` was ever claimed.
    async fn is_claimed(&self, key: &str) -> Result<bool>;
    /// The database answers and its schema is the one this program knows (every migration
    /// applied, none newer); else why not.
    async fn ready(&self) -> Result<()>;
    /// Records that `process` is alive `at` (and forgets processes not seen for a day).
    async fn alive(&self, process: uuid::Uuid, at: chrono::DateTime<chrono::Utc>) -> Result<()>;
}

/// Agents' memories (spec 002): observations, reflections, and the plans they lead to.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Stores a memory and, for a reflection, the links to its sources, atomically.
    async fn save_memory(&self, memory: &agency_core::memory::Memory) -> Result<()>;
    async fn memory(
        &self,
        id: agency_core::memory::MemoryId,
    ) -> Result<Option<agency_core::memory::Memory>>;
    /// The agent's memories made after `since`, newest first, at most `limit`.
    async fn memories_since(
        &self,
        agency: AgencyId,
        agent: agency_core::AgentId,
        since: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> Result<Vec<agency_core::memory::Memory>>;
    /// The observations the conversation's chat messages led to, oldest first (without
    /// sources: observations have none).
    async fn memories_of_conversation(
        &self,
        conversation: agency_core::ConversationId,
    ) -> Result<Vec<agency_core::memory::Memory>>;
    /// Stores a plan whole: inserted, or updated in place with its tasks and actions replaced,
    /// atomically. A second active plan for the same agent is a [`StoreError::Conflict`].
    async fn save_plan(&self, plan: &agency_core::plan::Plan) -> Result<()>;
    /// The agent's active plan, with every task (cancelled ones too) and their actions.
    async fn active_plan(
        &self,
        agency: AgencyId,
        agent: agency_core::AgentId,
    ) -> Result<Option<agency_core::plan::Plan>>;
}

/// Roundtable rooms: their participants and messages.
#[async_trait]
pub trait RoomStore: Send + Sync {
    /// The room with its first participants, atomically.
    async fn create_room(&self, room: &Room, participants: &[Participant]) -> Result<()>;
    async fn room(&self, id: RoomId) -> Result<Option<Room>>;
    /// The owner's rooms, newest first.
    async fn rooms(&self, owner: &str) -> Result<Vec<Room>>;
    /// With its participants and messages; false when there was none.
    async fn delete_room(&self, id: RoomId) -> Result<bool>;
    /// Inserts or updates. A name another participant of the room has (without regard to
    /// case) is a [`StoreError::Conflict`].
    async fn put_participant(&self, participant: &Participant) -> Result<()>;
    /// Its messages stay, with its name.
    async fn delete_participant(&self, room: RoomId, id: ParticipantId) -> Result<bool>;
    /// In display order.
    async fn participants(&self, room: RoomId) -> Result<Vec<Participant>>;
    /// Appends the message as the room's next (its `seq` is set here) and returns it.
    async fn add_room_message(&self, message: RoomMessage) -> Result<RoomMessage>;
    /// Records that `agents` are about to answer `asked` in `process`, until
    /// [`RoomStore::add_room_answer`] stores each one's answer: what a crash leaves recorded,
    /// [`RoomStore::interrupted_answers`] finds.
    async fn start_answers(
        &self,
        room: RoomId,
        asked: RoomMessageId,
        agents: &[ParticipantId],
        process: uuid::Uuid,
    ) -> Result<()>;
    /// Appends an agent's answer to `asked` (or its failure) as [`RoomStore::add_room_message`]
    /// does, and in the same transaction clears its record of answering.
    async fn add_room_answer(
        &self,
        message: RoomMessage,
        asked: RoomMessageId,
    ) -> Result<RoomMessage>;
    /// Every answer recorded as started and never stored by a process other than `except`
    /// that has not said it was alive since `unseen_since` ([`SettingsStore::alive`]):
    /// `(room, asked, agent)`.
    async fn interrupted_answers(
        &self,
        except: uuid::Uuid,
        unseen_since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(RoomId, RoomMessageId, ParticipantId)>>;
    /// False when the room has no such message.
    async fn set_included(&self, room: RoomId, id: RoomMessageId, included: bool) -> Result<bool>;
    /// In order.
    async fn room_messages(&self, room: RoomId) -> Result<Vec<RoomMessage>>;
    /// One message of the room.
    async fn room_message(&self, room: RoomId, id: RoomMessageId) -> Result<Option<RoomMessage>>;
    /// Inserts or updates (name and text). A name the owner has for another definition of
    /// the kind (without regard to case) is a [`StoreError::Conflict`].
    async fn put_definition(&self, definition: &Definition) -> Result<()>;
    async fn definition(&self, id: DefinitionId) -> Result<Option<Definition>>;
    /// The owner's, roles first, by name.
    async fn definitions(&self, owner: &str) -> Result<Vec<Definition>>;
    /// Deletes it; the agents pointing to it keep its text as their own, in the same
    /// transaction. False when there was none.
    async fn delete_definition(&self, id: DefinitionId) -> Result<bool>;
}

/// Tool calls that wait for a person's approval (issue 36).
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Stores a new pending approval.
    async fn put_approval(&self, approval: &agency_core::Approval) -> Result<()>;
    async fn approval(&self, id: agency_core::ApprovalId) -> Result<Option<agency_core::Approval>>;
    /// The turn's approvals, in the order they were asked.
    async fn turn_approvals(&self, turn: agency_core::TurnId)
    -> Result<Vec<agency_core::Approval>>;
    /// The pending approvals of the agencies `owner` owns, oldest first.
    async fn pending_approvals(&self, owner: &str) -> Result<Vec<agency_core::Approval>>;
    /// Answers it, if it is still pending (the first answer wins): false when it was not.
    async fn answer_approval(
        &self,
        id: agency_core::ApprovalId,
        answer: &agency_core::approval::Answer,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool>;
    /// Marks an approved call started, if nobody did: false when someone had (it is not run
    /// again).
    async fn start_approved(
        &self,
        id: agency_core::ApprovalId,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool>;
    /// Keeps a started call's result (once).
    async fn finish_approved(
        &self,
        id: agency_core::ApprovalId,
        result: &str,
        is_error: bool,
    ) -> Result<()>;
    /// Sets (or replaces) the agency's approval webhook.
    async fn put_approval_webhook(&self, hook: &agency_core::ApprovalWebhook) -> Result<()>;
    async fn approval_webhook(
        &self,
        agency: agency_core::AgencyId,
    ) -> Result<Option<agency_core::ApprovalWebhook>>;
    /// Removes it: false when there was none.
    async fn delete_approval_webhook(&self, agency: agency_core::AgencyId) -> Result<bool>;
}

/// Everything the server stores.
pub trait Store:
    AgencyStore
    + ConversationStore
    + SettingsStore
    + SecretStore
    + KeyStore
    + MemoryStore
    + AccountStore
    + RoomStore
    + NoticeStore
    + TaskStore
    + SpendStore
    + ApprovalStore
{
}
impl<
    T: AgencyStore
        + ConversationStore
        + SettingsStore
        + SecretStore
        + KeyStore
        + MemoryStore
        + AccountStore
        + RoomStore
        + NoticeStore
        + TaskStore
        + SpendStore
        + ApprovalStore,
> Store for T
{
}

/// Opens (creating if needed) and migrates the database at `url`.
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or_default();
    match scheme {
        "sqlite" => Ok(Arc::new(SqliteStore::open(url).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(PostgresStore::open(url).await?)),
        _ => Err(StoreError::Scheme(redact(url))),
    }
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            super::redact("postgres://me:secret@db/x"),
            "postgres://me:***@db/x"
        );
        assert_eq!(super::redact("postgres://me@db/x"), "postgres://me@db/x");
        assert_eq!(super::redact("sqlite://a.db"), "sqlite://a.db");
    }
}

pub mod testing {
    //! Databases for tests: a fresh SQLite file, or a fresh schema on the PostgreSQL server
    //! named by `AGENCY_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/test`).

    use sqlx::Connection;

    /// The server the Postgres suites use.
    pub fn postgres_server() -> String {
        std::env::var("AGENCY_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
    }

    /// A URL for a new, empty schema on the test server; `None` (the suite skips) when no
    /// server answers — unless `CI=true`, where a missing server fails the run.
    pub async fn postgres_url() -> Option<String> {
        let server = postgres_server();
        let mut conn = match sqlx::PgConnection::connect(&server).await {
            Ok(c) => c,
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                #[allow(clippy::panic)]
                {
                    panic!(
                        "CI=true but PostgreSQL at {} is not reachable: {e}",
                        super::redact(&server)
                    )
                }
            }
            Err(e) => {
                eprintln!(
                    "skipping: PostgreSQL at {} is not reachable: {e}",
                    super::redact(&server)
                );
                return None;
            }
        };
        let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
        let create = format!("CREATE SCHEMA {schema}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(&mut conn)
            .await
            .ok()?;
        let sep = if server.contains('?') { '&' } else { '?' };
        Some(format!("{server}{sep}options=-c%20search_path%3D{schema}"))
    }
}
