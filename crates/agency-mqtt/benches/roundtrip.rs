//! Chat round trips through a real broker: a stock MQTT client publishes `DATA/chat` and waits
//! for the metadata-only `EVT/chat_response`; the agent runs on the built-in rules model and
//! every message is persisted (SQLite). The same turns run directly on the runtime give the
//! turn's own cost; the difference is what MQTT adds (two broker hops, the bridge, progress
//! events).
//!
//!     cargo bench -p agency-mqtt --bench roundtrip
//!
//! Needs a broker at `AGENCY_TEST_MQTT` (default 127.0.0.1:1883). `AGENCY_BENCH_ROUNDTRIPS`
//! sets the round trips per run (default 500).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark: a failure should stop it

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{Client, Server, broker};
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Makes `count` conversations with `agent` and returns their ids.
async fn conversations(client: &mut Client, agent: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let cid = uuid::Uuid::now_v7().to_string();
        client
            .send_json(
                &format!("CMD/chat_new/{agent}"),
                json!({"agent_id": agent, "conversation_id": cid, "content": " "}),
            )
            .await;
        let r = client
            .next(&format!("EVT/chat_progress/{agent}/{cid}"))
            .await;
        assert_eq!(r["status"], "initialized");
        ids.push(cid);
    }
    ids
}

/// `n` round trips on one conversation, one at a time; their durations.
async fn round_trips(client: &mut Client, agent: &str, cid: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    let response = format!("EVT/chat_response/{agent}/{cid}");
    for i in 0..n {
        let started = Instant::now();
        client
            .send_json(
                &format!("DATA/chat/{agent}/{cid}"),
                json!({"agent_id": agent, "conversation_id": cid, "content": format!("reading {i}")}),
            )
            .await;
        client.next(&response).await;
        out.push(started.elapsed());
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some((host, port)) = broker().await else {
        eprintln!("no broker: nothing measured");
        return;
    };
    let n: usize = std::env::var("AGENCY_BENCH_ROUNDTRIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut server = Server::start(&host, port).await;
    let team = server.team.clone();
    // A conversation with one agent alone: one model call a turn.
    let agent = server.agent.clone();
    let mut setup = Client::connect(&host, port, &team).await;
    setup.wait_for_server(&agent).await;

    // The turn's own cost: the same turns on the runtime directly.
    let direct_cid = conversations(&mut setup, &agent, 1).await.remove(0);
    let direct_id: agency_core::ConversationId = direct_cid.parse().unwrap();
    let warm = n / 10;
    let mut direct = Vec::with_capacity(n);
    for i in 0..n + warm {
        let started = Instant::now();
        server
            .rt
            .send(direct_id, format!("reading {i}"))
            .await
            .unwrap();
        if i >= warm {
            direct.push(started.elapsed());
        }
    }
    direct.sort();

    // One client, one conversation, one round trip at a time.
    let cid = conversations(&mut setup, &agent, 1).await.remove(0);
    let mut one = Client::connect_to(
        &host,
        port,
        &team,
        &[format!("XMAGS/{team}/EVT/chat_response/{agent}/{cid}")],
    )
    .await;
    round_trips(&mut one, &agent, &cid, warm).await;
    let started = Instant::now();
    let mut sequential = round_trips(&mut one, &agent, &cid, n).await;
    let sequential_rate = n as f64 / started.elapsed().as_secs_f64();
    sequential.sort();

    // 16 clients, each on its own conversation, at once.
    let clients = 16;
    let ids = conversations(&mut setup, &agent, clients).await;
    let mut connected = Vec::new();
    for cid in ids {
        let c = Client::connect_to(
            &host,
            port,
            &team,
            &[format!("XMAGS/{team}/EVT/chat_response/{agent}/{cid}")],
        )
        .await;
        connected.push((c, cid));
    }
    let each = (n / clients).max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (mut c, cid) in connected {
        let agent = agent.clone();
        tasks.push(tokio::spawn(async move {
            round_trips(&mut c, &agent, &cid, each).await
        }));
    }
    let mut parallel = Vec::new();
    for t in tasks {
        parallel.extend(t.await.unwrap());
    }
    let parallel_rate = parallel.len() as f64 / started.elapsed().as_secs_f64();
    parallel.sort();

    println!("chat round trips through MQTT ({host}:{port}), {n} per run, rules model, SQLite");
    println!(
        "  the turn alone (runtime, no MQTT): p50 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&direct, 0.5)),
        ms(percentile(&direct, 0.99))
    );
    println!(
        "  1 client:   {sequential_rate:.0} round trips/s, p50 {:.3} ms, p99 {:.3} ms; added over the turn at p50: {:.3} ms",
        ms(percentile(&sequential, 0.5)),
        ms(percentile(&sequential, 0.99)),
        ms(percentile(&sequential, 0.5)) - ms(percentile(&direct, 0.5))
    );
    println!(
        "  {clients} clients: {parallel_rate:.0} round trips/s, p50 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&parallel, 0.5)),
        ms(percentile(&parallel, 0.99))
    );
    server.stop().await;
}
