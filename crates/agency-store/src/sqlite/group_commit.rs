//! Group commit: concurrent conversation writes share one transaction, each still succeeding
//! or failing alone.

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::SqliteStore;
use super::conversations::apply;
use crate::{Result, StoreError, Write};

/// Writes waiting for a commit (group commit). One writer at a time, the *leader*, takes all
/// that are waiting and commits them in one transaction (see [`commit_group`]: one write's
/// failure stays its own); then it hands the lead to a writer that queued meanwhile.
/// A writer who finds no leader leads at once: alone, a write costs no handoff at all.
#[derive(Default)]
pub(super) struct Group {
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
    /// Queues `write` for the next group commit and waits for its result; leads the commit
    /// when no one else does.
    pub(super) async fn write_in_group(&self, write: Write) -> Result<Write> {
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
            let started = std::time::Instant::now();
            let results = if messages > 100 {
                self.with_long(commit)
            } else {
                self.with(commit)
            };
            agency_telemetry::metrics().commit(
                "sqlite",
                writes.len(),
                started.elapsed().as_secs_f64(),
            );
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

    use agency_core::{AgencyId, Conversation, ConversationId};
    use chrono::Utc;

    use super::*;
    use crate::ConversationStore;

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
}
