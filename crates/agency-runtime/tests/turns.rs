//! Every engine rule, end to end: real store, real rules model, scripted models where a
//! misbehaving agent is needed. Agencies here have a 1 s turn deadline; no assertion is about
//! how long anything took. (Tokio's paused clock cannot be used: it fires sqlx's pool timeouts
//! while SQLite works on its own thread.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use std::time::Duration;

use agency_core::{MessageKind, StopReason};
use agency_runtime::{Event, RuntimeError};
use common::*;

fn studio(protocol: &str) -> agency_core::AgencyDraft {
    draft(
        protocol,
        16,
        vec![
            agent(
                4522,
                "manager",
                "builtin/rules",
                &[
                    ("user", "Please build: {{message}}", &["programmer"]),
                    ("programmer", "Done: {{message}}", &["user"]),
                ],
            ),
            agent(
                143,
                "programmer",
                "builtin/rules",
                &[("manager", "fn main() {} // {{message}}", &["manager"])],
            ),
        ],
    )
}

#[tokio::test]
async fn a_routed_turn_is_persisted_and_traced() {
    for protocol in ["json", "directives"] {
        let h = Harness::sqlite().await;
        let agency = h.agency(studio(protocol)).await;
        let c = h.rt.conversations().start(&agency).await.unwrap();
        let out = h.rt.send(c.id, "a CLI".into()).await.unwrap();
        assert_eq!(out.answer, "Done: fn main() {} // Please build: a CLI");
        assert_eq!(out.stopped_by, StopReason::Answered);
        assert_eq!(out.hops, 3);
        assert_eq!(out.number, 1);
        assert_eq!(
            lines(&out, &agency),
            [
                "user>manager:input:a CLI",
                "manager>programmer:delivery:Please build: a CLI",
                "programmer>manager:delivery:fn main() {} // Please build: a CLI",
                "manager>user:answer:Done: fn main() {} // Please build: a CLI",
            ]
        );

        // Everything is in the store, each agent's context its own, deliveries after their replies.
        let all = h.store.messages(c.id).await.unwrap();
        let programmer: Vec<_> = all
            .iter()
            .filter(|m| m.agent.map(|a| a.get()) == Some(143))
            .collect();
        assert_eq!(
            programmer.iter().map(|m| m.kind).collect::<Vec<_>>(),
            [
                MessageKind::System,
                MessageKind::Delivery,
                MessageKind::Reply
            ]
        );
        assert!(programmer[0].text.contains("#4522 (manager)"));
        for m in all.iter().filter(|m| m.kind == MessageKind::Delivery) {
            let reply = all
                .iter()
                .find(|r| Some(r.id) == m.linked)
                .expect("a delivery links its reply");
            assert!(reply.seq < m.seq && reply.kind == MessageKind::Reply);
            assert_eq!(reply.to, m.agent, "the reply records its addressee");
        }
        let raw = &programmer[2].text;
        match protocol {
            "json" => assert!(raw.starts_with(r#"{"to":4522,"context":"#), "{raw}"),
            _ => assert!(raw.starts_with("TO manager: "), "{raw}"),
        }
        // The stored trace is the one returned.
        assert_eq!(
            h.rt.conversations()
                .turn(&agency.owner, c.id, out.number)
                .await
                .unwrap()
                .trace,
            out.trace
        );
        let turns = h.store.turns(c.id).await.unwrap();
        assert_eq!(turns[0].stopped_by, Some(StopReason::Answered));
        assert_eq!(turns[0].hops, 3);
    }
}

#[tokio::test]
async fn a_conversation_continues_across_turns_and_restarts() {
    let h = Harness::sqlite().await;
    let agency = h.agency(studio("json")).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    h.rt.send(c.id, "one".into()).await.unwrap();
    // A new runtime on the same database: the contexts come back from the store.
    let h2 = Harness::on(h.url.clone(), None).await;
    let out = h2.rt.send(c.id, "two".into()).await.unwrap();
    assert_eq!(out.number, 2);
    let manager_ctx: Vec<_> = h2
        .store
        .messages(c.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.agent.map(|a| a.get()) == Some(4522))
        .collect();
    assert_eq!(
        manager_ctx
            .iter()
            .filter(|m| m.kind == MessageKind::Input)
            .count(),
        2
    );
    assert!(matches!(
        h.rt.send(agency_core::ConversationId::new(), "x".into())
            .await,
        Err(RuntimeError::ConversationNotFound(_))
    ));
    assert!(matches!(
        h.rt.send(c.id, "  ".into()).await,
        Err(RuntimeError::Invalid(_))
    ));
}

#[tokio::test]
async fn a_fan_out_runs_in_parallel() {
    let h = Harness::sqlite().await;
    // Each call waits until the other is running too: called one after the other, they hang.
    let together = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let a = h.script(
        "a",
        vec![Act::Together(
            together.clone(),
            r#"{"to": 1, "context": "a done"}"#,
        )],
    );
    let b = h.script(
        "b",
        vec![Act::Together(together, r#"{"to": 1, "context": "b done"}"#)],
    );
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(
                    1,
                    "manager",
                    "builtin/rules",
                    &[
                        ("user", "split: {{message}}", &["alice", "bob"]),
                        ("bob", "both: {{message}}", &["user"]),
                    ],
                ),
                agent(2, "alice", "script/a", &[]),
                agent(3, "bob", "script/b", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let mut agency = agency;
    agency.limits.turn_deadline = Duration::from_secs(60);
    h.store.save_agency(&agency).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), h.rt.send(c.id, "job".into()))
        .await
        .expect("alice and bob must run at the same time")
        .unwrap();
    assert_eq!(
        a.seen.lock().unwrap().len() + b.seen.lock().unwrap().len(),
        2
    );
    let l = lines(&out, &agency);
    assert_eq!(
        &l[1..3],
        [
            "manager>alice:delivery:split: job",
            "manager>bob:delivery:split: job"
        ]
    );
    assert_eq!(out.stopped_by, StopReason::Answered);
    assert!(out.answer.starts_with("both: "), "{}", out.answer);
    assert_eq!(out.usage.total(), 10, "usage sums every model call");
}

#[tokio::test]
async fn only_the_manager_reaches_the_user() {
    let h = Harness::sqlite().await;
    let agency = h
        .agency(draft(
            "directives",
            16,
            vec![
                agent(
                    1,
                    "manager",
                    "builtin/rules",
                    &[
                        ("user", "{{message}}", &["worker"]),
                        ("worker", "ok: {{message}}", &["user"]),
                    ],
                ),
                agent(
                    2,
                    "worker",
                    "builtin/rules",
                    &[("manager", "sneaky {{message}}", &["user"])],
                ),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "hi".into()).await.unwrap();
    assert_eq!(lines(&out, &agency)[2], "worker>manager:delivery:sneaky hi");
    assert_eq!(out.answer, "ok: sneaky hi");
}

#[tokio::test]
async fn bad_replies_are_corrected_then_passed_on() {
    let h = Harness::sqlite().await;
    let w = h.script(
        "w",
        vec![
            Act::Say("I think we should..."),
            Act::Say(r#"{"to": 99, "context": "x"}"#),
            Act::Say("```json\n{\"to\": 1, \"context\": \"fixed\"}\n```"),
            Act::Say("rambling again"),
        ],
    );
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(
                    1,
                    "manager",
                    "builtin/rules",
                    &[
                        ("user", "{{message}}", &["worker"]),
                        ("worker", "got: {{message}}", &["user"]),
                    ],
                ),
                agent(2, "worker", "script/w", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "go".into()).await.unwrap();
    assert_eq!(out.answer, "got: fixed");
    let l = lines(&out, &agency);
    assert!(l[2].starts_with("agency>worker:correction:Your reply could not be delivered: your reply is not a JSON object"), "{l:?}");
    assert!(
        l[3].starts_with(
            "agency>worker:correction:Your reply could not be delivered: there is no agent #99"
        ),
        "{l:?}"
    );
    // The third call saw both corrections, in order, after its own bad replies.
    let third = w.seen.lock().unwrap()[2].clone();
    assert_eq!(
        kinds(&third),
        [
            MessageKind::System,
            MessageKind::Delivery,
            MessageKind::Reply,
            MessageKind::Correction,
            MessageKind::Reply,
            MessageKind::Correction
        ]
    );

    // Three bad replies in a row: the raw text goes to the manager.
    let out = h.rt.send(c.id, "again".into()).await.unwrap();
    assert_eq!(out.answer, "got: rambling again");
}

#[tokio::test]
async fn a_manager_that_cannot_format_answers_the_user_raw() {
    let h = Harness::sqlite().await;
    h.script("m", vec![Act::Say("Hello! How can I help?")]);
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(1, "manager", "script/m", &[]),
                agent(2, "worker", "builtin/rules", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "hi".into()).await.unwrap();
    assert_eq!(out.answer, "Hello! How can I help?");
    assert_eq!(out.hops, 3);
}

fn ping_pong(max_hops: u32, text: &str) -> agency_core::AgencyDraft {
    draft(
        "json",
        max_hops,
        vec![
            agent(
                1,
                "manager",
                "builtin/rules",
                &[
                    ("user", "start", &["ping"]),
                    ("any", "summary: {{message}}", &["user"]),
                ],
            ),
            agent(2, "ping", "builtin/rules", &[("any", text, &["pong"])]),
            agent(3, "pong", "builtin/rules", &[("any", text, &["ping"])]),
        ],
    )
}

#[tokio::test]
async fn the_hop_limit_stops_an_endless_exchange() {
    let h = Harness::sqlite().await;
    let agency = h.agency(ping_pong(8, "hit {{count}}")).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "play".into()).await.unwrap();
    assert_eq!(out.stopped_by, StopReason::MaxHops);
    assert_eq!(out.hops, 9, "8 hops, then the manager's answer");
    let l = lines(&out, &agency);
    assert!(
        l.iter().any(|l| l.starts_with(
            "agency>manager:guard:Stop now: this turn reached its limit of 8 replies"
        )),
        "{l:?}"
    );
    assert!(l.last().unwrap().starts_with("manager>user:answer:"));
    assert_eq!(
        h.store.turns(c.id).await.unwrap()[0].stopped_by,
        Some(StopReason::MaxHops)
    );
}

#[tokio::test]
async fn a_repeated_exchange_is_stopped_as_a_loop() {
    let h = Harness::sqlite().await;
    let agency = h.agency(ping_pong(100, "same again")).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "play".into()).await.unwrap();
    assert_eq!(out.stopped_by, StopReason::Loop);
    assert!(out.hops < 10, "caught early: {} hops", out.hops);
}

#[tokio::test]
async fn a_thousand_hop_turn_completes() {
    let h = Harness::sqlite().await;
    let agency = h.agency(ping_pong(1000, "hit {{count}}")).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "play".into()).await.unwrap();
    assert_eq!((out.stopped_by, out.hops), (StopReason::MaxHops, 1001));
    assert_eq!(
        h.store.messages(c.id).await.unwrap().len(),
        out.trace.len() + 1001 + 3
    );
}

#[tokio::test]
async fn the_deadline_makes_the_manager_answer() {
    let h = Harness::sqlite().await;
    h.script(
        "slow",
        vec![Act::Slow(
            Duration::from_millis(1500),
            r#"{"to": 1, "context": "finally"}"#,
        )],
    );
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(
                    1,
                    "manager",
                    "builtin/rules",
                    &[
                        ("user", "{{message}}", &["slow"]),
                        ("slow", "late: {{message}}", &["user"]),
                    ],
                ),
                agent(2, "slow", "script/slow", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "hurry".into()).await.unwrap();
    assert_eq!(out.stopped_by, StopReason::Deadline);
    // The rules manager answers with the last thing an agent told it: nothing yet but the input.
    let l = lines(&out, &agency);
    assert!(
        l.iter()
            .any(|l| l
                .starts_with("agency>manager:guard:Stop now: this turn reached its time limit")),
        "{l:?}"
    );

    // The slow reply arrives after the answer: it is kept for the next turn.
    h.rt.settle().await;
    let ctx: Vec<_> = h
        .store
        .messages(c.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.agent.map(|a| a.get()) == Some(1))
        .collect();
    let late = ctx.last().unwrap();
    assert_eq!(
        (late.kind, late.text.as_str()),
        (MessageKind::Delivery, "finally")
    );
    let out = h.rt.send(c.id, "next".into()).await.unwrap();
    // The manager answered the late reply and the new input in one call.
    assert_eq!(lines(&out, &agency)[0], "user>manager:input:next");
}

#[tokio::test]
async fn a_manager_that_never_answers_is_cut_off() {
    let h = Harness::sqlite().await;
    h.script("m", vec![Act::Hang]);
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(1, "manager", "script/m", &[]),
                agent(2, "w", "builtin/rules", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "hello?".into()).await.unwrap();
    assert_eq!(out.stopped_by, StopReason::Deadline);
    assert_eq!(out.answer, "The agency could not finish answering in time.");
}

#[tokio::test]
async fn late_replies_reach_the_manager_next_turn() {
    let h = Harness::sqlite().await;
    h.script(
        "fast",
        vec![Act::Say(r#"{"to": 1, "context": "fast result"}"#)],
    );
    // The slow agent answers only after the first turn has answered.
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    h.script(
        "slow",
        vec![Act::Gated(
            gate.clone(),
            r#"{"to": 1, "context": "slow result"}"#,
        )],
    );
    let m = h.script(
        "m",
        vec![
            Act::Say(r#"[{"to": 2, "context": "do a"}, {"to": 3, "context": "do b"}]"#),
            Act::Say(r#"{"to": 0, "context": "first answer"}"#),
            Act::Say(r#"{"to": 0, "context": "second answer"}"#),
        ],
    );
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(1, "manager", "script/m", &[]),
                agent(2, "fast", "script/fast", &[]),
                agent(3, "slow", "script/slow", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "q1".into()).await.unwrap();
    assert_eq!(out.answer, "first answer");
    gate.notify_one();
    let out = h.rt.send(c.id, "q2".into()).await.unwrap();
    assert_eq!(out.answer, "second answer");
    // The manager's third call saw the slow late reply before the new question.
    let seen = m.seen.lock().unwrap();
    let texts: Vec<&str> = seen[2].iter().skip(1).map(|m| m.text.as_str()).collect();
    assert_eq!(texts[texts.len() - 2..], ["slow result", "q2"]);
}

#[tokio::test]
async fn failures_are_reported() {
    let h = Harness::sqlite().await;
    h.script("broken", vec![Act::Fail("HTTP 503: overloaded")]);
    let agency = h
        .agency(draft(
            "json",
            16,
            vec![
                agent(
                    1,
                    "manager",
                    "builtin/rules",
                    &[
                        ("user", "{{message}}", &["w"]),
                        ("w", "sorry: {{message}}", &["user"]),
                    ],
                ),
                agent(2, "w", "script/broken", &[]),
            ],
        ))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "x".into()).await.unwrap();
    assert_eq!(
        out.answer,
        "sorry: #2 (w) could not answer: script: HTTP 503: overloaded"
    );

    let broken = h
        .agency({
            let mut d = draft(
                "json",
                16,
                vec![
                    agent(1, "boss", "script/broken", &[]),
                    agent(2, "w", "builtin/rules", &[]),
                ],
            );
            d.name = "broken".into();
            d
        })
        .await;
    let c = h.rt.conversations().start(&broken).await.unwrap();
    match h.rt.send(c.id, "x".into()).await {
        Err(RuntimeError::Model { name, error, .. }) => assert_eq!(
            (name.as_str(), error.as_str()),
            ("boss", "script: HTTP 503: overloaded")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.store.turns(c.id).await.unwrap()[0].error.as_deref(),
        Some("script: HTTP 503: overloaded")
    );
}

#[tokio::test]
async fn events_follow_the_turn() {
    let h = Harness::sqlite().await;
    let agency = h.agency(studio("json")).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let mut rx = h.rt.subscribe();
    let out = h.rt.send(c.id, "x".into()).await.unwrap();
    let mut hops = Vec::new();
    let mut finished = false;
    while let Ok(e) = rx.try_recv() {
        match e {
            Event::Hop { entry, .. } => hops.push(entry),
            Event::TurnFinished { stopped_by, .. } => finished = stopped_by == StopReason::Answered,
            _ => {}
        }
    }
    assert_eq!(hops, out.trace);
    assert!(finished);
}

#[tokio::test]
async fn postgres_runs_the_same_turn() {
    let Some(url) = agency_store::testing::postgres_url().await else {
        return;
    };
    let h = Harness::on(url, None).await;
    let agency = h.agency(studio("json")).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "a CLI".into()).await.unwrap();
    assert_eq!(out.answer, "Done: fn main() {} // Please build: a CLI");
    assert_eq!(
        h.rt.conversations()
            .turn(&agency.owner, c.id, out.number)
            .await
            .unwrap()
            .trace,
        out.trace
    );
}
