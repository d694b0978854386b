//! The OpenAI endpoint under load: one agent behind it, its model a local OpenAI-compatible fake
//! that answers at once, every message persisted. Compares requests per second and p50/p99
//! latency through the agency with the same fake called directly, and with a bare proxy (an
//! axum handler forwarding to the fake through reqwest: the floor of one HTTP hop on our
//! stack), at 1 and 64 connections. Every request is a new conversation. The same turn is
//! also asked through the agency's MCP endpoint (a 2026-07-28 `tools/call`, answered as JSON),
//! to show what MCP adds over Chat Completions.
//!
//!     cargo bench -p agency-server --bench endpoint
//!
//! `AGENCY_BENCH_REQUESTS` sets the requests per run at 64 connections (default 3000; a
//! quarter of it at one), `AGENCY_BENCH_CONNECTIONS` the runs (default `1,64`),
//! `AGENCY_BENCH_DB` the database (default: a new SQLite file), `AGENCY_BENCH_BUDGET=1` gives the
//! key a budget (so every call is reserved and settled: issue 35's cost of enforcement), `AGENCY_BENCH_REPEAT` how many
//! times each run through the agency is made (default 1), `AGENCY_BENCH_AGENCY_ONLY=1` leaves
//! the direct and bare-proxy runs out. Each figure is of the whole process: CPU time and
//! allocations per request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark: a failure should stop it

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::{AgencyDraft, AgentDraft, ProviderDraft};
use agency_fakes::{Fake, openai};
use agency_providers::Providers;
use agency_runtime::secrets::MasterKeySource;
use agency_runtime::{LOCAL_OWNER, Runtime};
use axum::body::Bytes;
use axum::http::{Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::json;

/// A request's body: a chat completion, or the MCP tool's call (2026-07-28).
fn body(path: &str, i: usize, text: String) -> Bytes {
    let body = if path.ends_with("/mcp") {
        json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "solo", "arguments": {"message": text},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }})
    } else {
        json!({"model": "solo", "messages": [{"role": "user", "content": text}]})
    };
    Bytes::from(body.to_string())
}

/// Runs `requests` requests over `connections` keep-alive HTTP/1.1 connections, each request
/// a distinct conversation (`hello 0`, `hello 1`, ...). The load generator is plain hyper with
/// bodies built beforehand, so that it takes as little of the shared cores as it can (as wrk
/// would): what it costs is counted in every figure, direct and through the agency alike.
async fn load(
    addr: SocketAddr,
    path: &str,
    key: &str,
    requests: usize,
    connections: usize,
) -> Load {
    let per = requests / connections;
    let mut ready = Vec::new();
    for c in 0..connections {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let bodies: Vec<Bytes> = (0..per)
            .map(|i| body(path, i, format!("hello {}", c * per + i)))
            .collect();
        ready.push((sender, bodies));
    }
    let auth = format!("Bearer {key}");
    let host = addr.to_string();
    let started = Instant::now();
    let cpu = cpu_time();
    let allocated = allocations();
    let mut tasks = Vec::new();
    for (mut sender, bodies) in ready {
        let (path, auth, host) = (path.to_string(), auth.clone(), host.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(bodies.len());
            for body in bodies {
                let mut request = Request::post(path.as_str())
                    .header(header::HOST, host.as_str())
                    .header(header::AUTHORIZATION, auth.as_str())
                    .header(header::CONTENT_TYPE, "application/json");
                if path.ends_with("/mcp") {
                    request = request
                        .header(header::ACCEPT, "application/json, text/event-stream")
                        .header("mcp-protocol-version", "2026-07-28")
                        .header("mcp-method", "tools/call")
                        .header("mcp-name", "solo");
                }
                let request = request.body(Full::new(body)).unwrap();
                let t = Instant::now();
                sender.ready().await.unwrap();
                let response = sender.send_request(request).await.unwrap();
                let status = response.status();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                latencies.push(t.elapsed());
                assert!(status.is_success(), "{status}: {body:?}");
                assert!(
                    !String::from_utf8_lossy(&body).contains("\"isError\":true"),
                    "{body:?}"
                );
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu) / all.len() as f64;
    let allocs = (allocations() - allocated) as f64 / all.len() as f64;
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    Load {
        rps: all.len() as f64 / secs,
        p50: pct(0.50),
        p99: pct(0.99),
        cpu,
        allocs,
    }
}

struct Load {
    rps: f64,
    p50: Duration,
    p99: Duration,
    /// CPU time of the whole process (load generator, server and fake) per request, in µs.
    cpu: f64,
    /// Allocations of the whole process per request.
    allocs: f64,
}

/// The process's CPU time (user + system) so far, in µs, from `/proc/self/stat` (Linux; 0
/// elsewhere). Unlike wall-clock figures it does not move when other programs share the cores.
fn cpu_time() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // After the command name (which may hold spaces) come fields 3, 4, ...: utime is field
    // 14 and stime 15, in clock ticks.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| {
        rest.split_whitespace()
            .nth(n - 3)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let ticks = field(14) + field(15);
    ticks * 1e6 / 100.0 // USER_HZ is 100 on Linux
}

/// The allocator of the `agency` binary, which this stands in for, counting allocations: a
/// figure that, unlike CPU time, does not move with the machine's load.
#[global_allocator]
static ALLOCATOR: stats_alloc::StatsAlloc<mimalloc::MiMalloc> =
    stats_alloc::StatsAlloc::new(mimalloc::MiMalloc);

/// Allocations and reallocations so far, in the whole process.
fn allocations() -> usize {
    let stats = ALLOCATOR.stats();
    stats.allocations + stats.reallocations
}

fn main() {
    let requests: usize = std::env::var("AGENCY_BENCH_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3000);
    let repeat: usize = std::env::var("AGENCY_BENCH_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let agency_only = std::env::var("AGENCY_BENCH_AGENCY_ONLY").is_ok_and(|v| v == "1");
    let telemetry = std::env::var("AGENCY_BENCH_TELEMETRY").unwrap_or_else(|_| "off".into());
    let budget = std::env::var("AGENCY_BENCH_BUDGET").is_ok_and(|v| v == "1");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // What goes wrong is logged (errors only by default; `AGENCY_LOG` as the server reads
        // it), and the telemetry asked for is on, as `agency serve` sets it up: `metrics`
        // (Prometheus text kept for scraping), `traces` (every span exported over OTLP to a
        // receiver in this process, which reads and drops the batches: its own work is
        // counted too), `both`, or `off`.
        let mut settings = agency_telemetry::Settings::from_env("error").unwrap();
        settings.otlp = true;
        settings.prometheus = matches!(telemetry.as_str(), "metrics" | "both");
        if matches!(telemetry.as_str(), "traces" | "both") {
            settings.otlp_endpoint = Some(format!("http://{}", otlp_sink().await));
        }
        let _telemetry = agency_telemetry::init(settings).unwrap();
        println!("telemetry: {telemetry}");
        let fake = Fake::start().await;
        fake.otherwise(openai::completion(r#"{"to": 0, "context": "ok"}"#, 5, 3))
            .unrecorded();
        let fake_addr: SocketAddr = fake.url.trim_start_matches("http://").parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let url = std::env::var("AGENCY_BENCH_DB")
            .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("bench.db").display()));
        let store = agency_store::open(&url).await.unwrap();
        let master = MasterKeySource::File(dir.path().join("agency.key"));
        let runtime = Runtime::with_master_key(store, Providers::builtin(), Some(master));
        let draft = AgencyDraft {
            name: "solo".into(),
            protocol: "json".into(),
            manager: "only".into(),
            providers: vec![ProviderDraft {
                name: "fake".into(),
                kind: "openai".into(),
                base_url: Some(format!("{}/v1", fake.url)),
                max_concurrency: Some(256),
                prices: vec![("m".into(), agency_core::PriceDraft { input: "1".into(), output: "2".into() })],
                ..Default::default()
            }],
            agents: vec![AgentDraft { name: "only".into(), model: "fake/m".into(), ..Default::default() }],
            ..Default::default()
        };
        let agency = runtime.agencies().save(&draft, LOCAL_OWNER).await.unwrap();
        let auth = Arc::new(runtime.authenticator().await.unwrap());
        // With a budget ($1,000,000 a month: never spent here), every call is reserved and
        // settled in the store.
        let budgets = agency_core::KeyBudgets {
            usd: budget.then_some(1_000_000_000_000),
            ..Default::default()
        };
        println!("budget: {}", if budget { "on the key" } else { "none" });
        let (_, key) = auth.create_key(&agency, "bench", None, Some(10_000_000), budgets).await.unwrap();
        let key = secrecy::ExposeSecret::expose_secret(&key).to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(agency_server::serve(agency_server::AppState { rt: runtime, auth, cors: Default::default() }, listener, agency_server::Connections::default(), std::future::pending()));

        let path = "/v1/chat/completions";
        let mcp = "/api/agency/solo/mcp";
        // The same turns through MCP too, when asked (`AGENCY_BENCH_MCP=1`): off by default, so
        // that a run (and `bench/compare`'s count per request) measures what it always did.
        let with_mcp = std::env::var_os("AGENCY_BENCH_MCP").is_some_and(|v| v == "1");
        load(addr, path, &key, 256, 8).await; // warm up
        if with_mcp {
            load(addr, mcp, &key, 256, 8).await;
        }
        let runs: Vec<usize> = std::env::var("AGENCY_BENCH_CONNECTIONS")
            .ok()
            .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![1, 64]);
        let proxy = bare_proxy(format!("{}/v1/chat/completions", fake.url)).await;
        let line = |name: &str, l: &Load| {
            format!(
                "  {name:<10} {:>7.0} req/s  p50 {:>6.3} ms  p99 {:>6.3} ms  cpu {:>4.0} µs/req  {:>4.0} allocs/req",
                l.rps, ms(l.p50), ms(l.p99), l.cpu, l.allocs
            )
        };
        for connections in runs {
            let n = if connections == 1 { requests / 4 } else { requests };
            println!("{connections} connections, {n} requests each");
            if !agency_only {
                let d = load(fake_addr, path, &key, n, connections).await;
                let p = load(proxy, path, &key, n, connections).await;
                let a = load(addr, path, &key, n, connections).await;
                for (name, l) in [("direct", &d), ("bare proxy", &p), ("agency", &a)] {
                    println!("{}  added to p50: {:.3} ms", line(name, l), ms(l.p50) - ms(d.p50));
                }
            }
            // (More) runs through the agency alone: several figures from one process; each
            // beside the same turns through MCP, in turn.
            for _ in usize::from(!agency_only)..repeat {
                println!("{}", line("agency", &load(addr, path, &key, n, connections).await));
            }
            for _ in 0..if with_mcp { repeat } else { 0 } {
                let a = load(addr, path, &key, n, connections).await;
                let m = load(addr, mcp, &key, n, connections).await;
                println!("{}", line("agency", &a));
                println!("{}  MCP adds to p50: {:.3} ms", line("mcp", &m), ms(m.p50) - ms(a.p50));
            }
        }
    });
}

/// An OTLP receiver that takes every batch and drops it.
async fn otlp_sink() -> SocketAddr {
    let app = axum::Router::new().fallback(|body: Bytes| async move {
        drop(body);
        axum::http::StatusCode::OK
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

/// The floor of an HTTP hop on our stack: an axum handler that forwards the body to the fake
/// through the providers' shared reqwest client and returns its answer: no key, no agency, no
/// database. What the agency adds beyond it is its own work.
async fn bare_proxy(upstream: String) -> SocketAddr {
    let settings = agency_providers::http::HttpSettings::default();
    let client = agency_providers::http::shared_client(settings.connect_timeout).unwrap();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: Bytes| {
            let (client, upstream) = (client.clone(), upstream.clone());
            async move {
                let answer = client
                    .post(&upstream)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    answer.bytes().await.unwrap(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
