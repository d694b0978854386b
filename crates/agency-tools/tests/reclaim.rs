//! Issue 38: idle resources are reclaimed. A stdio server started through a wrapper is a tree
//! of processes, stopped whole when its connection ends; a connection unused for the hub's
//! idle time is closed and reopened on the next use, and never while a call is in flight.
//! Against server-everything (installed by `tests/mcp/install`), behind a shell wrapper.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use agency_tools::{Declared, ToolHub};
use common::servers;

const OP: Declared = Declared::Operator;

/// The processes of the process group `group` that have not exited (exited ones not yet
/// reaped by their parent are left out), as `pid command`.
fn members(group: i32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; the command may hold spaces and parentheses.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string() {
            found.push(head.replace(" (", " ").to_string());
        }
    }
    found
}

/// Waits until nothing of `group` runs, at most `within`; how long that took.
async fn gone(group: i32, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let left = members(group);
        if left.is_empty() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "the server's processes are still running after {within:?}: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The group the wrapper leads (its process id, which it wrote).
fn group_of(pid_file: &Path) -> i32 {
    std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Kills what is left of a group when a test ends, failed or not, so a failure leaves no
/// process behind.
struct Cleanup(i32);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !members(self.0).is_empty() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0)])
                .status();
        }
    }
}

async fn echo(hub: &ToolHub, server: &agency_core::tool::McpServer, text: &str) {
    let args = serde_json::json!({ "message": text }).to_string();
    let out = hub.call(server, OP, "echo", &args, None).await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, format!("Echo: {text}"));
}

#[tokio::test]
async fn a_wrapped_server_is_stopped_whole_when_its_connection_ends() {
    let Some(s) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let hub = ToolHub::new(false);
    let server = s.everything_wrapped(&pid_file);
    echo(&hub, &server, "hello").await;

    let group = group_of(&pid_file);
    let _cleanup = Cleanup(group);
    let running = members(group);
    // The shell, the child it left (which ignores SIGTERM), and node.
    assert!(running.len() >= 3, "{running:?}");
    assert!(running.iter().any(|p| p.contains("node")), "{running:?}");

    drop(hub);
    // SIGTERM stops the server; the child that ignores it is killed after the grace (2 s).
    let took = gone(group, Duration::from_secs(8)).await;
    eprintln!("the group was gone {took:?} after the hub was dropped");
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_the_next_call_reopens_it() {
    let Some(s) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let hub = ToolHub::new(false);
    hub.set_idle(Duration::from_secs(1));
    let server = s.everything_wrapped(&pid_file);
    echo(&hub, &server, "first").await;
    let first = group_of(&pid_file);
    let _cleanup = Cleanup(first);
    assert!(!members(first).is_empty());

    // Unused for the idle time: closed, and its processes stopped.
    let took = gone(first, Duration::from_secs(10)).await;
    eprintln!("an idle connection's processes were gone {took:?} after its last call");

    echo(&hub, &server, "again").await;
    let second = group_of(&pid_file);
    let _cleanup_second = Cleanup(second);
    assert_ne!(first, second, "the next call started the server again");
    assert!(!members(second).is_empty());
}

#[tokio::test]
async fn a_call_longer_than_the_idle_time_is_not_cut() {
    let Some(s) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let hub = ToolHub::new(false);
    hub.set_idle(Duration::from_secs(1));
    let server = s.everything_wrapped(&pid_file);
    echo(&hub, &server, "before").await;
    let group = group_of(&pid_file);
    let _cleanup = Cleanup(group);

    let start = Instant::now();
    let out = hub
        .call(
            &server,
            OP,
            "trigger-long-running-operation",
            r#"{"duration": 4, "steps": 4}"#,
            None,
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("completed"), "{}", out.text);
    assert!(start.elapsed() >= Duration::from_secs(4));
    // The same server answered, and is still there right after.
    assert!(!members(group).is_empty());
    echo(&hub, &server, "after").await;
    assert_eq!(group_of(&pid_file), group, "the server was not restarted");
}

#[tokio::test]
async fn closing_the_hub_returns_once_its_servers_are_gone() {
    let Some(s) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let hub = ToolHub::new(false);
    let server = s.everything_wrapped(&pid_file);
    echo(&hub, &server, "hello").await;
    let group = group_of(&pid_file);
    let _cleanup = Cleanup(group);

    // What a process about to exit does: nothing of the server is left when it returns, the
    // child that ignores SIGTERM included.
    hub.close().await;
    assert_eq!(members(group), Vec::<String>::new());

    // The hub still serves: the next call starts the server again.
    echo(&hub, &server, "again").await;
    let again = group_of(&pid_file);
    let _cleanup_again = Cleanup(again);
    assert_ne!(again, group);
}
