//! One way through: every face asks for a turn with a `TurnRequest` (`Runtime::begin`), which
//! lets a caller reach only its own conversations, and reports the turn as events in order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agency_core::{ChatMessage, Role};
use agency_runtime::api::ChatTurn;
use agency_runtime::keys::{self, Keyring};
use agency_runtime::secrets::MasterKeySource;
use agency_runtime::{Ask, Caller, Event, LOCAL_OWNER, RuntimeError, TurnEvent, TurnRequest};
use futures::StreamExt;

fn relay() -> agency_core::AgencyDraft {
    common::draft(
        "json",
        16,
        vec![
            common::agent(
                1,
                "lead",
                "builtin/rules",
                &[
                    ("helper", "done: {{message}}", &["user"]),
                    ("any", "{{message}}", &["helper"]),
                ],
            ),
            common::agent(2, "helper", "builtin/rules", &[]),
        ],
    )
}

/// A second agency of the same owner.
async fn another(h: &common::Harness) -> agency_core::Agency {
    let draft = agency_core::AgencyDraft {
        name: "other".into(),
        ..relay()
    };
    h.rt.agencies().save(&draft, LOCAL_OWNER).await.unwrap()
}

#[tokio::test]
async fn a_caller_reaches_only_its_own_conversations() {
    let h = common::Harness::sqlite().await;
    let agency = h.agency(relay()).await;
    let other = another(&h).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let ask = |caller: Caller| TurnRequest::message(caller, c.id, "hello".into());

    // Another account, another agency's topics: as if the conversation did not exist.
    for caller in [
        Caller::Owner("0193f1e6-someone-else".into()),
        Caller::Agency(other.id),
    ] {
        match h.rt.begin(ask(caller.clone())).await {
            Err(RuntimeError::ConversationNotFound(id)) => assert_eq!(id, c.id),
            Err(e) => panic!("{caller:?}: {e}"),
            Ok(_) => panic!("{caller:?} took a turn in another's conversation"),
        }
    }
    assert!(
        h.store
            .messages(c.id)
            .await
            .unwrap()
            .iter()
            .all(|m| m.kind == agency_core::MessageKind::System),
        "nothing was written for them"
    );

    // The owner, the agency's own face and the process itself may.
    for (n, caller) in [
        Caller::Owner(LOCAL_OWNER.into()),
        Caller::Agency(agency.id),
        Caller::Local,
    ]
    .into_iter()
    .enumerate()
    {
        let out =
            h.rt.begin(ask(caller))
                .await
                .unwrap()
                .outcome()
                .await
                .unwrap();
        assert_eq!(out.number, n as u32 + 1);
        assert_eq!(out.conversation_id, c.id);
    }
}

#[tokio::test]
async fn a_key_asks_only_for_its_own_agency() {
    let h = common::Harness::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let agency = h.agency(relay()).await;
    let other = another(&h).await;
    let keyring = Keyring::load(&*h.store, &MasterKeySource::File(dir.path().join("k")))
        .await
        .unwrap();
    let (key, _) = keys::create_key(
        &*h.store,
        &keyring,
        &agency,
        "app",
        None,
        None,
        agency_core::KeyBudgets::default(),
    )
    .await
    .unwrap();
    let chat = |agency: &agency_core::Agency| TurnRequest {
        caller: Caller::Key(key.clone()),
        ask: Ask::Chat {
            agency: std::sync::Arc::new(agency.clone()),
            turn: Box::new(ChatTurn {
                input: vec![ChatMessage::new(Role::User, "hello")],
                ..ChatTurn::default()
            }),
        },
        stream_text: false,
        progress: false,
        face: agency_core::Face::Mcp,
    };
    match h.rt.begin(chat(&other)).await {
        Err(RuntimeError::AgencyNotFound(name)) => assert_eq!(name, "other"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a key reached another agency"),
    }
    let out = h.rt.begin(chat(&agency)).await.unwrap().outcome().await;
    assert_eq!(out.unwrap().number, 1);
    // Only a key asks with a history.
    let owner = TurnRequest {
        caller: Caller::Owner(LOCAL_OWNER.into()),
        ..chat(&agency)
    };
    assert!(matches!(
        h.rt.begin(owner).await,
        Err(RuntimeError::AgencyNotFound(_))
    ));
}

#[tokio::test]
async fn a_watched_turn_reports_its_own_hops_then_ends() {
    let h = common::Harness::sqlite().await;
    let agency = h.agency(relay()).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let elsewhere = h.rt.conversations().start(&agency).await.unwrap();
    // Another conversation's turn runs at the same time: its events are not this turn's.
    let rt = h.rt.clone();
    let other = tokio::spawn(async move { rt.send(elsewhere.id, "busy".into()).await });

    let request = TurnRequest {
        progress: true,
        stream_text: true,
        ..TurnRequest::message(Caller::Local, c.id, "hello".into())
    };
    let turn = h.rt.begin(request).await.unwrap();
    assert_eq!(turn.conversation(), c.id);
    let events: Vec<TurnEvent> = turn.events().collect().await;
    other.await.unwrap().unwrap();

    let (last, progress) = events.split_last().expect("events");
    let TurnEvent::Finished { outcome, rest } = last else {
        panic!("the turn's end comes last: {last:?}");
    };
    // The rules model does not stream: the whole answer is what is left to send.
    assert_eq!(rest, &outcome.answer);
    assert!(!outcome.answer.is_empty());
    let hops: Vec<&Event> = progress
        .iter()
        .map(|e| match e {
            TurnEvent::Progress(event) => event,
            other => panic!("only progress before the end: {other:?}"),
        })
        .collect();
    assert!(hops.iter().all(|e| e.conversation() == Some(c.id)));
    assert!(matches!(hops.first(), Some(Event::TurnStarted { .. })));
    assert!(matches!(hops.last(), Some(Event::TurnFinished { .. })));
    let relayed = hops
        .iter()
        .filter(|e| matches!(e, Event::Hop { .. }))
        .count();
    assert_eq!(
        relayed as u32,
        outcome.trace.len() as u32,
        "every hop, once"
    );
}
