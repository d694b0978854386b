//! SQLite, through rusqlite: the default, nothing to install.
//!
//! One connection behind a mutex, called in place from async code. Every statement here takes
//! microseconds, so running it on the caller's thread costs less than any handoff to a worker
//! thread would; long reads tell a multi-threaded runtime they block. WAL journal, synchronous
//! NORMAL: a commit survives a crash of the process; a power cut may lose the last commits but
//! never corrupts the database.

use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};

use crate::{Result, StoreError, redact};
use checkpoint::checkpointer;
use group_commit::Group;
use migrate::migrate;

mod accounts;
mod agencies;
mod approvals;
mod checkpoint;
mod conversations;
mod group_commit;
mod keys;
mod memory;
pub(crate) mod migrate;
mod rooms;
mod secrets;
mod settings;
mod spend;
mod tasks;

pub struct SqliteStore {
    conn: Mutex<Connection>,
    group: Mutex<Group>,
    /// Conversations' turn locks: the holder and when its lease ends. One process has the
    /// file, so they live here; runtimes sharing this store share them.
    turn_locks: Mutex<
        std::collections::HashMap<agency_core::ConversationId, (uuid::Uuid, std::time::Instant)>,
    >,
    /// Dropped with the store, which stops the checkpointer.
    _checkpointer: Option<std::sync::mpsc::Sender<()>>,
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
            turn_locks: Mutex::default(),
            _checkpointer: checkpointer,
        })
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
}

/// One process has the file: nobody to tell.
#[async_trait::async_trait]
impl crate::NoticeStore for SqliteStore {
    fn shared(&self) -> bool {
        false
    }

    async fn notify(&self, _notices: &[String]) -> Result<()> {
        Ok(())
    }

    async fn listen(&self) -> Result<Option<futures::stream::BoxStream<'static, String>>> {
        Ok(None)
    }
}

/// How long a statement waits for another process's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A time as this store writes it (`2026-11-26 06:10:00.123456+00:00`), read with chrono's
/// RFC 3339 parser, which takes the space; rusqlite's own reading walks a format string for
/// every value. Anything else is left to rusqlite.
fn timestamp(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<chrono::DateTime<chrono::Utc>> {
    if let Ok(rusqlite::types::ValueRef::Text(bytes)) = r.get_ref(i)
        && let Ok(s) = std::str::from_utf8(bytes)
        && let Ok(t) = chrono::DateTime::parse_from_rfc3339(s)
    {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    r.get(i)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation
        && f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, SubsecRound, Utc};
    use rusqlite::Connection;

    #[test]
    fn timestamps_read_back_as_rusqlite_wrote_them() -> rusqlite::Result<()> {
        let conn = Connection::open_in_memory()?;
        let now = Utc::now().trunc_subsecs(6);
        for t in [now, now.trunc_subsecs(0), DateTime::<Utc>::UNIX_EPOCH] {
            let (ours, theirs): (DateTime<Utc>, DateTime<Utc>) =
                conn.query_row("SELECT ?1", [t], |r| {
                    Ok((super::timestamp(r, 0)?, r.get(0)?))
                })?;
            assert_eq!(ours, t);
            assert_eq!(ours, theirs);
        }
        // Another format still reads, through rusqlite.
        let t: DateTime<Utc> = conn.query_row("SELECT '2026-11-26 06:10:00'", [], |r| {
            super::timestamp(r, 0)
        })?;
        assert_eq!(t.to_rfc3339(), "2026-11-26T06:10:00+00:00");
        Ok(())
    }
}
