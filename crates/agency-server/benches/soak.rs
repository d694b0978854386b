//! A bounded soak of one server: many new conversations of a three-agent relay (the rules
//! model, six hops between the agents and the answer, every message persisted) through
//! `/v1/chat/completions` on loopback, then what they cost: bytes stored per conversation
//! (the SQLite file after a checkpoint, and each table's and index's share, from SQLite's
//! `dbstat`), resident memory while they ran, and how much longer continuing an old
//! conversation takes than starting a new one.
//!
//!     cargo bench -p agency-server --bench soak
//!     AGENCY_BENCH_CONVERSATIONS=100000 cargo bench -p agency-server --bench soak
//!
//! `AGENCY_BENCH_CONVERSATIONS` (default 20,000) new conversations over
//! `AGENCY_BENCH_CONNECTIONS` (default 32) keep-alive connections, in ten blocks (resident
//! memory is read after each); `AGENCY_BENCH_DB_DIR` where the SQLite file goes (default a
//! temporary directory; the file is removed at the end either way). Resident memory is the
//! whole process's: the load generator is in it too, and small.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark: a failure should stop it

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_providers::Providers;
use agency_runtime::secrets::MasterKeySource;
use agency_runtime::{LOCAL_OWNER, Runtime};
use axum::body::Bytes;
use axum::http::{Request, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The relay: the manager hands the user's message to `a`, who passes it to `b`, back to `a`,
/// to the manager, to `b`, to the manager, who answers: six messages between the agents, the
/// seventh the answer.
const RELAY: &str = r#"
name: relay
protocol: json
manager: m
agents:
  - { id: 1, name: m, model: builtin/rules, rules: [
      { when: user, do: "relay {{message}}", send_to: a },
      { when: a, do: "on {{message}}", send_to: b },
      { when: b, do: "done {{message}}", send_to: user } ] }
  - { id: 2, name: a, model: builtin/rules, rules: [
      { when: m, do: "pass {{message}}", send_to: b },
      { when: b, do: "back {{message}}", send_to: m } ] }
  - { id: 3, name: b, model: builtin/rules, rules: [
      { when: a, do: "echo {{message}}", send_to: a },
      { when: m, do: "last {{message}}", send_to: m } ] }
"#;

/// One request over `sender`: the status, the conversation header and the body.
async fn post(
    sender: &mut SendRequest<Full<Bytes>>,
    host: &str,
    auth: &str,
    body: Value,
) -> (String, Value) {
    let request = Request::post("/v1/chat/completions")
        .header(header::HOST, host)
        .header(header::AUTHORIZATION, auth)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let conversation = response
        .headers()
        .get("x-agency-conversation")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(status.is_success(), "{status}: {body:?}");
    (conversation, serde_json::from_slice(&body).unwrap())
}

async fn connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

fn ask(text: &str) -> Value {
    json!({"model": "relay", "messages": [{"role": "user", "content": text}]})
}

fn answer_of(body: &Value) -> String {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The process's resident memory, in MiB (Linux; 0 elsewhere).
fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// New conversations `from..to` over `connections` connections; the first `keep` of them
/// (by number) are returned with their answers, to be continued later.
async fn block(
    addr: SocketAddr,
    auth: &str,
    (from, to): (usize, usize),
    connections: usize,
    keep: usize,
) -> Vec<(usize, String, String)> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(from));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (next, auth, host) = (next.clone(), auth.to_string(), addr.to_string());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(addr).await;
            let mut kept = Vec::new();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= to {
                    return kept;
                }
                let (conversation, body) =
                    post(&mut sender, &host, &auth, ask(&format!("hello {n}"))).await;
                if n < keep {
                    kept.push((n, conversation, answer_of(&body)));
                }
            }
        }));
    }
    let mut kept = Vec::new();
    for t in tasks {
        kept.extend(t.await.unwrap());
    }
    kept
}

/// Bytes of each table and index of the database at `path`, largest first (`dbstat`).
fn breakdown(path: &Path) -> Vec<(String, i64)> {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    let mut q = db
        .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        .unwrap();
    q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn main() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|n| n.replace(['_', ','], "").parse().ok())
            .unwrap_or(default)
    };
    let conversations = env("AGENCY_BENCH_CONVERSATIONS", 20_000).max(100);
    let connections = env("AGENCY_BENCH_CONNECTIONS", 32).max(1);
    let dir = match std::env::var("AGENCY_BENCH_DB_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let file = dir.path().join("soak.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = agency_store::open(&format!("sqlite://{}", file.display()))
            .await
            .unwrap();
        let master = MasterKeySource::File(dir.path().join("agency.key"));
        let runtime = Runtime::with_master_key(store, Providers::builtin(), Some(master));
        let relay = agency_file::AgencyFile::parse("relay.yaml", RELAY).unwrap();
        let agency = runtime.agencies().save(&relay.draft, LOCAL_OWNER).await.unwrap();
        let auth = Arc::new(runtime.authenticator().await.unwrap());
        let (_, key) = auth.create_key(&agency, "soak", None, Some(1_000_000_000), agency_core::KeyBudgets::default()).await.unwrap();
        let auth_header = format!("Bearer {}", secrecy::ExposeSecret::expose_secret(&key));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = agency_server::AppState { rt: runtime, auth, cors: Default::default() };
        tokio::spawn(agency_server::serve(state, listener, agency_server::Connections::default(), std::future::pending()));

        let before = resident_mib();
        println!("{conversations} conversations of a three-agent relay, {connections} connections; resident {before:.1} MiB at the start");
        let keep = 200;
        let mut old = Vec::new();
        let started = Instant::now();
        let mut peak: f64 = before;
        for b in 0..10 {
            let range = (conversations * b / 10, conversations * (b + 1) / 10);
            let t = Instant::now();
            old.extend(block(addr, &auth_header, range, connections, keep).await);
            let rss = resident_mib();
            peak = peak.max(rss);
            println!(
                "  {:>9} conversations: {:>6.0} conversations/s in this block, resident {rss:.1} MiB",
                range.1,
                (range.1 - range.0) as f64 / t.elapsed().as_secs_f64()
            );
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{conversations} conversations in {secs:.1} s ({:.0}/s); resident peak {peak:.1} MiB",
            conversations as f64 / secs
        );
        continued_against_fresh(addr, &auth_header, &old, conversations).await;
    });
    let parts = breakdown(&file);
    let total: i64 = parts.iter().map(|(_, b)| b).sum();
    let size = std::fs::metadata(&file).unwrap().len();
    println!(
        "stored: {:.1} MB, {:.0} bytes per conversation (the file after a checkpoint; {:.0} in its pages)",
        size as f64 / 1e6,
        size as f64 / conversations as f64,
        total as f64 / conversations as f64
    );
    for (name, bytes) in parts.iter().take(12) {
        println!(
            "  {name:<32} {:>7.0} bytes per conversation",
            *bytes as f64 / conversations as f64
        );
    }
}

/// p50 of continuing old conversations (the first ones made: their history resent with a new
/// message) against new ones, one at a time in alternation, on one connection.
async fn continued_against_fresh(
    addr: SocketAddr,
    auth: &str,
    old: &[(usize, String, String)],
    conversations: usize,
) {
    let mut sender = connect(addr).await;
    let host = addr.to_string();
    let (mut continued, mut fresh) = (Vec::new(), Vec::new());
    for (i, (n, conversation, answer)) in old.iter().enumerate() {
        let body = json!({"model": "relay", "messages": [
            {"role": "user", "content": format!("hello {n}")},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "once more"},
        ]});
        let t = Instant::now();
        let (same, _) = post(&mut sender, &host, auth, body).await;
        continued.push(t.elapsed());
        assert_eq!(&same, conversation, "the old conversation is continued");
        let t = Instant::now();
        post(
            &mut sender,
            &host,
            auth,
            ask(&format!("fresh {}", conversations + i)),
        )
        .await;
        fresh.push(t.elapsed());
    }
    let p50 = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1000.0
    };
    let (c, f) = (p50(&mut continued), p50(&mut fresh));
    println!(
        "continuing one of the {} oldest: p50 {c:.3} ms; a new one: p50 {f:.3} ms; +{:.3} ms",
        old.len(),
        c - f
    );
}
