//! Group commit on PostgreSQL: the writes of different conversations that arrive while a commit
//! runs share the next one (one transaction, one WAL flush), each still succeeding or failing
//! alone. One task commits; a write alone pays a channel hop, nothing else.

use agency_core::{Conversation, Message, TurnRecord};
use sqlx::{PgPool, Postgres, QueryBuilder, Transaction};
use tokio::sync::{mpsc, oneshot};

use crate::shared::conversations::{self, MessageRow, TurnRow};
use crate::{ApiThread, Result, StoreError, Write};

/// A write waiting for its commit, and where its result goes.
pub(super) type Queued = (Write, oneshot::Sender<Result<Write>>);

/// Writes per commit, at most.
const MAX_GROUP: usize = 256;
/// Rows per multi-row INSERT (PostgreSQL allows 65,535 parameters; a row has 18).
const ROWS_PER_INSERT: usize = 1_000;
/// Parameters one statement may carry.
const MAX_PARAMS: usize = 65_000;

/// Starts the task that commits what is queued; it ends when the sender is dropped.
pub(super) fn committer(pool: PgPool) -> mpsc::UnboundedSender<Queued> {
    let (queue, mut queued) = mpsc::unbounded_channel::<Queued>();
    tokio::spawn(async move {
        let mut group: Vec<Queued> = Vec::with_capacity(MAX_GROUP);
        while queued.recv_many(&mut group, MAX_GROUP).await > 0 {
            let writes: Vec<&Write> = group.iter().map(|(w, _)| w).collect();
            let started = std::time::Instant::now();
            let results = commit(&pool, &writes).await;
            agency_telemetry::metrics().commit(
                "postgres",
                writes.len(),
                started.elapsed().as_secs_f64(),
            );
            for ((write, done), result) in group.drain(..).zip(results) {
                let _ = done.send(result.map(|()| write));
            }
        }
    });
    queue
}

/// Commits a group: all in one transaction; should that fail (a write breaking a constraint,
/// say), each write again in its own, so that a failure is its write's alone.
async fn commit(pool: &PgPool, writes: &[&Write]) -> Vec<Result<()>> {
    if let [one] = writes {
        return vec![alone(pool, one).await];
    }
    match together(pool, writes).await {
        Ok(()) => writes.iter().map(|_| Ok(())).collect(),
        Err(_) => {
            let mut results = Vec::with_capacity(writes.len());
            for w in writes {
                results.push(alone(pool, w).await);
            }
            results
        }
    }
}

/// One write in its own transaction; a write of messages alone is one statement, atomic by
/// itself, with no BEGIN/COMMIT round trips.
async fn alone(pool: &PgPool, w: &Write) -> Result<()> {
    if w.is_empty() {
        return Ok(());
    }
    if w.conversation.is_none()
        && w.turns.is_empty()
        && w.thread.is_none()
        && w.messages.len() <= ROWS_PER_INSERT
    {
        let messages: Vec<&Message> = w.messages.iter().collect();
        insert_messages(&messages).build().execute(pool).await?;
        return Ok(());
    }
    together(pool, &[w]).await
}

/// The writes at once: as one statement when its parameters fit (one round trip, atomic by
/// itself: its parts are `WITH` clauses, and foreign keys are checked at its end), else in a
/// transaction.
async fn together(pool: &PgPool, writes: &[&Write]) -> Result<()> {
    let conversations: Vec<&Conversation> = writes
        .iter()
        .filter_map(|w| w.conversation.as_ref())
        .collect();
    let messages: Vec<&Message> = writes.iter().flat_map(|w| &w.messages).collect();
    let turns: Vec<&TurnRecord> = writes.iter().flat_map(|w| &w.turns).collect();
    let threads: Vec<&ApiThread> = writes.iter().filter_map(|w| w.thread.as_ref()).collect();
    let params =
        4 * conversations.len() + 18 * messages.len() + 11 * turns.len() + 4 * threads.len();
    if params > MAX_PARAMS {
        return in_transaction(pool, writes).await;
    }
    let mut q = QueryBuilder::<Postgres>::new("WITH ");
    let mut parts = 0;
    if !conversations.is_empty() {
        part(&mut q, &mut parts, conversations::INSERT_CONVERSATIONS);
        q.push_values(conversations, |mut b, c| {
            b.push_bind(c.id.0)
                .push_bind(c.agency_id.0)
                .push_bind(c.version.map(i64::from))
                .push_bind(c.created_at);
        });
        q.push(" RETURNING 1)");
    }
    if !messages.is_empty() {
        part(&mut q, &mut parts, conversations::INSERT_MESSAGES);
        push_messages(&mut q, &messages);
        q.push(" RETURNING 1)");
    }
    if !turns.is_empty() {
        let (head, tail) = conversations::SAVE_TURNS;
        part(&mut q, &mut parts, head);
        q.push_values(turns, |mut b, t| {
            let r = TurnRow::from(t);
            b.push_bind(r.id)
                .push_bind(r.conversation_id)
                .push_bind(r.number)
                .push_bind(r.started_at)
                .push_bind(r.finished_at)
                .push_bind(r.stopped_by)
                .push_bind(r.hops)
                .push_bind(r.prompt_tokens)
                .push_bind(r.completion_tokens)
                .push_bind(r.error)
                .push_bind(r.cost_pico);
        });
        q.push(tail).push(" RETURNING 1)");
    }
    if !threads.is_empty() {
        let (head, tail) = conversations::PUT_API_THREADS;
        part(&mut q, &mut parts, head);
        q.push_values(threads, |mut b, t| {
            b.push_bind(t.key)
                .push_bind(t.hash.clone())
                .push_bind(t.conversation.0)
                .push_bind(i64::from(t.turn));
        });
        q.push(tail).push(" RETURNING 1)");
    }
    if parts == 0 {
        return Ok(());
    }
    q.push(" SELECT 1").build().execute(pool).await?;
    Ok(())
}

/// Opens the next `WITH` part, `p{n} AS (` and its statement's head.
fn part(q: &mut QueryBuilder<Postgres>, parts: &mut usize, head: &str) {
    if *parts > 0 {
        q.push(", ");
    }
    q.push(format!("p{parts} AS (")).push(head);
    *parts += 1;
}

/// The writes in one transaction, for those too big for one statement: conversations first,
/// then every message in multi-row INSERTs, then turn records and transcripts.
async fn in_transaction(pool: &PgPool, writes: &[&Write]) -> Result<()> {
    let mut tx = pool.begin().await?;
    for c in writes.iter().filter_map(|w| w.conversation.as_ref()) {
        sqlx::query(conversations::INSERT_CONVERSATION)
            .bind(c.id.0)
            .bind(c.agency_id.0)
            .bind(c.version.map(i64::from))
            .bind(c.created_at)
            .execute(&mut *tx)
            .await?;
    }
    let messages: Vec<&Message> = writes.iter().flat_map(|w| &w.messages).collect();
    for chunk in messages.chunks(ROWS_PER_INSERT) {
        insert_messages(chunk).build().execute(&mut *tx).await?;
    }
    for w in writes {
        save_turns_and_thread(&mut tx, w).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn save_turns_and_thread(tx: &mut Transaction<'_, Postgres>, w: &Write) -> Result<()> {
    for t in &w.turns {
        let r = TurnRow::from(t);
        sqlx::query(conversations::SAVE_TURN)
            .bind(r.id)
            .bind(r.conversation_id)
            .bind(r.number)
            .bind(r.started_at)
            .bind(r.finished_at)
            .bind(r.stopped_by)
            .bind(r.hops)
            .bind(r.prompt_tokens)
            .bind(r.completion_tokens)
            .bind(r.error)
            .bind(r.cost_pico)
            .execute(&mut **tx)
            .await?;
    }
    if let Some(t) = &w.thread {
        sqlx::query(conversations::PUT_API_THREAD)
            .bind(t.key)
            .bind(&t.hash)
            .bind(t.conversation.0)
            .bind(i64::from(t.turn))
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// One multi-row INSERT of `messages`.
fn insert_messages(messages: &[&Message]) -> QueryBuilder<Postgres> {
    let mut q = QueryBuilder::<Postgres>::new(conversations::INSERT_MESSAGES);
    push_messages(&mut q, messages);
    q
}

/// The `VALUES` of `messages`.
fn push_messages(q: &mut QueryBuilder<Postgres>, messages: &[&Message]) {
    q.push_values(messages, |mut b, m| {
        let r = MessageRow::from(*m);
        b.push_bind(r.id)
            .push_bind(r.conversation_id)
            .push_bind(r.turn_id)
            .push_bind(r.seq)
            .push_bind(r.agent_id)
            .push_bind(r.kind)
            .push_bind(r.linked_message_id)
            .push_bind(r.from_agent)
            .push_bind(r.to_agent)
            .push_bind(r.text)
            .push_bind(r.prompt_tokens)
            .push_bind(r.completion_tokens)
            .push_bind(r.latency_ms)
            .push_bind(r.included)
            .push_bind(r.created_at)
            .push_bind(m.role().as_str())
            .push_bind(r.tool)
            .push_bind(r.images);
    });
}

/// Queues `write` for the committer and waits for its result.
pub(super) async fn write(queue: &mpsc::UnboundedSender<Queued>, write: Write) -> Result<Write> {
    if write.is_empty() {
        return Ok(write);
    }
    let (done, result) = oneshot::channel();
    queue
        .send((write, done))
        .map_err(|_| StoreError::Commit("the store is closed".into()))?;
    result
        .await
        .unwrap_or_else(|_| Err(StoreError::Commit("the write was not committed".into())))
}
