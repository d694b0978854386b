//! A stdio server's process group (issue 38): a server started through a wrapper (`npx -y …`,
//! `uvx …`, a shell script) is a tree of processes, and killing the direct child leaves the
//! real server behind. Each stdio server is started as the leader of a group of its own
//! ([`isolate`]); when its connection ends, [`ProcessGroup`]'s drop stops the whole group:
//! `SIGTERM` at once, then `SIGKILL` after [`GRACE`] to whatever is left, from a thread of its
//! own (never an async worker's, and still there while the runtime shuts down).
//!
//! Elsewhere than on unix a server is started as before, and only its direct child is killed.

#[cfg(unix)]
use std::time::{Duration, Instant};

/// How long a group has to exit after `SIGTERM` before it is killed.
#[cfg(unix)]
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// How often a stopping group is looked at during its grace.
#[cfg(unix)]
const POLL: Duration = Duration::from_millis(50);

/// Makes `command`'s process the leader of a new process group (on unix).
pub(crate) fn isolate(command: &mut tokio::process::Command) {
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(not(unix))]
    let _ = command;
}

/// A started server's process group, stopped when this drops.
pub(crate) struct ProcessGroup {
    #[cfg(unix)]
    id: nix::unistd::Pid,
}

/// A group being stopped, to wait for ([`all_gone`]).
#[derive(Clone, Copy)]
pub(crate) struct Stopping {
    #[cfg(unix)]
    id: nix::unistd::Pid,
}

impl ProcessGroup {
    /// What to wait for once this drops.
    pub fn stopping(&self) -> Stopping {
        Stopping {
            #[cfg(unix)]
            id: self.id,
        }
    }

    /// The group led by the process `leader` (started through [`isolate`]); `None` when there
    /// is none to stop (no process id, or not on unix).
    pub fn led_by(leader: Option<u32>) -> Option<Self> {
        #[cfg(unix)]
        {
            let id = i32::try_from(leader?).ok().filter(|id| *id > 1)?;
            Some(Self {
                id: nix::unistd::Pid::from_raw(id),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = leader;
            None
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        #[cfg(unix)]
        stop(self.id);
    }
}

/// Waits until nothing of `groups` runs (they were dropped), at most a little past the grace
/// after which what is left is killed.
pub(crate) async fn all_gone(groups: Vec<Stopping>) {
    #[cfg(unix)]
    {
        let deadline = tokio::time::Instant::now() + GRACE + Duration::from_millis(500);
        while groups.iter().any(|g| exists(g.id)) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
    }
    #[cfg(not(unix))]
    let _ = groups;
}

/// Sends the group `SIGTERM`, and `SIGKILL` after [`GRACE`] if any of it is left.
#[cfg(unix)]
fn stop(group: nix::unistd::Pid) {
    use nix::sys::signal::{Signal, killpg};
    if killpg(group, Signal::SIGTERM).is_err() {
        // No such group: everything in it has exited already.
        return;
    }
    let killer = std::thread::Builder::new()
        .name("mcp-group-stop".into())
        .spawn(move || {
            let deadline = Instant::now() + GRACE;
            while Instant::now() < deadline {
                std::thread::sleep(POLL);
                if !exists(group) {
                    return;
                }
            }
            tracing::debug!(group = group.as_raw(), "MCP server still running; killed");
            let _ = killpg(group, Signal::SIGKILL);
        });
    if killer.is_err() {
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// Whether any process is in the group (a process that exited and was not yet reaped counts).
#[cfg(unix)]
fn exists(group: nix::unistd::Pid) -> bool {
    nix::sys::signal::killpg(group, None) != Err(nix::errno::Errno::ESRCH)
}
