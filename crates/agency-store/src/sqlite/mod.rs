//! SQLite, through rusqlite: the default, nothing to install.
//!
//! One connection behind a mutex, called in place from async code. Every statement here takes
//! microseconds, so running it on the caller's thread costs less than any handoff to a worker
//! thread would; long reads tell a multi-threaded runtime they block. WAL journal, synchronous
//! NORMAL: a commit survives a crash of the process; a power cut may lose the last commits but
//! never corrupts the database.

use std::sync::Mutex;
use std::time::Duration;

use agency_core::{Agency, AgencyId, Conversation, ConversationId, Message, TurnId, TurnRecord};
use async_trait::async_trait;
use chrono::Utc;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, TransactionBehavior, params};
use tokio::sync::oneshot;

use agency_core::Published;

use crate::shared::agencies::{self, AgencyRow, AgentRow, agencies_of, blocks_json};
use crate::shared::conversations::{self, ConversationRow, MessageRow, TurnRow};
use crate::shared::keys::{self, ApiKeyRow};
use crate::shared::secrets::{self, SealedKeyRow};
use crate::shared::settings;
use crate::{
    AgencyState, AgencyStore, ConversationStore, KeyStore, Result, SealedKey, SecretStore,
    SettingsStore, StoreError, Write, redact,
};

/// Schema versions, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_init.sql"),
    include_str!("../../migrations/sqlite/0002_memory.sql"),
    include_str!("../../migrations/sqlite/0003_plans.sql"),
    include_str!("../../migrations/sqlite/0004_accounts.sql"),
    include_str!("../../migrations/sqlite/0005_rooms.sql"),
    include_str!("../../migrations/sqlite/0006_bots.sql"),
    include_str!("../../migrations/sqlite/0007_definitions.sql"),
    include_str!("../../migrations/sqlite/0008_turn_cost.sql"),
    include_str!("../../migrations/sqlite/0009_api_threads_conversation.sql"),
    include_str!("../../migrations/sqlite/0010_room_answering.sql"),
];

mod accounts;
mod memory;
mod rooms;

pub struct SqliteStore {
    conn: Mutex<Connection>,
    group: Mutex<Group>,
    /// Dropped with the store, which stops the checkpointer.
    _checkpointer: Option<std::sync::mpsc::Sender<()>>,
}

/// How often the checkpointer copies the WAL into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);
/// WAL pages (4 KiB) past which the checkpointer also restarts the WAL, briefly holding
/// writers.
const WAL_RESTART_PAGES: i64 = 4_096;

/// Copies the WAL into the database file from a thread of its own, with a connection of its
/// own, so that no request waits for a checkpoint's syncs. A PASSIVE checkpoint never blocks
/// writers; once the WAL is wholly copied the next writer starts it over from the beginning.
/// Under load that never pauses, the WAL may not get that chance: past [`WAL_RESTART_PAGES`]
/// a RESTART checkpoint waits for a gap between writes and starts it over (keeping the file,
/// whose blocks the next frames reuse without allocating).
fn checkpointer(path: &str) -> Option<std::sync::mpsc::Sender<()>> {
    let conn = Connection::open(path).ok()?;
    conn.busy_timeout(BUSY_TIMEOUT).ok()?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("agency-sqlite-checkpoint".into())
        .spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(CHECKPOINT_EVERY)
            {
                let passive = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                    Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
                });
                let outcome = match passive {
                    Ok((log, _)) if log > WAL_RESTART_PAGES => {
                        conn.execute_batch("PRAGMA wal_checkpoint(RESTART)")
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                };
                if let Err(e) = outcome
                    && !is_busy(&e)
                {
                    tracing::warn!(error = %e, "a WAL checkpoint failed");
                }
            }
        });
    spawned.ok().map(|_| stop)
}

/// Writes waiting for a commit (group commit). One writer at a time, the *leader*, takes all
/// that are waiting and commits them in one transaction (see [`commit_group`]: one write's
/// failure stays its own); then it hands the lead to a writer that queued meanwhile.
/// A writer who finds no leader leads at once: alone, a write costs no handoff at all.
#[derive(Default)]
struct Group {
    pending: Vec<Pending>,
    leading: bool,
    next_ticket: u64,
}

struct Pending {
    ticket: u64,
    write: Write,
    /// Taken when the lead is handed to this writer.
    done: Option<oneshot::Sender<Signal>>,
}

enum Signal {
    Done(Box<Result<Write>>),
    /// The lead is yours: commit what is waiting, your own write among it.
    Lead,
}

impl SqliteStore {
    /// `sqlite://PATH`, `sqlite:PATH` or `sqlite::memory:`; the file is created if missing.
    pub async fn open(url: &str) -> Result<Self> {
        let open_err = |source: rusqlite::Error| StoreError::Open {
            url: redact(url),
            cause: source.to_string(),
        };
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        let path = rest.split('?').next().unwrap_or_default();
        let in_memory = path.is_empty() || path == ":memory:";
        let conn = if in_memory {
            Connection::open_in_memory()
        } else {
            Connection::open(path)
        }
        .map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Switching a new file to WAL takes an exclusive lock, and SQLite answers "busy" there
        // without waiting: processes opening a new database together retry (WAL is kept in the
        // file, so only the first opens ever race).
        let started = std::time::Instant::now();
        loop {
            match conn.execute_batch("PRAGMA journal_mode = WAL;") {
                Err(e) if is_busy(&e) && started.elapsed() < BUSY_TIMEOUT => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => break other.map_err(open_err)?,
            }
        }
        // Temporary files (statement and savepoint journals) in memory: they never outlive a
        // transaction, and on disk each page copied to them was a write(2).
        conn.execute_batch(
            "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
        )
        .map_err(open_err)?;
        let mut conn = conn;
        migrate(&mut conn)?;
        // A file's checkpoints run on a thread of their own (see `checkpointer`); if it cannot
        // start, commits checkpoint as SQLite does by default.
        let checkpointer = if in_memory { None } else { checkpointer(path) };
        if checkpointer.is_some() {
            conn.execute_batch("PRAGMA wal_autocheckpoint = 0;")
                .map_err(open_err)?;
        }
        Ok(Self {
            conn: Mutex::new(conn),
            group: Mutex::default(),
            _checkpointer: checkpointer,
        })
    }

    fn group(&self) -> std::sync::MutexGuard<'_, Group> {
        match self.group.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Commits what is waiting, as long as nobody else queued to take the lead over; returns
    /// the result of the write with ticket `mine`, which is among the first group.
    fn lead(&self, mine: u64) -> Result<Write> {
        let mut own = None;
        loop {
            let batch = {
                let mut g = self.group();
                if g.pending.is_empty() {
                    g.leading = false;
                    break;
                }
                std::mem::take(&mut g.pending)
            };
            let writes: Vec<&Write> = batch.iter().map(|p| &p.write).collect();
            let messages: usize = writes.iter().map(|w| w.messages.len()).sum();
            let commit = |conn: &mut Connection| commit_group(conn, &writes);
            let results = if messages > 100 {
                self.with_long(commit)
            } else {
                self.with(commit)
            };
            let mut results: Vec<Result<()>> = match results {
                Ok(each) => each,
                // The transaction itself failed: so did every write in it.
                Err(e) => {
                    let cause = e.to_string();
                    (0..batch.len())
                        .map(|_| Err(StoreError::Commit(cause.clone())))
                        .collect()
                }
            };
            for (p, result) in batch.into_iter().zip(results.drain(..)) {
                let result = result.map(|()| p.write);
                if p.ticket == mine {
                    own = Some(result);
                } else if let Some(done) = p.done {
                    let _ = done.send(Signal::Done(Box::new(result)));
                }
            }
            // Hand the lead on to the first writer still waiting; if none takes it (they all
            // gave up waiting), commit their writes here.
            let mut g = self.group();
            if g.pending.is_empty() {
                g.leading = false;
                break;
            }
            let handed = g
                .pending
                .iter_mut()
                .any(|p| p.done.take().is_some_and(|d| d.send(Signal::Lead).is_ok()));
            if handed {
                break;
            }
        }
        own.unwrap_or_else(|| Err(StoreError::Commit("the write was not committed".into())))
    }

    /// Runs `f` on the connection.
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let mut conn = match self.conn.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        Ok(f(&mut conn)?)
    }

    /// For reads that may be long (a whole conversation): on a multi-threaded runtime, other
    /// tasks move to another thread meanwhile.
    fn with_long<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let multi = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi {
            tokio::task::block_in_place(|| self.with(f))
        } else {
            self.with(f)
        }
    }

    fn one_agency(
        &self,
        conn: &Connection,
        row: Option<AgencyRow>,
    ) -> rusqlite::Result<Option<(AgencyRow, Vec<AgentRow>)>> {
        let Some(row) = row else { return Ok(None) };
        let agents = conn
            .prepare_cached(agencies::AGENTS_OF_AGENCY)?
            .query_map([row.id], agent_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Some((row, agents)))
    }
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let err = |e: rusqlite::Error| StoreError::Migrate(e.to_string());
    // Take the write lock before reading the version: processes starting together on a new
    // database wait for each other instead of both creating the tables.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let done: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    let done = usize::try_from(done).unwrap_or(usize::MAX);
    if done > MIGRATIONS.len() {
        return Err(StoreError::Migrate(format!(
            "the database is at schema version {done}, newer than this program knows ({}): upgrade agency",
            MIGRATIONS.len()
        )));
    }
    for migration in &MIGRATIONS[done..] {
        tx.execute_batch(migration).map_err(err)?;
    }
    let version = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
    tx.pragma_update(None, "user_version", version)
        .map_err(err)?;
    tx.commit().map_err(err)
}

/// How long a statement waits for another process's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation
        && f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}

fn one(rows: Option<(AgencyRow, Vec<AgentRow>)>) -> Result<Option<Agency>> {
    match rows {
        None => Ok(None),
        Some((row, agents)) => Ok(agencies_of(vec![row], agents)?.pop()),
    }
}

/// Writes a group in one transaction. Optimistically first, all writes straight into it: a
/// savepoint per write would copy every page it touches to a sub-journal. Should one fail
/// (rare: a constraint), the transaction is rolled back and the group written again with a
/// savepoint per write, so that the failure is that write's alone. The outer error fails them
/// all.
fn commit_group(conn: &mut Connection, writes: &[&Write]) -> rusqlite::Result<Vec<Result<()>>> {
    let tx = conn.transaction()?;
    let applied = writes.iter().try_for_each(|w| apply(&tx, w));
    match applied {
        Ok(()) => {
            return tx
                .commit()
                .map(|()| writes.iter().map(|_| Ok(())).collect());
        }
        Err(e) if writes.len() == 1 => return tx.rollback().map(|()| vec![Err(e.into())]),
        Err(_) => tx.rollback()?,
    }
    let mut tx = conn.transaction()?;
    let mut results = Vec::with_capacity(writes.len());
    for w in writes {
        let sp = tx.savepoint()?;
        match apply(&sp, w) {
            Ok(()) => {
                sp.commit()?;
                results.push(Ok(()));
            }
            Err(e) => {
                sp.finish()?; // rolls back to the savepoint
                results.push(Err(e.into()));
            }
        }
    }
    tx.commit()?;
    Ok(results)
}

fn apply(conn: &Connection, w: &Write) -> rusqlite::Result<()> {
    if let Some(c) = &w.conversation {
        conn.prepare_cached(conversations::INSERT_CONVERSATION)?
            .execute(params![c.id.0, c.agency_id.0, c.version, c.created_at])?;
    }
    if !w.messages.is_empty() {
        let mut insert = conn.prepare_cached(conversations::INSERT_MESSAGE)?;
        for m in &w.messages {
            let r = MessageRow::from(m);
            insert.execute(params![
                r.id,
                r.conversation_id,
                r.turn_id,
                r.seq,
                r.agent_id,
                r.kind,
                r.linked_message_id,
                r.from_agent,
                r.to_agent,
                r.text,
                r.prompt_tokens,
                r.completion_tokens,
                r.latency_ms,
                r.included,
                r.created_at,
                m.role().as_str()
            ])?;
        }
    }
    if let Some(t) = &w.turn {
        let r = TurnRow::from(t);
        conn.prepare_cached(conversations::SAVE_TURN)?
            .execute(params![
                r.id,
                r.conversation_id,
                r.number,
                r.started_at,
                r.finished_at,
                r.stopped_by,
                r.hops,
                r.prompt_tokens,
                r.completion_tokens,
                r.error,
                r.cost_pico
            ])?;
    }
    if let Some(t) = &w.thread {
        conn.prepare_cached(conversations::DROP_API_THREADS)?
            .execute(params![t.key, t.hash, t.conversation.0])?;
        conn.prepare_cached(conversations::PUT_API_THREAD)?
            .execute(params![t.key, t.hash, t.conversation.0])?;
    }
    Ok(())
}

#[async_trait]
impl AgencyStore for SqliteStore {
    async fn save_agency(&self, agency: &Agency) -> Result<()> {
        let now = Utc::now();
        let saved = self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                agencies::SAVE_AGENCY,
                params![
                    agency.id.0,
                    agency.owner,
                    agency.name,
                    agency.handle,
                    agency.protocol.as_str(),
                    i64::from(agency.manager.get()),
                    i64::from(agency.limits.max_hops),
                    agencies::deadline_ms(agency),
                    agencies::providers_json(&agency.providers),
                    now,
                    now
                ],
            )?;
            tx.execute(agencies::DELETE_AGENTS, [agency.id.0])?;
            {
                let mut insert = tx.prepare_cached(agencies::INSERT_AGENT)?;
                for (position, a) in (0i64..).zip(&agency.agents) {
                    insert.execute(params![
                        agency.id.0,
                        i64::from(a.id.get()),
                        position,
                        a.name,
                        a.handle,
                        a.role,
                        a.model.to_string(),
                        agencies::settings_json(a),
                        blocks_json(&a.blocks)
                    ])?;
                }
            }
            tx.commit()
        });
        match saved {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(agencies::name_taken(agency)),
            other => other,
        }
    }

    async fn agency(&self, id: AgencyId) -> Result<Option<Agency>> {
        let rows = self.with(|conn| {
            let row = conn
                .prepare_cached(agencies::AGENCY_BY_ID)?
                .query_row([id.0], agency_row)
                .optional()?;
            self.one_agency(conn, row)
        })?;
        one(rows)
    }

    async fn agency_state(&self, id: AgencyId) -> Result<Option<AgencyState>> {
        let state = self.with(|conn| {
            conn.prepare_cached(agencies::AGENCY_STATE)?
                .query_row([id.0], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
                })
                .optional()
        })?;
        state.map(agencies::agency_state).transpose()
    }

    async fn agency_by_name(&self, owner: &str, name: &str) -> Result<Option<Agency>> {
        let rows = self.with(|conn| {
            let row = conn
                .prepare_cached(agencies::AGENCY_BY_NAME)?
                .query_row(params![owner, name], agency_row)
                .optional()?;
            self.one_agency(conn, row)
        })?;
        one(rows)
    }

    async fn list_agencies(&self, owner: &str) -> Result<Vec<Agency>> {
        let (rows, agents) = self.with(|conn| {
            let rows = conn
                .prepare_cached(agencies::AGENCIES_OF_OWNER)?
                .query_map([owner], agency_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let agents = conn
                .prepare_cached(agencies::AGENTS_OF_OWNER)?
                .query_map([owner], agent_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((rows, agents))
        })?;
        agencies_of(rows, agents)
    }

    async fn delete_agency(&self, id: AgencyId) -> Result<bool> {
        self.with(|conn| Ok(conn.execute(agencies::DELETE_AGENCY, [id.0])? > 0))
    }

    async fn publish(
        &self,
        id: AgencyId,
        body: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<Published> {
        let version = self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if tx.execute(agencies::BUMP_REVISION, [id.0])? == 0 {
                return Ok(None);
            }
            let version: i64 = tx.query_row(agencies::NEXT_VERSION, [id.0], |r| r.get(0))?;
            tx.execute(agencies::INSERT_VERSION, params![id.0, version, body, at])?;
            tx.commit()?;
            Ok(Some(version))
        })?;
        let version = version.ok_or_else(|| StoreError::Conflict(format!("no agency {id}")))?;
        agencies::published(version, at)
    }

    async fn version(&self, id: AgencyId, version: u32) -> Result<Option<(Published, String)>> {
        let row = self.with(|conn| {
            conn.prepare_cached(agencies::VERSION)?
                .query_row(params![id.0, version], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get::<_, String>(2)?))
                })
                .optional()
        })?;
        row.map(|(v, at, body)| Ok((agencies::published(v, at)?, body)))
            .transpose()
    }

    async fn versions(&self, id: AgencyId) -> Result<Vec<Published>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(agencies::VERSIONS)?
                .query_map([id.0], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|(v, at)| agencies::published(v, at))
            .collect()
    }
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn write(&self, write: Write) -> Result<Write> {
        if write.is_empty() {
            return Ok(write);
        }
        let (done, signal) = oneshot::channel();
        let (ticket, lead) = {
            let mut g = self.group();
            let ticket = g.next_ticket;
            g.next_ticket += 1;
            g.pending.push(Pending {
                ticket,
                write,
                done: Some(done),
            });
            (ticket, !std::mem::replace(&mut g.leading, true))
        };
        if !lead {
            match signal.await {
                Ok(Signal::Done(result)) => return *result,
                Ok(Signal::Lead) => {}
                Err(_) => return Err(StoreError::Commit("the write was not committed".into())),
            }
        }
        self.lead(ticket)
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        let row = self.with(|conn| {
            conn.prepare_cached(conversations::CONVERSATION)?
                .query_row([id.0], conversation_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_conversations(&self, agency: AgencyId) -> Result<Vec<Conversation>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(conversations::CONVERSATIONS_OF_AGENCY)?
                .query_map([agency.0], conversation_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn messages(&self, conversation: ConversationId) -> Result<Vec<Message>> {
        let rows = self.with_long(|conn| {
            conn.prepare_cached(conversations::MESSAGES_OF_CONVERSATION)?
                .query_map([conversation.0], message_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn turn_messages(
        &self,
        conversation: ConversationId,
        turn: TurnId,
    ) -> Result<Vec<Message>> {
        let rows = self.with_long(|conn| {
            conn.prepare_cached(conversations::MESSAGES_OF_TURN)?
                .query_map([conversation.0, turn.0], message_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn turns(&self, conversation: ConversationId) -> Result<Vec<TurnRecord>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(conversations::TURNS_OF_CONVERSATION)?
                .query_map([conversation.0], turn_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }
}

#[async_trait]
impl SettingsStore for SqliteStore {
    async fn claim_once(&self, key: &str) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(settings::CLAIM_SETTING)?
                .execute(params![key, Utc::now().to_rfc3339()])
        })?;
        Ok(n == 1)
    }

    async fn is_claimed(&self, key: &str) -> Result<bool> {
        self.with(|conn| conn.prepare_cached(settings::SETTING_EXISTS)?.exists([key]))
    }
}

#[async_trait]
impl SecretStore for SqliteStore {
    async fn put_provider_key(&self, k: &SealedKey) -> Result<()> {
        self.with(|conn| {
            conn.prepare_cached(secrets::PUT_PROVIDER_KEY)?
                .execute(params![
                    k.owner,
                    k.provider,
                    k.nonce,
                    k.sealed,
                    k.suffix,
                    k.created_at
                ])
        })?;
        Ok(())
    }

    async fn add_provider_key(&self, k: &SealedKey) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(secrets::ADD_PROVIDER_KEY)?
                .execute(params![
                    k.owner,
                    k.provider,
                    k.nonce,
                    k.sealed,
                    k.suffix,
                    k.created_at
                ])
        })?;
        Ok(n == 1)
    }

    async fn provider_key(&self, owner: &str, provider: &str) -> Result<Option<SealedKey>> {
        let row = self.with(|conn| {
            conn.prepare_cached(secrets::PROVIDER_KEY)?
                .query_row(params![owner, provider], sealed_key_row)
                .optional()
        })?;
        Ok(row.map(Into::into))
    }

    async fn provider_keys(&self, owner: &str) -> Result<Vec<SealedKey>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(secrets::PROVIDER_KEYS_OF_OWNER)?
                .query_map([owner], sealed_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn all_provider_keys(&self) -> Result<Vec<SealedKey>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(secrets::ALL_PROVIDER_KEYS)?
                .query_map([], sealed_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn reseal_provider_keys(&self, keys: &[SealedKey]) -> Result<()> {
        self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut update = tx.prepare_cached(secrets::RESEAL_PROVIDER_KEY)?;
                for k in keys {
                    update.execute(params![k.nonce, k.sealed, k.owner, k.provider])?;
                }
            }
            tx.commit()
        })
    }

    async fn delete_provider_key(&self, owner: &str, provider: &str) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(secrets::DELETE_PROVIDER_KEY)?
                .execute(params![owner, provider])
        })?;
        Ok(n == 1)
    }
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn create_api_key(&self, k: &agency_core::ApiKey) -> Result<()> {
        let done = self.with(|conn| {
            conn.prepare_cached(keys::INSERT_API_KEY)?.execute(params![
                k.id,
                k.agency_id.0,
                k.name,
                k.prefix,
                k.hash,
                i64::from(k.rate_limit_per_minute),
                k.created_at,
                k.expires_at,
                k.last_used_at,
                k.revoked_at
            ])
        });
        match done {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(keys::key_name_taken(k)),
            other => other.map(|_| ()),
        }
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<agency_core::ApiKey>> {
        let row = self.with(|conn| {
            conn.prepare_cached(keys::API_KEY_BY_HASH)?
                .query_row([hash], api_key_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn api_keys(&self, agency: AgencyId) -> Result<Vec<agency_core::ApiKey>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(keys::API_KEYS_OF_AGENCY)?
                .query_map([agency.0], api_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn revoke_api_key(
        &self,
        agency: AgencyId,
        name: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<bool> {
        let n = self.with(|conn| {
            conn.prepare_cached(keys::REVOKE_API_KEY)?
                .execute(params![at, agency.0, name])
        })?;
        Ok(n > 0)
    }

    async fn api_thread(&self, key: uuid::Uuid, hash: &str) -> Result<Option<ConversationId>> {
        let id: Option<uuid::Uuid> = self.with(|conn| {
            conn.prepare_cached(keys::API_THREAD)?
                .query_row(params![key, hash], |r| r.get(0))
                .optional()
        })?;
        Ok(id.map(ConversationId))
    }

    async fn touch_api_keys(&self, used: &[(uuid::Uuid, chrono::DateTime<Utc>)]) -> Result<()> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            {
                let mut touch = tx.prepare_cached(keys::TOUCH_API_KEY)?;
                for (id, at) in used {
                    touch.execute(params![at, id])?;
                }
            }
            tx.commit()
        })
    }
}

fn agency_row(r: &Row<'_>) -> rusqlite::Result<AgencyRow> {
    Ok(AgencyRow {
        id: r.get("id")?,
        owner: r.get("owner")?,
        name: r.get("name")?,
        handle: r.get("handle")?,
        protocol: r.get("protocol")?,
        manager: r.get("manager")?,
        max_hops: r.get("max_hops")?,
        deadline_ms: r.get("deadline_ms")?,
        providers: r.get("providers")?,
    })
}

fn agent_row(r: &Row<'_>) -> rusqlite::Result<AgentRow> {
    Ok(AgentRow {
        agency_id: r.get("agency_id")?,
        id: r.get("id")?,
        name: r.get("name")?,
        handle: r.get("handle")?,
        role: r.get("role")?,
        model: r.get("model")?,
        sampling: r.get("sampling")?,
        blocks: r.get("blocks")?,
    })
}

fn conversation_row(r: &Row<'_>) -> rusqlite::Result<ConversationRow> {
    Ok(ConversationRow {
        id: r.get("id")?,
        agency_id: r.get("agency_id")?,
        version: r.get("version")?,
        created_at: r.get("created_at")?,
    })
}

fn message_row(r: &Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get("id")?,
        conversation_id: r.get("conversation_id")?,
        turn_id: r.get("turn_id")?,
        seq: r.get("seq")?,
        agent_id: r.get("agent_id")?,
        kind: r.get("kind")?,
        linked_message_id: r.get("linked_message_id")?,
        from_agent: r.get("from_agent")?,
        to_agent: r.get("to_agent")?,
        text: r.get("text")?,
        prompt_tokens: r.get("prompt_tokens")?,
        completion_tokens: r.get("completion_tokens")?,
        latency_ms: r.get("latency_ms")?,
        included: r.get("included")?,
        created_at: r.get("created_at")?,
    })
}

fn turn_row(r: &Row<'_>) -> rusqlite::Result<TurnRow> {
    Ok(TurnRow {
        id: r.get("id")?,
        conversation_id: r.get("conversation_id")?,
        number: r.get("number")?,
        started_at: r.get("started_at")?,
        finished_at: r.get("finished_at")?,
        stopped_by: r.get("stopped_by")?,
        hops: r.get("hops")?,
        prompt_tokens: r.get("prompt_tokens")?,
        completion_tokens: r.get("completion_tokens")?,
        error: r.get("error")?,
        cost_pico: r.get("cost_pico")?,
    })
}

fn sealed_key_row(r: &Row<'_>) -> rusqlite::Result<SealedKeyRow> {
    Ok(SealedKeyRow {
        owner: r.get("owner")?,
        provider: r.get("provider")?,
        nonce: r.get("nonce")?,
        sealed: r.get("sealed")?,
        suffix: r.get("suffix")?,
        created_at: r.get("created_at")?,
    })
}

fn api_key_row(r: &Row<'_>) -> rusqlite::Result<ApiKeyRow> {
    Ok(ApiKeyRow {
        id: r.get("id")?,
        agency_id: r.get("agency_id")?,
        name: r.get("name")?,
        prefix: r.get("prefix")?,
        hash: r.get("hash")?,
        rate_limit_per_minute: r.get("rate_limit_per_minute")?,
        created_at: r.get("created_at")?,
        expires_at: r.get("expires_at")?,
        last_used_at: r.get("last_used_at")?,
        revoked_at: r.get("revoked_at")?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

    use agency_core::{AgencyId, Conversation, ConversationId};
    use chrono::Utc;

    use super::*;

    fn new_conversation() -> Write {
        Write {
            conversation: Some(Conversation {
                id: ConversationId::new(),
                agency_id: AgencyId::new(),
                version: None,
                created_at: Utc::now(),
            }),
            ..Write::default()
        }
    }

    /// In one group, a failing write is rolled back to its savepoint; the writes before and
    /// after it commit.
    #[tokio::test]
    async fn a_failed_write_in_a_group_is_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&format!("sqlite://{}", dir.path().join("t.db").display()))
            .await
            .unwrap();
        store
            .with(|c| c.execute_batch("PRAGMA foreign_keys = OFF"))
            .unwrap();
        let (first, second) = (new_conversation(), new_conversation());
        let mut twice = new_conversation();
        twice.conversation.clone_from(&first.conversation);
        let writes = [&first, &twice, &second];
        let results = store.with(|c| commit_group(c, &writes)).unwrap();
        assert!(results[0].is_ok());
        assert!(results[1].is_err(), "the same conversation twice");
        assert!(results[2].is_ok());
        for w in [&first, &second] {
            let id = w.conversation.as_ref().unwrap().id;
            assert!(store.conversation(id).await.unwrap().is_some());
        }
    }

    /// Every answer of the Chat Completions API replaces its conversation's transcript hash:
    /// two index lookups, whatever the number of threads its key has (a scan here made each
    /// request as slow as the key was old).
    #[tokio::test]
    async fn replacing_a_transcript_hash_does_not_scan_the_keys_threads() {
        let store = SqliteStore::open("sqlite::memory:").await.unwrap();
        let plan: Vec<String> = store
            .with(|c| {
                c.prepare(&format!(
                    "EXPLAIN QUERY PLAN {}",
                    conversations::DROP_API_THREADS
                ))?
                .query_map(params![b"k".to_vec(), "h", b"c".to_vec()], |r| r.get(3))?
                .collect()
            })
            .unwrap();
        let lookups: Vec<&String> = plan.iter().filter(|l| l.contains("api_threads")).collect();
        assert_eq!(lookups.len(), 2, "{plan:?}");
        assert!(
            lookups.iter().any(|l| l.contains("(key_id=? AND hash=?)")),
            "{plan:?}"
        );
        assert!(
            lookups.iter().any(|l| l.contains("(conversation_id=?)")),
            "{plan:?}"
        );
    }

    /// SQLite numbers `$N` parameters in the order they first appear, while they are bound by
    /// position: SQL shared with PostgreSQL must name them in ascending order, or values land
    /// in the wrong places on SQLite alone.
    #[test]
    fn shared_sql_names_its_parameters_in_order() {
        let files = [
            ("agencies.rs", include_str!("../shared/agencies.rs")),
            ("accounts.rs", include_str!("../shared/accounts.rs")),
            (
                "conversations.rs",
                include_str!("../shared/conversations.rs"),
            ),
            ("settings.rs", include_str!("../shared/settings.rs")),
            ("secrets.rs", include_str!("../shared/secrets.rs")),
            ("keys.rs", include_str!("../shared/keys.rs")),
        ];
        for (file, text) in files {
            for (i, line) in text.lines().enumerate() {
                let mut seen: Vec<u32> = Vec::new();
                for part in line.split('$').skip(1) {
                    let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
                    if let Ok(n) = digits.parse::<u32>()
                        && !seen.contains(&n)
                    {
                        seen.push(n);
                    }
                }
                assert!(seen.is_sorted(), "{file} line {}: {line}", i + 1);
            }
        }
    }
}
