//! The engine alone: the rules model, a manager and 4 agents, 10 hops a turn, every message
//! persisted. Reports persisted hops per second on SQLite and (when reachable) PostgreSQL, one
//! conversation at a time and 64 at once, then one turn of 1,000 hops in windows of 100, to
//! show that a long turn does not slow down.
//!
//!     cargo bench -p agency-runtime --bench engine
//!
//! `AGENCY_BENCH_TURNS` sets the number of 10-hop turns (default 2000).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::time::Instant;

use agency_core::MessageKind;
use agency_core::{AgencyDraft, AgentDraft, RuleDraft};
use agency_providers::Providers;
use agency_runtime::{Event, LOCAL_OWNER, Runtime};

fn agent(id: u32, name: &str, rules: &[(&str, &str)]) -> AgentDraft {
    AgentDraft {
        id: Some(id),
        name: name.into(),
        model: "builtin/rules".into(),
        rules: rules
            .iter()
            .map(|(when, to)| RuleDraft {
                when: (*when).into(),
                action: format!("{name} to {to}: next step"),
                send_to: vec![(*to).into()],
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Ten hops a turn: m→a1→a2→a3→a4→a1→a3→a2→a4→m→user, each (agent, sender) pair once.
fn ten_hops() -> AgencyDraft {
    AgencyDraft {
        name: "bench".into(),
        protocol: "json".into(),
        manager: "m".into(),
        max_hops: Some(16),
        agents: vec![
            agent(1, "m", &[("user", "a1"), ("a4", "user")]),
            agent(2, "a1", &[("m", "a2"), ("a4", "a3")]),
            agent(3, "a2", &[("a1", "a3"), ("a3", "a4")]),
            agent(4, "a3", &[("a2", "a4"), ("a1", "a2")]),
            agent(5, "a4", &[("a3", "a1"), ("a2", "m")]),
        ],
        ..Default::default()
    }
}

/// A manager and a pair that play for `hops` replies.
fn long_turn(hops: u32) -> AgencyDraft {
    let pinger = |id, name: &str, to: &str| AgentDraft {
        id: Some(id),
        name: name.into(),
        model: "builtin/rules".into(),
        rules: vec![RuleDraft {
            when: "any".into(),
            action: "hit {{count}}".into(),
            send_to: vec![to.into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    AgencyDraft {
        name: format!("long-{hops}"),
        protocol: "json".into(),
        manager: "m".into(),
        max_hops: Some(hops),
        agents: vec![
            AgentDraft {
                id: Some(1),
                name: "m".into(),
                model: "builtin/rules".into(),
                rules: vec![
                    RuleDraft {
                        when: "user".into(),
                        action: "go".into(),
                        send_to: vec!["ping".into()],
                        ..Default::default()
                    },
                    RuleDraft {
                        when: "any".into(),
                        action: "{{message}}".into(),
                        send_to: vec!["user".into()],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            pinger(2, "ping", "pong"),
            pinger(3, "pong", "ping"),
        ],
        ..Default::default()
    }
}

async fn bench(label: &str, url: &str, turns: u32) -> Result<(), Box<dyn std::error::Error>> {
    let store = agency_store::open(url).await?;
    let rt = Runtime::new(store, Providers::builtin());
    let agency = rt.agencies().save(&ten_hops(), LOCAL_OWNER).await?;
    // Warm up (statement caches, file growth), then measure a few conversations of many turns.
    let c = rt.conversations().start(&agency).await?;
    for _ in 0..50 {
        rt.send(c.id, "warm up".into()).await?;
    }
    let conversations = 10;
    let mut hops = 0u64;
    let started = Instant::now();
    for _ in 0..conversations {
        let c = rt.conversations().start(&agency).await?;
        for _ in 0..turns / conversations {
            let out = rt.send(c.id, "build the thing".into()).await?;
            assert_eq!(out.hops, 10);
            hops += u64::from(out.hops);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label:<9} 10-hop turns: {hops} hops in {secs:.2} s = {:>8.0} persisted hops/s ({:.1} µs/hop)",
        hops as f64 / secs,
        secs * 1e6 / hops as f64
    );

    // The same turns in 64 conversations at once: what concurrent writers get (group commit).
    let at_once = 64u32;
    let mut running = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..at_once {
        let (rt, agency) = (rt.clone(), agency.clone());
        running.spawn(async move {
            let c = rt.conversations().start(&agency).await.unwrap();
            let mut hops = 0u64;
            for _ in 0..(turns / at_once).max(1) {
                let out = rt.send(c.id, "build the thing".into()).await.unwrap();
                assert_eq!(out.hops, 10);
                hops += u64::from(out.hops);
            }
            hops
        });
    }
    let mut hops = 0u64;
    while let Some(done) = running.join_next().await {
        hops += done?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label:<9} 10-hop turns, {at_once} conversations at once: {hops} hops in {secs:.2} s = {:>8.0} persisted hops/s",
        hops as f64 / secs,
    );

    // One turn of 1,000 hops, timed in windows of 100 hops from the event stream: a turn that
    // slowed down as it grew would show later windows slower than earlier ones.
    let agency = rt.agencies().save(&long_turn(1000), LOCAL_OWNER).await?;
    let c = rt.conversations().start(&agency).await?;
    let mut events = rt.subscribe();
    let clock = tokio::spawn(async move {
        let mut stamps = Vec::new();
        while let Ok(e) = events.recv().await {
            match e {
                Event::Hop { entry, .. } if entry.kind == MessageKind::Delivery => {
                    stamps.push(Instant::now())
                }
                Event::TurnFinished { .. } => break,
                _ => {}
            }
        }
        stamps
    });
    let started = Instant::now();
    let out = rt.send(c.id, "play".into()).await?;
    let secs = started.elapsed().as_secs_f64();
    let stamps = clock.await?;
    let windows: Vec<String> = stamps
        .chunks_exact(100)
        .map(|w| {
            format!(
                "{:.1}",
                99.0 / w[99].duration_since(w[0]).as_secs_f64() / 1000.0
            )
        })
        .collect();
    println!(
        "{label:<9} one turn of {} hops: {secs:.3} s = {:.0} hops/s; per 100-hop window, thousand hops/s: {}",
        out.hops,
        f64::from(out.hops) / secs,
        windows.join(" ")
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let turns = std::env::var("AGENCY_BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        bench("sqlite", &url, turns).await?;
        if std::env::var("AGENCY_BENCH_SQLITE_ONLY").is_ok() {
            return Ok(());
        }
        match agency_store::testing::postgres_url().await {
            Some(url) => bench("postgres", &url, turns).await?,
            None => println!("postgres  skipped: no server"),
        }
        Ok(())
    })
}
