//! Chat Completions requests as conversations: a new conversation is written with its first
//! turn's first write, the answer's write records the transcript that continues it, and a
//! request refused before its turn leaves nothing behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use agency_core::{ChatMessage, MessageKind, Role};
use agency_runtime::api::{ChatTurn, transcript_hash};
use agency_runtime::keys::{self, Keyring};
use agency_runtime::secrets::MasterKeySource;

#[tokio::test]
async fn a_request_writes_its_conversation_with_its_turn_and_the_next_continues_it() {
    let h = common::Harness::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let store = h.store.clone();
    let agency = h
        .agency(common::draft(
            "json",
            16,
            vec![
                common::agent(1, "lead", "builtin/rules", &[]),
                common::agent(2, "helper", "builtin/rules", &[]),
            ],
        ))
        .await;
    let keyring = Keyring::load(&*store, &MasterKeySource::File(dir.path().join("k")))
        .await
        .unwrap();
    let (key, _) = keys::create_key(
        &*store,
        &keyring,
        &agency,
        "app",
        None,
        None,
        agency_core::KeyBudgets::default(),
    )
    .await
    .unwrap();

    // Refused before its turn (an empty message): nothing is stored.
    let empty = ChatTurn {
        input: vec![ChatMessage::new(Role::User, "  ")],
        ..ChatTurn::default()
    };
    assert!(h.rt.chat_completion(&key, &agency, empty).await.is_err());
    assert!(
        store
            .list_conversations(agency.id)
            .await
            .unwrap()
            .is_empty()
    );

    let first = ChatTurn {
        system: Some("Answer in French.".into()),
        input: vec![ChatMessage::new(Role::User, "hello")],
        ..ChatTurn::default()
    };
    let out = h.rt.chat_completion(&key, &agency, first).await.unwrap();
    let c = out.conversation_id;
    assert_eq!(
        store.list_conversations(agency.id).await.unwrap().len(),
        1,
        "the conversation was written"
    );
    let messages = store.messages(c).await.unwrap();
    let seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (0..messages.len() as i64).collect::<Vec<_>>());
    assert_eq!(messages[0].kind, MessageKind::System);
    assert_eq!(messages[1].kind, MessageKind::System);
    let manager_prompt = messages
        .iter()
        .find(|m| m.agent.map(|a| a.get()) == Some(1))
        .unwrap();
    assert!(manager_prompt.text.ends_with("Answer in French."));
    let helper_prompt = messages
        .iter()
        .find(|m| m.agent.map(|a| a.get()) == Some(2))
        .unwrap();
    assert!(
        !helper_prompt.text.contains("French"),
        "only the manager sees it"
    );
    assert_eq!(messages[2].kind, MessageKind::Input);
    assert_eq!(messages.last().unwrap().kind, MessageKind::Answer);
    let turns = store.turns(c).await.unwrap();
    assert_eq!(turns.len(), 1);
    assert!(turns[0].finished_at.is_some() && turns[0].stopped_by.is_some());
    let after = [
        ChatMessage::new(Role::User, "hello"),
        ChatMessage::new(Role::Assistant, out.answer.clone()),
    ];
    let hash = transcript_hash(None, Some("Answer in French."), &after);
    let recorded = store
        .api_threads(key.id, std::slice::from_ref(&hash))
        .await
        .unwrap();
    assert_eq!(
        recorded.len(),
        1,
        "the transcript was recorded with the answer"
    );
    assert_eq!(
        (
            recorded[0].conversation,
            recorded[0].turn,
            recorded[0].last_turn
        ),
        (c, 1, 1)
    );

    // The client resends the history: the same conversation, a second turn.
    let next = ChatTurn {
        system: Some("Answer in French.".into()),
        history: after.to_vec(),
        input: vec![ChatMessage::new(Role::User, "more")],
        ..ChatTurn::default()
    };
    let again = h.rt.chat_completion(&key, &agency, next).await.unwrap();
    assert_eq!(again.conversation_id, c);
    assert_eq!(again.number, 2);
    assert_eq!(store.turns(c).await.unwrap().len(), 2);
    assert_eq!(store.list_conversations(agency.id).await.unwrap().len(), 1);
}

/// The API does not read an agency's state on every request: this runtime's own changes are
/// served at once, and another process's (here a second runtime on the same database, as the
/// CLI would be) within a second.
#[tokio::test]
async fn a_published_version_is_served_at_once_here_and_soon_elsewhere() {
    let h = common::Harness::sqlite().await;
    let lead = |role: &str| {
        let mut a = common::agent(1, "lead", "builtin/rules", &[]);
        a.role = Some(role.into());
        common::draft("json", 16, vec![a])
    };
    let agency = h.agency(lead("first")).await;
    let served = |rt: &std::sync::Arc<agency_runtime::Runtime>| {
        let rt = rt.clone();
        async move {
            let a = rt.agencies().published(agency.id).await.unwrap();
            a.agents[0].role.clone().unwrap_or_default()
        }
    };
    assert_eq!(served(&h.rt).await, "first");

    // A new draft is not served until it is published, then at once.
    h.rt.agencies()
        .update(agency_runtime::LOCAL_OWNER, agency.id, &lead("second"))
        .await
        .unwrap();
    assert_eq!(served(&h.rt).await, "first");
    h.rt.agencies()
        .publish(agency_runtime::LOCAL_OWNER, agency.id)
        .await
        .unwrap();
    assert_eq!(served(&h.rt).await, "second");

    // Another process publishes: this runtime serves it once its state is read again.
    let other = common::Harness::on(h.url.clone(), None).await;
    other.agency(lead("third")).await;
    let mut seen = served(&h.rt).await;
    for _ in 0..50 {
        if seen == "third" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        seen = served(&h.rt).await;
    }
    assert_eq!(seen, "third", "another process's publication is served");
}

/// A reply of the json protocol answering the user.
fn answer(text: &str) -> common::Act {
    common::Act::SayOwned(format!(r#"{{"to":0,"context":"{text}"}}"#))
}

/// What the manager's model was sent on its `n`th call: each message's kind and text, without
/// the system prompt.
fn sent(boss: &common::Script, n: usize) -> Vec<(MessageKind, String)> {
    boss.seen.lock().unwrap()[n]
        .iter()
        .filter(|m| m.kind != MessageKind::System)
        .map(|m| (m.kind, m.text.clone()))
        .collect()
}

fn said(v: &[(MessageKind, &str)]) -> Vec<(MessageKind, String)> {
    v.iter().map(|(k, t)| (*k, t.to_string())).collect()
}

/// Any history: a request continues the conversation whose latest turn it repeats, forks one
/// at an earlier turn (regenerate, edit, another end user on the same opening), seeds the
/// rest of what it holds, and seeds a new conversation with a history nobody stored. What the
/// manager's model is sent shows each.
#[tokio::test]
async fn any_history_continues_forks_or_seeds() {
    use MessageKind::{Input, Reply};
    let h = common::Harness::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let store = h.store.clone();
    let boss = h.script(
        "boss",
        ["a1", "a2", "a2 again", "e1", "p1", "b1", "f3"]
            .into_iter()
            .map(answer)
            .collect(),
    );
    let agency = h
        .agency(common::draft(
            "json",
            16,
            vec![common::agent(1, "boss", "script/boss", &[])],
        ))
        .await;
    let keyring = Keyring::load(&*store, &MasterKeySource::File(dir.path().join("k")))
        .await
        .unwrap();
    let (key, _) = keys::create_key(
        &*store,
        &keyring,
        &agency,
        "app",
        None,
        None,
        agency_core::KeyBudgets::default(),
    )
    .await
    .unwrap();
    let ask = |history: &[(Role, &str)], input: &str, end_user: Option<&str>| {
        let turn = ChatTurn {
            history: history
                .iter()
                .map(|(r, t)| ChatMessage::new(*r, *t))
                .collect(),
            input: vec![ChatMessage::new(Role::User, input)],
            end_user: end_user.map(str::to_string),
            ..ChatTurn::default()
        };
        let (rt, key, agency) = (h.rt.clone(), key.clone(), agency.clone());
        async move { rt.chat_completion(&key, &agency, turn).await.unwrap() }
    };
    use Role::{Assistant as A, User as U};

    let first = ask(&[], "one", None).await;
    let c = first.conversation_id;
    let second = ask(&[(U, "one"), (A, "a1")], "two", None).await;
    assert_eq!((second.conversation_id, second.number), (c, 2), "continued");

    // Regenerate: the history ends at turn 1, but the conversation went on: a fork as it
    // stood after turn 1, which the manager sees as its own past.
    let regen = ask(&[(U, "one"), (A, "a1")], "two", None).await;
    let f = regen.conversation_id;
    assert_ne!(f, c);
    assert_eq!(regen.number, 2);
    assert_eq!(
        sent(&boss, 2),
        said(&[
            (Input, "one"),
            (Reply, r#"{"to":0,"context":"a1"}"#),
            (Input, "two")
        ])
    );
    assert_eq!(
        store.turns(f).await.unwrap().len(),
        2,
        "turn 1 copied, turn 2 its own"
    );
    assert_eq!(
        store.turns(c).await.unwrap().len(),
        2,
        "the original is untouched"
    );

    // An edited answer nobody stored: a new conversation seeded with the whole history.
    let edited = ask(&[(U, "one"), (A, "a1, edited")], "x", None).await;
    assert!(![c, f].contains(&edited.conversation_id));
    assert_eq!(edited.number, 1);
    assert_eq!(
        sent(&boss, 3),
        said(&[
            (Input, "one"),
            (Reply, r#"{"to":0,"context":"a1, edited"}"#),
            (Input, "x")
        ])
    );

    // A history that leaves a stored one after turn 1: a fork there, the rest seeded.
    let partial = ask(
        &[(U, "one"), (A, "a1"), (U, "two"), (A, "a2, edited")],
        "three",
        None,
    )
    .await;
    assert!(![c, f, edited.conversation_id].contains(&partial.conversation_id));
    assert_eq!(
        sent(&boss, 4),
        said(&[
            (Input, "one"),
            (Reply, r#"{"to":0,"context":"a1"}"#),
            (Input, "two"),
            (Reply, r#"{"to":0,"context":"a2, edited"}"#),
            (Input, "three")
        ])
    );
    assert_eq!(partial.number, 2, "seeded history is not a turn");

    // Another end user opening the same way never reaches those conversations.
    let bob = ask(&[(U, "one"), (A, "a1")], "two", Some("bob")).await;
    assert!(
        ![c, f, edited.conversation_id, partial.conversation_id].contains(&bob.conversation_id)
    );
    assert_eq!(bob.number, 1);

    // The fork goes on like any conversation: its own latest turn continues it.
    let on = ask(
        &[(U, "one"), (A, "a1"), (U, "two"), (A, "a2 again")],
        "three",
        None,
    )
    .await;
    assert_eq!((on.conversation_id, on.number), (f, 3));
    assert_eq!(
        sent(&boss, 6),
        said(&[
            (Input, "one"),
            (Reply, r#"{"to":0,"context":"a1"}"#),
            (Input, "two"),
            (Reply, r#"{"to":0,"context":"a2 again"}"#),
            (Input, "three")
        ])
    );
    // Each fork and seed is its own conversation; the user's transcript of a seeded one holds
    // the seeded answers too.
    assert_eq!(store.list_conversations(agency.id).await.unwrap().len(), 5);
    let answers: Vec<String> = store
        .messages(partial.conversation_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.kind == MessageKind::Answer)
        .map(|m| m.text)
        .collect();
    assert_eq!(answers, ["a1", "a2, edited", "p1"]);
}
