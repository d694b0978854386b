//! What a tool hop adds to a turn beyond the tool's own time: turns of one agent (the rules
//! model) that answer at once, against turns whose rule first calls an echo tool, against the
//! echo called directly through the tool hub; in-process (`builtin/echo`) and over stdio
//! (server-everything's `echo`, when `tests/mcp/install` put it in `target/mcp`). Every message
//! is persisted (SQLite).
//!
//!     cargo bench -p agency-runtime --bench tool_hop
//!
//! The three run in alternating blocks of `AGENCY_BENCH_CALLS` (default 100) for
//! `AGENCY_BENCH_ROUNDS` rounds (default 20); each figure is the median of its blocks' per-call
//! means. Added = tooled turn − plain turn − direct call: the call's reply and result persisted,
//! the engine's steps, the result delivered.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed unwrap is a failed run

mod common;
use common::{count, median};
use std::path::Path;
use std::time::Instant;

use agency_core::{AgencyDraft, AgentDraft, Declared, McpServer, McpTransport, RuleDraft};
use agency_providers::Providers;
use agency_runtime::tools::Tools;
use agency_runtime::{LOCAL_OWNER, Runtime};

fn clerk(call: Option<(&str, &str)>) -> AgencyDraft {
    let rule = match call {
        Some((tool, arg)) => RuleDraft {
            when: "user".into(),
            call: Some(tool.into()),
            with: Some(serde_json::json!({ arg: "{{message}}" })),
            action: "{{result}}".into(),
            send_to: vec!["user".into()],
        },
        None => RuleDraft {
            when: "user".into(),
            action: "{{message}}".into(),
            send_to: vec!["user".into()],
            ..Default::default()
        },
    };
    AgencyDraft {
        name: if call.is_some() { "tooled" } else { "plain" }.into(),
        protocol: "json".into(),
        manager: "clerk".into(),
        agents: vec![AgentDraft {
            name: "clerk".into(),
            model: "builtin/rules".into(),
            tools: call.map(|(t, _)| vec![t.to_string()]).unwrap_or_default(),
            rules: vec![rule],
            ..Default::default()
        }],
        ..Default::default()
    }
}

async fn bench(
    label: &str,
    server: (&str, McpServer),
    tool: &str,
    arg: &str,
    calls: usize,
    rounds: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let store = agency_store::open(&url).await?;
    let operator = match &server.1.transport {
        McpTransport::Builtin => Vec::new(),
        _ => vec![(server.0.to_string(), server.1.clone())],
    };
    let rt = Runtime::assemble(
        store,
        Providers::builtin(),
        None,
        Tools::new(operator, false),
    );
    let qualified = format!("{}/{tool}", server.0);
    let plain = rt.agencies().save(&clerk(None), LOCAL_OWNER).await?;
    let tooled = rt
        .agencies()
        .save(&clerk(Some((&qualified, arg))), LOCAL_OWNER)
        .await?;
    let hub = agency_tools::ToolHub::new(false);
    let args = serde_json::json!({ arg: "ping" }).to_string();
    let (p, t) = (
        rt.conversations().start(&plain).await?,
        rt.conversations().start(&tooled).await?,
    );
    // Warm up: the servers connected, the statements prepared.
    for _ in 0..20 {
        rt.send(p.id, "ping".into()).await?;
        rt.send(t.id, "ping".into()).await?;
        hub.call(&server.1, Declared::Operator, tool, &args, None)
            .await;
    }
    let (mut plain_us, mut tooled_us, mut direct_us) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        // A fresh conversation a round, so contexts stay as short as a real turn's.
        let (p, t) = (
            rt.conversations().start(&plain).await?,
            rt.conversations().start(&tooled).await?,
        );
        let started = Instant::now();
        for _ in 0..calls {
            rt.send(p.id, "ping".into()).await?;
        }
        plain_us.push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);
        let started = Instant::now();
        for _ in 0..calls {
            let out = rt.send(t.id, "ping".into()).await?;
            assert_eq!(out.hops, 3, "the call, its result, the answer");
        }
        tooled_us.push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);
        let started = Instant::now();
        for _ in 0..calls {
            let out = hub
                .call(&server.1, Declared::Operator, tool, &args, None)
                .await;
            assert!(!out.is_error, "{}", out.text);
        }
        direct_us.push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    let (plain, tooled, direct) = (median(plain_us), median(tooled_us), median(direct_us));
    println!(
        "{label:<9} plain turn {plain:>7.1} µs | turn with a tool hop {tooled:>7.1} µs | the call alone {direct:>7.1} µs | added by the hop {:>6.1} µs",
        tooled - plain - direct
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (calls, rounds) = (
        count("AGENCY_BENCH_CALLS", 100),
        count("AGENCY_BENCH_ROUNDS", 20),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let builtin = McpServer::new(McpTransport::Builtin);
        bench(
            "builtin",
            ("builtin", builtin),
            "echo",
            "text",
            calls,
            rounds,
        )
        .await?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../target/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        if script.exists() {
            let everything = McpServer::new(McpTransport::Stdio {
                command: "node".into(),
                args: vec![script.display().to_string(), "stdio".into()],
                env: Default::default(),
            });
            bench(
                "stdio",
                ("everything", everything),
                "echo",
                "message",
                calls,
                rounds,
            )
            .await?;
        } else {
            println!("stdio     skipped: run tests/mcp/install for server-everything");
        }
        Ok(())
    })
}
