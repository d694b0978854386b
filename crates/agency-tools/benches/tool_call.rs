//! What the hub adds to a tool call: an echo called directly through an rmcp client against
//! the same call through `ToolHub::call` (arguments parsed from text, the tool looked up in the
//! cached list, the timeout, the concurrency permit, the result turned into text), on the
//! built-in server and on server-everything over stdio; then 100 concurrent calls on one
//! stdio server, both ways. Both sides of each comparison run in the same process, in
//! alternating blocks, so the ratio holds whatever the machine's speed.
//!
//!     bash tests/mcp/install        # server-everything, once
//!     cargo bench -p agency-tools --bench tool_call
//!
//! `AGENCY_BENCH_CALLS` sets the sequential calls of each side (default 2000), and
//! `AGENCY_BENCH_ROUNDS` the rounds of 100 concurrent calls (default 20). Without
//! server-everything only the built-in server is measured (under `CI=true`, it fails).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agency_core::tool::{McpServer, McpTransport};
use agency_tools::{Builtin, Declared, ToolHub};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};

/// Blocks each side's calls are split into, alternating A, B, A, B…
const BLOCKS: usize = 20;
const CONCURRENT: usize = 100;

type Client = RunningService<RoleClient, ()>;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn everything_script() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENCY_MCP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp"));
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if script.exists() {
        return Some(script);
    }
    let message = format!("{} is missing: run tests/mcp/install", script.display());
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    println!("skipped the stdio benchmarks: {message}");
    None
}

fn args(key: &str, value: &str) -> JsonObject {
    let mut args = JsonObject::new();
    args.insert(key.into(), value.into());
    args
}

async fn direct_echo(client: &Client, tool_arg: &str, text: &str) {
    let params = CallToolRequestParams::new("echo").with_arguments(args(tool_arg, text));
    let result = client.call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true));
}

async fn hub_echo(hub: &ToolHub, server: &McpServer, tool_arg: &str, text: &str) {
    let arguments = serde_json::json!({ tool_arg: text }).to_string();
    let out = hub
        .call(server, Declared::Operator, "echo", &arguments, None)
        .await;
    assert!(!out.is_error, "{}", out.text);
}

/// What a comparison found: the median over paired blocks of each side's mean time per
/// call, and the median of the pairs' ratios (B / A). A block of one side runs right after the
/// other's, so a change in the machine's load touches both of a pair alike.
struct Paired {
    a: Duration,
    b: Duration,
    ratio: f64,
    /// This process's CPU time per call of each side (for a stdio server, the client's
    /// alone), over all blocks.
    cpu_a: Duration,
    cpu_b: Duration,
}

/// CPU time of this process's threads so far (Linux: the sum of their schedstat run times;
/// zero elsewhere).
fn cpu_time() -> Duration {
    let mut nanos = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) {
            nanos += stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(nanos)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

impl Paired {
    /// `pairs`: each pair's time per call; `cpu`: each side's CPU time per call.
    fn of(pairs: &[(Duration, Duration)], cpu: (Duration, Duration)) -> Self {
        let secs = |d: &Duration| d.as_secs_f64();
        Paired {
            a: Duration::from_secs_f64(median(pairs.iter().map(|(a, _)| secs(a)).collect())),
            b: Duration::from_secs_f64(median(pairs.iter().map(|(_, b)| secs(b)).collect())),
            ratio: median(pairs.iter().map(|(a, b)| secs(b) / secs(a)).collect()),
            cpu_a: cpu.0,
            cpu_b: cpu.1,
        }
    }
}

/// Each side's `calls` sequential calls in alternating blocks (after a warm-up).
async fn compare<A, AF, B, BF>(calls: usize, mut a: A, mut b: B) -> Paired
where
    A: FnMut(usize) -> AF,
    AF: Future<Output = ()>,
    B: FnMut(usize) -> BF,
    BF: Future<Output = ()>,
{
    let per_block = (calls / BLOCKS).max(1);
    for i in 0..per_block.min(200) {
        a(i).await;
        b(i).await;
    }
    let mut pairs = Vec::new();
    let (mut cpu_a, mut cpu_b) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..BLOCKS {
        let (start, cpu) = (Instant::now(), cpu_time());
        for i in 0..per_block {
            a(i).await;
        }
        let ta = start.elapsed() / per_block as u32;
        cpu_a += cpu_time().saturating_sub(cpu);
        let (start, cpu) = (Instant::now(), cpu_time());
        for i in 0..per_block {
            b(i).await;
        }
        cpu_b += cpu_time().saturating_sub(cpu);
        pairs.push((ta, start.elapsed() / per_block as u32));
    }
    let n = (per_block * BLOCKS) as u32;
    Paired::of(&pairs, (cpu_a / n, cpu_b / n))
}

fn report(what: &str, p: Paired) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{what:<34} direct rmcp {:>8.1} µs   ToolHub::call {:>8.1} µs   ratio {:.2}   \
         CPU a call {:.1} / {:.1} µs",
        us(p.a),
        us(p.b),
        p.ratio,
        us(p.cpu_a),
        us(p.cpu_b)
    );
}

async fn bench_builtin(calls: usize) {
    let client: Client = ().serve(Builtin::start()).await.unwrap();
    let hub = ToolHub::new(false);
    let server = McpServer::new(McpTransport::Builtin);
    let found = compare(
        calls,
        |_| direct_echo(&client, "text", "hello"),
        |_| hub_echo(&hub, &server, "text", "hello"),
    )
    .await;
    report("echo, built-in (in process)", found);
}

async fn bench_stdio(script: &Path, calls: usize, rounds: usize) {
    let mut command = tokio::process::Command::new("node");
    command.arg(script).arg("stdio");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client: Client = ().serve(transport).await.unwrap();
    let hub = ToolHub::new(false);
    let mut server = McpServer::new(McpTransport::Stdio {
        command: "node".into(),
        args: vec![script.to_string_lossy().into_owned(), "stdio".into()],
        env: Default::default(),
    });
    server.max_concurrency = Some(CONCURRENT as u32);

    let found = compare(
        calls,
        |_| direct_echo(&client, "message", "hello"),
        |_| hub_echo(&hub, &server, "message", "hello"),
    )
    .await;
    report("echo, server-everything (stdio)", found);

    // Throughput: rounds of 100 calls at once on the one server, alternating sides.
    let mut pairs = Vec::new();
    let (mut cpu_a, mut cpu_b) = (Duration::ZERO, Duration::ZERO);
    for round in 0..=rounds {
        let (start, cpu) = (Instant::now(), cpu_time());
        let direct = (0..CONCURRENT).map(|i| direct_echo(&client, "message", DIGITS[i % 10]));
        futures::future::join_all(direct).await;
        let (a, a_cpu) = (start.elapsed(), cpu_time().saturating_sub(cpu));
        let (start, cpu) = (Instant::now(), cpu_time());
        let through_hub =
            (0..CONCURRENT).map(|i| hub_echo(&hub, &server, "message", DIGITS[i % 10]));
        futures::future::join_all(through_hub).await;
        if round > 0 {
            // round 0 warms up
            pairs.push((a, start.elapsed()));
            cpu_a += a_cpu;
            cpu_b += cpu_time().saturating_sub(cpu);
        }
    }
    let n = (rounds.max(1) * CONCURRENT) as u32;
    let found = Paired::of(&pairs, (cpu_a / n, cpu_b / n));
    let rate = |d: Duration| CONCURRENT as f64 / d.as_secs_f64();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{:<34} direct rmcp {:>8.0} /s   ToolHub::call {:>8.0} /s   ratio {:.2}   \
         CPU a call {:.1} / {:.1} µs",
        format!("{CONCURRENT} concurrent echoes (stdio)"),
        rate(found.a),
        rate(found.b),
        1.0 / found.ratio,
        us(found.cpu_a),
        us(found.cpu_b)
    );
}

const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

fn main() {
    let calls = env_number("AGENCY_BENCH_CALLS", 2000);
    let rounds = env_number("AGENCY_BENCH_ROUNDS", 20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!(
            "{calls} sequential calls a side, {rounds} rounds of {CONCURRENT} at once; medians \
             of paired blocks (ratio: the hub's time / direct, or rate / direct rate)"
        );
        bench_builtin(calls).await;
        if let Some(script) = everything_script() {
            bench_stdio(&script, calls, rounds).await;
        }
    });
}
