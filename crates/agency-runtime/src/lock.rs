//! One turn at a time per conversation, in this process and across every process on the store.
//!
//! Two locks, taken in this order: this process's (a mutex per conversation, holding its
//! session in memory), so that its own requests queue without asking the database, then the
//! store's ([`ConversationStore::lock_turn`]: a lease that the holder extends while it works and
//! that expires when it dies). The store's lock says what the conversation's next `seq` is:
//! a session kept in memory that does not end there is stale (another process wrote since) and
//! is read again.

use std::sync::Arc;
use std::time::Duration;

use agency_core::ConversationId;
use agency_store::{Store, TurnLock};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::RuntimeError;
use crate::session::Session;

/// How long a turn lock lasts unless its holder extends it: how soon a dead process's
/// conversations free.
pub(crate) const LEASE: Duration = Duration::from_secs(10);
/// How often a holder extends its lease.
const RENEW_EVERY: Duration = Duration::from_secs(3);
/// The longest wait between two tries while another process holds a conversation.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// A conversation's session slot in this process.
pub(crate) type Slot = Arc<Mutex<Option<Session>>>;

/// A conversation, locked for a turn: its session slot (empty when not loaded) and, when the
/// conversation may be known to other processes, the store's lock. Dropping it gives the
/// store's lock back first, then this process's, so that the process's next waiter finds the
/// store's free.
pub(crate) struct Locked {
    guard: Option<OwnedMutexGuard<Option<Session>>>,
    lease: Option<Lease>,
}

struct Lease {
    store: Arc<dyn Store>,
    conversation: ConversationId,
    holder: Uuid,
    renew: JoinHandle<()>,
}

impl Locked {
    /// A conversation with a new id, which no other process can know yet, and its session:
    /// this process's lock is the whole lock.
    pub(crate) async fn new_conversation(slot: Slot, session: Session) -> Self {
        let mut guard = slot.lock_owned().await;
        *guard = Some(session);
        Self {
            guard: Some(guard),
            lease: None,
        }
    }

    /// Locks `conversation` (waiting for this process's turns, then for other processes'),
    /// and empties its slot when the session there is not the stored conversation's latest.
    pub(crate) async fn take(
        store: &Arc<dyn Store>,
        conversation: ConversationId,
        slot: Slot,
    ) -> Result<Self, RuntimeError> {
        let mut guard = slot.lock_owned().await;
        let holder = Uuid::now_v7();
        let mut backoff = Duration::from_millis(1);
        let next_seq = loop {
            match store.lock_turn(conversation, holder, LEASE).await? {
                TurnLock::Taken { next_seq } => break next_seq,
                TurnLock::Held => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
        if guard
            .as_ref()
            .is_some_and(|s| s.unsaved.is_none() && s.next_seq() != next_seq)
        {
            *guard = None;
        }
        let renew = tokio::spawn(renew(store.clone(), conversation, holder));
        Ok(Self {
            guard: Some(guard),
            lease: Some(Lease {
                store: store.clone(),
                conversation,
                holder,
                renew,
            }),
        })
    }

    pub(crate) fn session(&self) -> Option<&Session> {
        self.guard.as_deref().and_then(Option::as_ref)
    }

    pub(crate) fn session_mut(&mut self) -> Option<&mut Session> {
        self.guard.as_deref_mut().and_then(Option::as_mut)
    }

    /// Takes the session out of the slot (a turn works on it, and puts it back).
    pub(crate) fn take_session(&mut self) -> Option<Session> {
        self.guard.as_deref_mut().and_then(Option::take)
    }

    pub(crate) fn put(&mut self, session: Session) {
        if let Some(slot) = self.guard.as_deref_mut() {
            *slot = Some(session);
        }
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let guard = self.guard.take();
        let Some(lease) = self.lease.take() else {
            return;
        };
        lease.renew.abort();
        // A store one process has (SQLite) keeps its locks in memory: given back at once, no
        // task needed.
        if !lease.store.shared() {
            let unlock = lease.store.unlock_turn(lease.conversation, lease.holder);
            if let Some(Err(e)) = futures::FutureExt::now_or_never(unlock) {
                tracing::warn!(conversation = %lease.conversation, error = %e, "could not give a turn lock back");
            }
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            // No runtime to give it back on: the lease expires.
            return;
        };
        handle.spawn(async move {
            if let Err(e) = lease
                .store
                .unlock_turn(lease.conversation, lease.holder)
                .await
            {
                tracing::warn!(conversation = %lease.conversation, error = %e,
                    "could not give a turn lock back; it frees when its lease ends");
            }
            drop(guard);
        });
    }
}

/// Extends the lease while the turn holds it.
async fn renew(store: Arc<dyn Store>, conversation: ConversationId, holder: Uuid) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        match store.lock_turn(conversation, holder, LEASE).await {
            Ok(TurnLock::Taken { .. }) => {}
            Ok(TurnLock::Held) => {
                // Not extended in time (this process stalled): another process may run a turn
                // now. Writing the same positions, the later of two writes fails; nothing is
                // overwritten.
                tracing::warn!(%conversation, "a turn lock expired while its turn ran");
                return;
            }
            Err(e) => tracing::warn!(%conversation, error = %e, "could not extend a turn lock"),
        }
    }
}
