//! Cancelling a running turn (`Runtime::cancel`, MQTT's `chat_cancel`): the turn ends at once
//! without an answer, its record says `cancelled`, no model is called after it, and the
//! conversation goes on. Models block on a gate the test opens, so nothing depends on timing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;

use agency_core::{AgentId, ConversationId, StopReason};
use agency_runtime::{Event, Runtime};
use common::*;
use tokio::sync::{Notify, broadcast};

/// Waits until `agent`'s model is called in `conversation`.
async fn started(
    events: &mut broadcast::Receiver<Event>,
    conversation: ConversationId,
    agent: u32,
) {
    loop {
        match events.recv().await.unwrap() {
            Event::AgentStarted {
                conversation: c,
                agent: a,
                ..
            } if c == conversation && a == AgentId::new(agent).unwrap() => return,
            _ => {}
        }
    }
}

/// A draft whose deadline is far away: only the cancel ends the turn early.
fn patient(agents: Vec<agency_core::AgentDraft>) -> agency_core::AgencyDraft {
    let mut d = draft("json", 16, agents);
    d.turn_deadline_secs = Some(600);
    d
}

fn spawn_turn(
    rt: &Arc<Runtime>,
    c: ConversationId,
    text: &str,
) -> tokio::task::JoinHandle<Result<agency_runtime::TurnOutcome, agency_runtime::RuntimeError>> {
    let (rt, text) = (rt.clone(), text.to_string());
    tokio::spawn(async move { rt.send(c, text).await })
}

#[tokio::test]
async fn a_cancelled_turn_ends_at_once_and_the_conversation_goes_on() {
    let h = Harness::sqlite().await;
    let gate = Arc::new(Notify::new());
    h.script(
        "w",
        vec![Act::Gated(
            gate.clone(),
            r#"{"to": 1, "context": "late result"}"#,
        )],
    );
    let m = h.script(
        "m",
        vec![
            Act::Say(r#"{"to": 2, "context": "do it"}"#),
            Act::Say(r#"{"to": 0, "context": "second answer"}"#),
        ],
    );
    let agency = h
        .agency(patient(vec![
            agent(1, "manager", "script/m", &[]),
            agent(2, "w", "script/w", &[]),
        ]))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    assert!(!h.rt.cancel(c.id), "no turn is running yet");

    let mut events = h.rt.subscribe();
    let turn = spawn_turn(&h.rt, c.id, "q1");
    started(&mut events, c.id, 2).await; // the worker is blocked on the gate
    assert!(h.rt.cancel(c.id));
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.stopped_by, StopReason::Cancelled);
    assert_eq!(out.answer, "");
    assert!(!h.rt.cancel(c.id), "the turn is over");
    let mut finished = None;
    while let Ok(e) = events.try_recv() {
        if let Event::TurnFinished { stopped_by, .. } = e {
            finished = Some(stopped_by);
        }
    }
    assert_eq!(finished, Some(StopReason::Cancelled));

    // The turn's record is written; the worker's late reply is kept, and calls no one.
    gate.notify_one();
    h.rt.settle().await;
    let turns = h.store.turns(c.id).await.unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].stopped_by, Some(StopReason::Cancelled));
    assert!(turns[0].finished_at.is_some() && turns[0].error.is_none());
    assert_eq!(
        m.seen.lock().unwrap().len(),
        1,
        "no model call after the cancel"
    );
    let entries =
        h.rt.conversations()
            .entries(c.agency_id, c.id)
            .await
            .unwrap();
    assert_eq!(entries[0].stopped_by, Some(StopReason::Cancelled));
    assert_eq!(entries[0].response, None);

    // The next message runs normally, and the manager sees the late reply before it.
    let out = h.rt.send(c.id, "q2".into()).await.unwrap();
    assert_eq!(
        (out.answer.as_str(), out.stopped_by),
        ("second answer", StopReason::Answered)
    );
    let seen = m.seen.lock().unwrap();
    let texts: Vec<&str> = seen[1].iter().skip(1).map(|m| m.text.as_str()).collect();
    assert_eq!(texts[texts.len() - 2..], ["late result", "q2"]);
}

#[tokio::test]
async fn cancelling_while_the_manager_itself_works() {
    let h = Harness::sqlite().await;
    let gate = Arc::new(Notify::new());
    let m = h.script(
        "m",
        vec![
            Act::Gated(gate.clone(), r#"{"to": 0, "context": "too late"}"#),
            Act::Say(r#"{"to": 0, "context": "on time"}"#),
        ],
    );
    let agency = h
        .agency(patient(vec![
            agent(1, "manager", "script/m", &[]),
            agent(2, "w", "builtin/rules", &[]),
        ]))
        .await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let mut events = h.rt.subscribe();
    let turn = spawn_turn(&h.rt, c.id, "q1");
    started(&mut events, c.id, 1).await;
    assert!(h.rt.cancel(c.id));
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.stopped_by, StopReason::Cancelled);

    // The manager's answer arrives after the cancel: stored as its reply, not the turn's answer.
    gate.notify_one();
    h.rt.settle().await;
    let entries =
        h.rt.conversations()
            .entries(c.agency_id, c.id)
            .await
            .unwrap();
    assert_eq!(entries[0].response, None);
    let out = h.rt.send(c.id, "q2".into()).await.unwrap();
    assert_eq!(out.answer, "on time");
    assert_eq!(m.seen.lock().unwrap().len(), 2);
    let entries =
        h.rt.conversations()
            .entries(c.agency_id, c.id)
            .await
            .unwrap();
    assert_eq!(
        entries.iter().map(|e| e.stopped_by).collect::<Vec<_>>(),
        [Some(StopReason::Cancelled), Some(StopReason::Answered)]
    );
}
