//! Chat Completions requests as conversations: a new conversation is written with its first
//! turn's first write, the answer's write records the transcript that continues it, and a
//! request refused before its turn leaves nothing behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use agency_core::{MessageKind, Role};
use agency_runtime::api::{ChatTurn, transcript_hash};
use agency_runtime::keys::{self, Keyring};
use agency_runtime::secrets::MasterKeySource;

#[tokio::test]
async fn a_request_writes_its_conversation_with_its_turn_and_the_next_continues_it() {
    let h = common::Harness::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let store = h.rt.store().clone();
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
    let (key, _) = keys::create_key(&*store, &keyring, &agency, "app", None, None)
        .await
        .unwrap();

    // Refused before its turn (an empty message): nothing is stored.
    let empty = ChatTurn {
        input: vec!["  ".into()],
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
        input: vec!["hello".into()],
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
        (Role::User, "hello".to_string()),
        (Role::Assistant, out.answer.clone()),
    ];
    assert_eq!(
        store
            .api_thread(key.id, &transcript_hash(Some("Answer in French."), &after))
            .await
            .unwrap(),
        Some(c),
        "the transcript was recorded with the answer"
    );

    // The client resends the history: the same conversation, a second turn.
    let next = ChatTurn {
        system: Some("Answer in French.".into()),
        history: after.to_vec(),
        input: vec!["more".into()],
        ..ChatTurn::default()
    };
    let again = h.rt.chat_completion(&key, &agency, next).await.unwrap();
    assert_eq!(again.conversation_id, c);
    assert_eq!(again.number, 2);
    assert_eq!(store.turns(c).await.unwrap().len(), 2);
    assert_eq!(store.list_conversations(agency.id).await.unwrap().len(), 1);
}
