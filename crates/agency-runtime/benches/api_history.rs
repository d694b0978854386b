//! What a Chat Completions request's history costs: a request with a 200-message history that
//! continues its conversation, forks it at its 99th turn (a regenerated message) or seeds a new
//! one (a history nobody stored), against a fresh request without history, through the
//! runtime (`Runtime::chat_completion`) on SQLite, one agent on the rules model.
//!
//!     cargo bench -p agency-runtime --bench api_history
//!
//! The four run in alternating blocks of `AGENCY_BENCH_CALLS` requests (default 10) for
//! `AGENCY_BENCH_ROUNDS` rounds (default 10); each figure is the median of its blocks'
//! per-request means, and "added" is that minus the fresh request's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed unwrap is a failed run

mod common;
use common::{count, median};
use std::time::Instant;

use agency_core::{AgencyDraft, AgentDraft, ChatMessage, Role, RuleDraft};
use agency_providers::Providers;
use agency_runtime::api::ChatTurn;
use agency_runtime::keys::{self, Keyring};
use agency_runtime::secrets::MasterKeySource;
use agency_runtime::tools::Tools;
use agency_runtime::{LOCAL_OWNER, Runtime};

/// Turns of the stored conversation: a history of twice as many messages.
const TURNS: usize = 100;

fn echo() -> AgencyDraft {
    AgencyDraft {
        name: "echo".into(),
        protocol: "json".into(),
        manager: "boss".into(),
        agents: vec![AgentDraft {
            name: "boss".into(),
            model: "builtin/rules".into(),
            rules: vec![RuleDraft {
                when: "user".into(),
                action: "noted: {{message}}".into(),
                send_to: vec!["user".into()],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (calls, rounds) = (
        count("AGENCY_BENCH_CALLS", 10),
        count("AGENCY_BENCH_ROUNDS", 10),
    );
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let store = agency_store::open(&url).await?;
        let rt = Runtime::assemble(
            store.clone(),
            Providers::builtin(),
            None,
            Tools::new(Vec::new(), false),
        );
        let agency = rt.agencies().save(&echo(), LOCAL_OWNER).await?;
        let keyring = Keyring::load(&*store, &MasterKeySource::File(dir.path().join("k"))).await?;
        let (key, _) = keys::create_key(
            &*store,
            &keyring,
            &agency,
            "bench",
            None,
            None,
            agency_core::KeyBudgets::default(),
        )
        .await?;
        let ask = |history: Vec<ChatMessage>, input: String| {
            let (rt, key, agency) = (rt.clone(), key.clone(), agency.clone());
            async move {
                let turn = ChatTurn {
                    history,
                    input: vec![ChatMessage::new(Role::User, input)],
                    ..ChatTurn::default()
                };
                rt.chat_completion(&key, &agency, turn).await.unwrap()
            }
        };

        // The stored conversation: 100 turns, each request resending the history.
        let mut history: Vec<ChatMessage> = Vec::new();
        let mut stored = None;
        for i in 0..TURNS {
            let input = format!("message {i}");
            let out = ask(history.clone(), input.clone()).await;
            assert_eq!(
                *stored.get_or_insert(out.conversation_id),
                out.conversation_id
            );
            history.push(ChatMessage::new(Role::User, input));
            history.push(ChatMessage::new(Role::Assistant, out.answer));
        }
        let stored = stored.unwrap();
        // Regenerating the last answer: the history up to turn 99.
        let regenerate = history[..history.len() - 2].to_vec();
        // A history nobody stored: the same, its first answer edited.
        let mut foreign = history.clone();
        foreign[1].text.push_str(" (edited)");

        let (mut fresh, mut cont, mut fork, mut seed) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let started = Instant::now();
            for _ in 0..calls {
                let out = ask(Vec::new(), "hello".into()).await;
                assert_eq!(out.number, 1);
            }
            fresh.push(started.elapsed().as_secs_f64() * 1e3 / calls as f64);

            let started = Instant::now();
            for _ in 0..calls {
                let out = ask(history.clone(), "go on".into()).await;
                assert_eq!(out.conversation_id, stored, "continued");
                history.push(ChatMessage::new(Role::User, "go on"));
                history.push(ChatMessage::new(Role::Assistant, out.answer));
            }
            cont.push(started.elapsed().as_secs_f64() * 1e3 / calls as f64);

            let started = Instant::now();
            for _ in 0..calls {
                let out = ask(regenerate.clone(), "again".into()).await;
                assert_ne!(out.conversation_id, stored);
                assert_eq!(out.number as usize, TURNS, "forked after turn 99");
            }
            fork.push(started.elapsed().as_secs_f64() * 1e3 / calls as f64);

            let started = Instant::now();
            for _ in 0..calls {
                let out = ask(foreign.clone(), "again".into()).await;
                assert_eq!(out.number, 1, "seeded");
            }
            seed.push(started.elapsed().as_secs_f64() * 1e3 / calls as f64);
        }
        let fresh = median(fresh);
        println!("fresh request (no history)              {fresh:>7.3} ms");
        for (label, v) in [
            ("continued (200+ messages)", cont),
            ("forked at turn 99 (198 messages)", fork),
            ("seeded (200 messages)", seed),
        ] {
            let m = median(v);
            println!("{label:<40} {m:>7.3} ms | added {:>7.3} ms", m - fresh);
        }
        Ok(())
    })
}
