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
            let a = rt.published_agency(agency.id).await.unwrap();
            a.agents[0].role.clone().unwrap_or_default()
        }
    };
    assert_eq!(served(&h.rt).await, "first");

    // A new draft is not served until it is published, then at once.
    h.rt.update_agency(agency_runtime::LOCAL_OWNER, agency.id, &lead("second"))
        .await
        .unwrap();
    assert_eq!(served(&h.rt).await, "first");
    h.rt.publish_agency(agency_runtime::LOCAL_OWNER, agency.id)
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
