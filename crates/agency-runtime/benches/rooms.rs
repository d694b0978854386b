//! Roundtable rooms: 16 agents whose model takes 200 ms answer one message, in parallel — the
//! time over the model's own 200 ms is what the room adds (storing the person's message,
//! building 16 contexts, storing 16 answers). Then a room of 10,000 messages loaded whole (its
//! agents and messages, what `GET /api/rooms/{id}` reads). SQLite, in a temporary file.
//!
//!     cargo bench -p agency-runtime --bench rooms
//!
//! `AGENCY_BENCH_ROUNDS` sets the number of messages answered (default 30).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::RoomMessageId;
use agency_core::room::{Author, RoomMessage};
use agency_providers::{ChatRequest, Completion, Model, ModelError, Provider, Providers};
use agency_runtime::Runtime;
use agency_runtime::rooms::NewParticipant;
use async_trait::async_trait;

const LATENCY: Duration = Duration::from_millis(200);
const AGENTS: usize = 16;
const ROOM_MESSAGES: usize = 10_000;

/// Answers after exactly [`LATENCY`].
struct Slow;

#[async_trait]
impl Model for Slow {
    async fn chat(&self, request: ChatRequest) -> Result<Completion, ModelError> {
        let n = request.messages.len();
        drop(request);
        tokio::time::sleep(LATENCY).await;
        Ok(Completion {
            text: format!("an answer to {n} messages"),
            ..Completion::default()
        })
    }
}

impl Provider for Slow {
    fn model(&self, _: &str) -> Option<Arc<dyn Model>> {
        Some(Arc::new(Slow))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("AGENCY_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("rooms.db").display());
    let store = agency_store::open(&url).await.unwrap();
    let mut providers = Providers::builtin();
    providers.insert("slow", Arc::new(Slow));
    let rt = Runtime::new(store.clone(), providers);

    let (room, _) = rt.rooms().create("bench", "sixteen", None).await.unwrap();
    for i in 0..AGENTS {
        rt.rooms()
            .add_participant(
                "bench",
                room.id,
                NewParticipant {
                    name: format!("agent{i}"),
                    model: "slow/model".into(),
                    role: Some("answers".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    let mut took = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let start = Instant::now();
        let (_, answers) = rt
            .rooms()
            .post("bench", room.id, &format!("question {i}"), None)
            .await
            .unwrap()
            .answers()
            .await;
        took.push(start.elapsed());
        assert_eq!(answers.len(), AGENTS);
    }
    took.sort_unstable();
    let added = |d: Duration| ms(d.saturating_sub(LATENCY));
    println!(
        "{AGENTS} agents at {} ms each answer one message, {rounds} messages (the room grows to {} messages):",
        LATENCY.as_millis(),
        rounds * (AGENTS + 1)
    );
    println!(
        "  whole exchange p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms; added over {} ms: p50 {:.2} ms, p90 {:.2} ms",
        ms(percentile(&took, 0.5)),
        ms(percentile(&took, 0.9)),
        ms(took[took.len() - 1]),
        LATENCY.as_millis(),
        added(percentile(&took, 0.5)),
        added(percentile(&took, 0.9)),
    );

    // A room of 10,000 messages.
    let (big, _) = rt
        .rooms()
        .create("bench", "ten thousand", None)
        .await
        .unwrap();
    rt.rooms()
        .add_participant(
            "bench",
            big.id,
            NewParticipant {
                name: "talker".into(),
                model: "slow/model".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let talker = store.participants(big.id).await.unwrap()[0].clone();
    for i in 0..ROOM_MESSAGES {
        let author = if i % 2 == 0 {
            Author::Person
        } else {
            Author::Agent {
                id: talker.id,
                name: talker.name.clone(),
            }
        };
        store
            .add_room_message(RoomMessage {
                id: RoomMessageId::new(),
                room: big.id,
                seq: 0,
                author,
                text: format!("message {i}: {}", "some words of a conversation ".repeat(4)),
                included: true,
                reply_to: None,
                tagged: Vec::new(),
                created_at: chrono::Utc::now(),
            })
            .await
            .unwrap();
    }
    let mut loads = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let (_, participants, messages) = rt.rooms().detail("bench", big.id).await.unwrap();
        loads.push(start.elapsed());
        assert_eq!((participants.len(), messages.len()), (1, ROOM_MESSAGES));
    }
    loads.sort_unstable();
    println!(
        "a room of {ROOM_MESSAGES} messages loaded whole (room, agents, messages), 20 loads: p50 {:.2} ms, max {:.2} ms",
        ms(percentile(&loads, 0.5)),
        ms(loads[loads.len() - 1]),
    );
}
