//! Group commit on PostgreSQL: the writes of different conversations that arrive while a commit
//! runs share the next one (one statement, one WAL flush), each still succeeding or failing
//! alone. One task commits; a write alone pays a channel hop, nothing else.
//!
//! A commit is one of two statements (`COMMIT_MESSAGES`, `COMMIT_GROUP`) whose text never
//! changes with the number of rows: each table's rows go as arrays, one per column. PostgreSQL
//! parses and plans each once per connection (sqlx keeps them prepared), and no group is too
//! big for one statement.

use agency_core::Message;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};

use std::collections::HashMap;

use uuid::Uuid;

use crate::shared::conversations::{self, COMMIT_GROUP, COMMIT_MESSAGES, MessageRow, TurnRow};
use crate::{Result, StoreError, Write};

/// A write waiting for its commit, and where its result goes.
pub(super) type Queued = (Write, oneshot::Sender<Result<Write>>);

/// Writes per commit, at most.
const MAX_GROUP: usize = 256;

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

/// Commits a group at once; should that fail (a write breaking a constraint, say), each write
/// again on its own, so that a failure is its write's alone.
async fn commit(pool: &PgPool, writes: &[&Write]) -> Vec<Result<()>> {
    match together(pool, writes).await {
        Ok(()) => writes.iter().map(|_| Ok(())).collect(),
        Err(e) if writes.len() == 1 => vec![Err(e)],
        Err(_) => {
            let mut results = Vec::with_capacity(writes.len());
            for w in writes {
                results.push(together(pool, &[w]).await);
            }
            results
        }
    }
}

/// The writes in one statement: `COMMIT_MESSAGES` when they are messages alone, else
/// `COMMIT_GROUP`.
async fn together(pool: &PgPool, writes: &[&Write]) -> Result<()> {
    let messages: Vec<&Message> = writes.iter().flat_map(|w| &w.messages).collect();
    let rows: Vec<MessageRow> = messages.iter().map(|m| MessageRow::from(*m)).collect();
    let conversations: Vec<_> = writes
        .iter()
        .filter_map(|w| w.conversation.as_ref())
        .collect();
    let prompts: Vec<Option<Vec<u8>>> = messages
        .iter()
        .map(|m| conversations::prompt_hash(m).map(|h| h.to_vec()))
        .collect();
    if prompts.iter().any(Option::is_some) {
        write_prompts(pool, &messages, &prompts, &conversations).await?;
    }
    let turns: Vec<TurnRow> = writes
        .iter()
        .flat_map(|w| &w.turns)
        .map(TurnRow::from)
        .collect();
    let threads: Vec<_> = writes.iter().filter_map(|w| w.thread.as_ref()).collect();
    if conversations.is_empty() && turns.is_empty() && threads.is_empty() {
        bind_messages(sqlx::query(COMMIT_MESSAGES), &rows, &messages, &prompts)
            .execute(pool)
            .await?;
        return Ok(());
    }
    bind_messages(sqlx::query(COMMIT_GROUP), &rows, &messages, &prompts)
        .bind(col(&conversations, |c| c.id.0))
        .bind(col(&conversations, |c| c.agency_id.0))
        .bind(col(&conversations, |c| c.version.map(i64::from)))
        .bind(col(&conversations, |c| c.created_at))
        .bind(col(&turns, |t| t.id))
        .bind(col(&turns, |t| t.conversation_id))
        .bind(col(&turns, |t| t.number))
        .bind(col(&turns, |t| t.started_at))
        .bind(col(&turns, |t| t.finished_at))
        .bind(col(&turns, |t| t.stopped_by.as_deref()))
        .bind(col(&turns, |t| t.hops))
        .bind(col(&turns, |t| t.prompt_tokens))
        .bind(col(&turns, |t| t.completion_tokens))
        .bind(col(&turns, |t| t.error.as_deref()))
        .bind(col(&turns, |t| t.cost_pico))
        .bind(col(&turns, |t| t.face.as_deref()))
        .bind(col(&threads, |t| t.key))
        .bind(col(&threads, |t| t.hash.as_str()))
        .bind(col(&threads, |t| t.conversation.0))
        .bind(col(&threads, |t| i64::from(t.turn)))
        .execute(pool)
        .await?;
    Ok(())
}

/// The system prompts among `messages` (their `prompts` hashes), each with its agency's: the
/// agency of a conversation the group creates is in `created`, another's is read. Before the
/// group's statement, on its own: should that fail, a prompt no message names is left, which
/// its agency takes with it.
async fn write_prompts(
    pool: &PgPool,
    messages: &[&Message],
    prompts: &[Option<Vec<u8>>],
    created: &[&agency_core::Conversation],
) -> Result<()> {
    let mut agencies: HashMap<Uuid, Uuid> =
        created.iter().map(|c| (c.id.0, c.agency_id.0)).collect();
    let unknown: Vec<Uuid> = messages
        .iter()
        .zip(prompts)
        .filter(|(m, p)| p.is_some() && !agencies.contains_key(&m.conversation_id.0))
        .map(|(m, _)| m.conversation_id.0)
        .collect();
    if !unknown.is_empty() {
        let read: Vec<(Uuid, Uuid)> = sqlx::query_as(conversations::AGENCIES_OF_CONVERSATIONS)
            .bind(unknown)
            .fetch_all(pool)
            .await?;
        agencies.extend(read);
    }
    let (mut agency, mut hash, mut text) = (Vec::new(), Vec::new(), Vec::new());
    for (m, p) in messages.iter().zip(prompts) {
        if let (Some(p), Some(a)) = (p, agencies.get(&m.conversation_id.0)) {
            agency.push(*a);
            hash.push(p.as_slice());
            text.push(m.text.as_str());
        }
    }
    sqlx::query(conversations::INSERT_PROMPTS)
        .bind(agency)
        .bind(hash)
        .bind(text)
        .execute(pool)
        .await?;
    Ok(())
}

/// One column of `rows`, as an array parameter.
fn col<'a, R, T>(rows: &'a [R], f: impl Fn(&'a R) -> T) -> Vec<T> {
    rows.iter().map(f).collect()
}

/// The messages' columns, `$1` to `$19` of both statements.
fn bind_messages<'q>(
    query: Query<'q, Postgres, PgArguments>,
    rows: &'q [MessageRow],
    messages: &'q [&Message],
    prompts: &'q [Option<Vec<u8>>],
) -> Query<'q, Postgres, PgArguments> {
    query
        .bind(col(rows, |r| r.id))
        .bind(col(rows, |r| r.conversation_id))
        .bind(col(rows, |r| r.turn_id))
        .bind(col(rows, |r| r.seq))
        .bind(col(rows, |r| r.agent_id))
        .bind(col(rows, |r| r.kind.as_str()))
        .bind(col(rows, |r| r.linked_message_id))
        .bind(col(rows, |r| r.from_agent))
        .bind(col(rows, |r| r.to_agent))
        .bind(col(rows, |r| r.text.as_str()))
        .bind(col(rows, |r| r.prompt_tokens))
        .bind(col(rows, |r| r.completion_tokens))
        .bind(col(rows, |r| r.latency_ms))
        .bind(col(rows, |r| r.included))
        .bind(col(rows, |r| r.created_at))
        .bind(col(messages, |m| m.role().as_str()))
        .bind(col(rows, |r| r.tool.as_deref()))
        .bind(col(rows, |r| r.images.as_deref()))
        .bind(prompts)
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
