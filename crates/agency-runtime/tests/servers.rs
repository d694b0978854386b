//! Several processes on one store: any of them takes any conversation's next turn, one turn at
//! a time, and a turn a crash cut short is finished by the next.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use agency_core::{ConversationId, MessageKind};
use common::{Act, Harness, agent, draft};

fn team() -> agency_core::AgencyDraft {
    draft(
        "json",
        16,
        vec![
            agent(1, "boss", "script/boss", &[]),
            agent(2, "alice", "script/alice", &[]),
            agent(3, "bob", "script/bob", &[]),
        ],
    )
}

/// The user's messages in the manager's context, in order.
async fn inputs(h: &Harness, c: ConversationId) -> Vec<String> {
    h.store
        .messages(c)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.kind == MessageKind::Input)
        .map(|m| m.text)
        .collect()
}

/// Two servers on one PostgreSQL schema, as two processes would be.
async fn two_servers() -> Option<(Harness, Harness)> {
    let url = agency_store::testing::postgres_url().await?;
    let a = Harness::on(url.clone(), None).await;
    let b = Harness::on(url, None).await;
    for h in [&a, &b] {
        h.script("boss", vec![Act::Say(r#"{"to": 0, "context": "ok"}"#)]);
        h.script("alice", vec![Act::Say(r#"{"to": 1, "context": "ok"}"#)]);
        h.script("bob", vec![Act::Say(r#"{"to": 1, "context": "ok"}"#)]);
    }
    Some((a, b))
}

#[tokio::test]
async fn turns_of_one_conversation_on_two_servers_follow_each_other() {
    let Some((a, b)) = two_servers().await else {
        return;
    };
    let agency = a.agency(team()).await;
    let c = a.rt.conversations().start(&agency).await.unwrap();
    a.rt.send(c.id, "one".into()).await.unwrap();
    let boss_b = b.script("boss", vec![Act::Say(r#"{"to": 0, "context": "ok"}"#)]);
    b.rt.send(c.id, "two".into()).await.unwrap();
    // Server A keeps the conversation from its turn in memory; it is stale now.
    let boss_a = a.script("boss", vec![Act::Say(r#"{"to": 0, "context": "ok"}"#)]);
    let third = a.rt.send(c.id, "three".into()).await.unwrap();
    assert_eq!(third.number, 3);
    let saw = |s: &common::Script| -> Vec<String> {
        s.seen.lock().unwrap()[0]
            .iter()
            .filter(|m| m.kind == MessageKind::Input)
            .map(|m| m.text.clone())
            .collect()
    };
    assert_eq!(saw(&boss_b), ["one", "two"]);
    assert_eq!(saw(&boss_a), ["one", "two", "three"]);
    let turns = a.store.turns(c.id).await.unwrap();
    assert_eq!(
        turns.iter().map(|t| t.number).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[tokio::test]
async fn concurrent_requests_on_one_conversation_queue_across_servers() {
    let Some((a, b)) = two_servers().await else {
        return;
    };
    let agency = a.agency(team()).await;
    let c = a.rt.conversations().start(&agency).await.unwrap();
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..20 {
        let rt = if i % 2 == 0 {
            a.rt.clone()
        } else {
            b.rt.clone()
        };
        sends.spawn(async move { rt.send(c.id, format!("message {i}")).await });
    }
    let mut numbers = Vec::new();
    while let Some(done) = sends.join_next().await {
        numbers.push(done.unwrap().unwrap().number);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=20).collect::<Vec<u32>>());
    let mut stored = inputs(&a, c.id).await;
    assert_eq!(stored.len(), 20);
    stored.sort();
    stored.dedup();
    assert_eq!(stored.len(), 20, "every message stored once");
    // Every message's position is its own, and each turn's messages are together.
    let messages = a.store.messages(c.id).await.unwrap();
    let seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (0..i64::try_from(seqs.len()).unwrap()).collect::<Vec<_>>()
    );
    let mut turn_order: Vec<_> = messages.iter().filter_map(|m| m.turn_id).collect();
    turn_order.dedup();
    assert_eq!(turn_order.len(), 20, "turns did not interleave");
}

#[tokio::test]
async fn a_dead_servers_lock_frees_when_its_lease_ends() {
    let Some(url) = agency_store::testing::postgres_url().await else {
        return;
    };
    let store = agency_store::open(&url).await.unwrap();
    let c = ConversationId::new();
    let (dead, alive) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let lease = Duration::from_millis(300);
    use agency_store::TurnLock;
    assert!(matches!(
        store.lock_turn(c, dead, lease).await.unwrap(),
        TurnLock::Taken { next_seq: 0 }
    ));
    assert_eq!(
        store.lock_turn(c, alive, lease).await.unwrap(),
        TurnLock::Held
    );
    // The holder extends it; a stranger's unlock does nothing.
    store.unlock_turn(c, alive).await.unwrap();
    assert!(matches!(
        store.lock_turn(c, dead, lease).await.unwrap(),
        TurnLock::Taken { .. }
    ));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(matches!(
        store.lock_turn(c, alive, lease).await.unwrap(),
        TurnLock::Taken { .. }
    ));
    store.unlock_turn(c, alive).await.unwrap();
    assert!(matches!(
        store.lock_turn(c, dead, lease).await.unwrap(),
        TurnLock::Taken { .. }
    ));
}

/// A crash while bob's message to alice waited for her (she was busy): the next turn, on
/// another server, delivers it once and calls her with it.
#[tokio::test]
async fn a_turn_cut_short_by_a_crash_is_finished_by_the_next_on_another_server() {
    let a = Harness::sqlite().await;
    a.script(
        "boss",
        vec![Act::Say(
            r#"[{"to": 2, "context": "build it"}, {"to": 3, "context": "test it"}]"#,
        )],
    );
    a.script("alice", vec![Act::Hang]);
    a.script(
        "bob",
        vec![Act::Say(r#"{"to": 2, "context": "tests pass"}"#)],
    );
    let agency = a.agency(team()).await;
    let c = a.rt.conversations().start(&agency).await.unwrap();
    let rt = a.rt.clone();
    let turn = tokio::spawn(async move { rt.send(c.id, "ship it".into()).await });
    // Bob's reply is stored; alice is still working.
    let bobs = loop {
        let messages = a.store.messages(c.id).await.unwrap();
        if let Some(m) = messages.iter().find(|m| {
            m.kind == MessageKind::Reply && m.agent.map(agency_core::AgentId::get) == Some(3)
        }) {
            break m.id;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // The crash: the turn stops where it is.
    turn.abort();
    let _ = turn.await;
    drop(a.rt);
    // Another server on the same database.
    let b = Harness::on(a.url.clone(), None).await;
    b.script("boss", vec![Act::Say(r#"{"to": 0, "context": "shipped"}"#)]);
    let alice = b.script("alice", vec![Act::Say(r#"{"to": 1, "context": "built"}"#)]);
    b.script("bob", vec![Act::Say(r#"{"to": 1, "context": "idle"}"#)]);
    let out = b.rt.send(c.id, "status?".into()).await.unwrap();
    assert_eq!(out.answer, "shipped");
    b.rt.settle().await;
    let messages = b.store.messages(c.id).await.unwrap();
    let delivered: Vec<_> = messages
        .iter()
        .filter(|m| m.kind == MessageKind::Delivery && m.linked == Some(bobs))
        .collect();
    assert_eq!(delivered.len(), 1, "bob's message delivered once");
    assert_eq!(delivered[0].text, "tests pass");
    // Alice was called again, with both messages that reached her.
    let context = alice.seen.lock().unwrap()[0].clone();
    let texts: Vec<&str> = context
        .iter()
        .filter(|m| m.kind == MessageKind::Delivery)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(texts, ["build it", "tests pass"]);
    // The interrupted turn's accepted messages are kept.
    assert_eq!(inputs(&b, c.id).await, ["ship it", "status?"]);
}

/// A key limited to 60 requests a minute, used through two servers at once.
#[tokio::test]
async fn a_keys_rate_limit_holds_across_servers() {
    use secrecy::ExposeSecret;
    let Some((a, b)) = two_servers().await else {
        return;
    };
    let agency = a.agency(team()).await;
    let (auth_a, auth_b) = (
        a.rt.authenticator().await.unwrap(),
        b.rt.authenticator().await.unwrap(),
    );
    let (_, key) = auth_a
        .create_key(
            &agency,
            "shared",
            None,
            Some(60),
            agency_core::KeyBudgets::default(),
        )
        .await
        .unwrap();
    let key = key.expose_secret().to_string();
    let mut allowed = 0;
    let mut refused = Vec::new();
    for i in 0..100 {
        let auth = if i % 2 == 0 { &auth_a } else { &auth_b };
        match auth.authenticate(Some(&key)).await {
            Ok(_) => allowed += 1,
            Err(agency_runtime::keys::AuthError::RateLimited { retry_after, .. }) => {
                refused.push(retry_after);
            }
            Err(e) => panic!("{e}"),
        }
    }
    // The estimate counts the previous minute by the share of it still within the last 60
    // seconds: a burst that crosses a minute's end may get one more.
    assert!((60..=61).contains(&allowed), "{allowed} allowed");
    assert!(
        refused
            .iter()
            .all(|r| *r >= Duration::from_secs(1) && *r <= Duration::from_secs(120))
    );
}

/// A room of ada's on `h` with one agent, ann (`script/ann`).
async fn room_with_ann(h: &Harness) -> agency_core::room::Room {
    let (room, _) = h.rt.rooms().create("ada", "ideas", None).await.unwrap();
    h.rt.rooms()
        .add_participant(
            "ada",
            room.id,
            agency_runtime::rooms::NewParticipant {
                name: "ann".into(),
                model: "script/ann".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    room
}

/// The next event of `events` that `pick` takes, within a few seconds.
async fn next<T>(
    events: &mut tokio::sync::broadcast::Receiver<agency_runtime::Event>,
    mut pick: impl FnMut(agency_runtime::Event) -> Option<T>,
) -> T {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the event in time")
            .expect("the stream is open");
        if let Some(got) = pick(event) {
            return got;
        }
    }
}

#[tokio::test]
async fn another_servers_turns_and_rooms_reach_this_servers_live_views() {
    use agency_runtime::Event;
    let Some((a, b)) = two_servers().await else {
        return;
    };
    b.rt.hear_others().await.unwrap();
    let mut events = b.rt.subscribe();
    // What only this server does is not on its own stream: MQTT progress.
    let mut local = b.rt.subscribe_local();
    a.script(
        "boss",
        vec![
            Act::Say(r#"{"to": 2, "context": "build it"}"#),
            Act::Say(r#"{"to": 0, "context": "built"}"#),
        ],
    );
    a.script("alice", vec![Act::Say(r#"{"to": 1, "context": "done"}"#)]);
    let agency = a.agency(team()).await;
    let c = a.rt.conversations().start(&agency).await.unwrap();
    let out = a.rt.send(c.id, "hello".into()).await.unwrap();
    assert_eq!(out.answer, "built");

    let number = next(&mut events, |e| match e {
        Event::TurnStarted {
            conversation,
            number,
            ..
        } if conversation == c.id => Some(number),
        _ => None,
    })
    .await;
    assert_eq!(number, out.number);
    let mut hops = Vec::new();
    let stopped_by = next(&mut events, |e| match e {
        Event::Hop {
            conversation,
            entry,
            ..
        } if conversation == c.id => {
            hops.push(entry);
            None
        }
        Event::TurnFinished {
            conversation,
            stopped_by,
            ..
        } if conversation == c.id => Some(stopped_by),
        _ => None,
    })
    .await;
    assert_eq!(stopped_by, out.stopped_by);
    assert_eq!(
        hops, out.trace,
        "the same hops, content read from the store"
    );

    // A room answered on server A.
    a.script("ann", vec![Act::Say("hi there")]);
    let room = room_with_ann(&a).await;
    let posted =
        a.rt.rooms()
            .post("ada", room.id, "hello", None)
            .await
            .unwrap();
    let (_, answers) = posted.answers().await;
    assert_eq!(answers.len(), 1);
    let answer = next(&mut events, |e| match e {
        Event::Room {
            room: r,
            change: agency_runtime::rooms::RoomChange::Message(m),
        } if r == room.id && m.text != "hello" => Some(m),
        _ => None,
    })
    .await;
    // As stored (PostgreSQL keeps times to the microsecond).
    assert_eq!(
        (answer.id, answer.text.as_str(), answer.seq),
        (answers[0].id, "hi there", answers[0].seq)
    );
    assert!(local.try_recv().is_err(), "nothing ran on this server");
}

/// A server starting (or looking for what a dead one left) leaves the room answers that a
/// live server is giving alone.
#[tokio::test]
async fn a_starting_server_leaves_another_servers_room_answers_alone() {
    let Some((a, b)) = two_servers().await else {
        return;
    };
    a.rt.keep_alive().await.unwrap();
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    a.script("ann", vec![Act::Gated(gate.clone(), "late but here")]);
    let room = room_with_ann(&a).await;
    let posted =
        a.rt.rooms()
            .post("ada", room.id, "hello", None)
            .await
            .unwrap();
    // Ann is answering on server A; server B starts.
    assert_eq!(b.rt.rooms().recover().await.unwrap(), 0);
    gate.notify_one();
    let (_, answers) = posted.answers().await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].text, "late but here");
    let stored = a.store.room_messages(room.id).await.unwrap();
    assert_eq!(
        stored.len(),
        2,
        "the person's message and ann's answer, no failure"
    );
}

/// Failed log-ins count on every server: five from one address for one email, spread over two
/// servers, and the sixth is refused on either.
#[tokio::test]
async fn failed_log_ins_count_across_servers() {
    let Some((a, b)) = two_servers().await else {
        return;
    };
    a.rt.accounts()
        .sign_up("ada@example.com", "correct horse battery", None)
        .await
        .unwrap();
    let client = Some("192.0.2.7".parse().unwrap());
    for i in 0..5 {
        let rt = if i % 2 == 0 { &a.rt } else { &b.rt };
        assert!(matches!(
            rt.accounts()
                .log_in("ada@example.com", "wrong", client)
                .await,
            Err(agency_runtime::RuntimeError::Unauthorized(_))
        ));
    }
    for rt in [&a.rt, &b.rt] {
        assert!(matches!(
            rt.accounts()
                .log_in("ada@example.com", "correct horse battery", client)
                .await,
            Err(agency_runtime::RuntimeError::TooManyAttempts(_))
        ));
    }
    // The owner, from elsewhere, logs in.
    let elsewhere = Some("198.51.100.1".parse().unwrap());
    assert!(
        b.rt.accounts()
            .log_in("ada@example.com", "correct horse battery", elsewhere)
            .await
            .is_ok()
    );
}
