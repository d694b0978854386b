//! WAL checkpoints, on a thread of their own.

use std::time::Duration;

use rusqlite::Connection;

use super::{BUSY_TIMEOUT, is_busy};

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
pub(super) fn checkpointer(path: &str) -> Option<std::sync::mpsc::Sender<()>> {
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
