//! One storage suite, run on SQLite and on PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use agency_core::{
    AgencyDraft, AgencyId, AgentDraft, AgentId, Conversation, ConversationId, Message, MessageId,
    MessageKind, RuleDraft, StopReason, TurnId, TurnRecord, Usage,
};
use agency_store::{ApiThread, Store, StoreError, Write};
use chrono::{SubsecRound, Utc};

async fn sqlite() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    (agency_store::open(&url).await.unwrap(), dir)
}

async fn postgres() -> Option<(Arc<dyn Store>, ())> {
    let url = agency_store::testing::postgres_url().await?;
    Some((agency_store::open(&url).await.unwrap(), ()))
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { let (s, _d) = super::sqlite().await; super::$name(s).await; })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((s, ())) = super::postgres().await else { return };
                super::$name(s).await;
            })*
        }
    };
}

suite!(
    agencies_round_trip,
    every_field_of_an_agency_round_trips,
    names_are_unique_per_owner,
    messages_keep_every_field_in_order,
    appends_are_all_or_nothing,
    a_write_is_all_or_nothing,
    concurrent_writes_succeed_or_fail_alone,
    large_appends,
    turns_are_recorded_and_updated,
    messages_through_a_turn_are_what_a_fork_copies,
    settings_are_claimed_once,
    sealed_provider_keys,
    api_keys_by_hash_name_and_state,
    memories_and_their_sources,
    plans_with_tasks_and_actions,
    versions_are_numbered_and_kept,
    deleting_an_agency_takes_everything_of_it,
    accounts_and_sessions,
    rooms_participants_and_messages,
    definitions_are_pointed_to_and_outlived,
    answers_in_flight_are_recorded_until_stored,
    api_responses_are_kept_per_agency,
    a2a_tasks_are_kept_per_agency_and_end_once,
    a_migrated_store_is_ready,
    spend_is_reserved_all_or_nothing_and_settled,
    budgets_of_keys_and_agencies_round_trip,
    system_prompts_read_back_wherever_they_are_kept,
    approvals_are_answered_once_and_started_once,
);

fn agency(name: &str, owner: &str, extra_agent: bool) -> agency_core::Agency {
    let mut agents = vec![
        AgentDraft {
            id: Some(4522),
            name: "manager".into(),
            handle: Some("MGR-1".into()),
            model: "builtin/rules".into(),
            instructions: Some("Lead.".into()),
            rules: vec![RuleDraft {
                when: "programmer".into(),
                action: "Done: {{message}}".into(),
                send_to: vec!["user".into(), "programmer".into()],
                ..Default::default()
            }],
            ..Default::default()
        },
        AgentDraft {
            id: Some(143),
            name: "programmer".into(),
            role: Some("writes code".into()),
            model: "local/qwen2.5".into(),
            temperature: Some(0.2),
            top_p: Some(0.9),
            max_tokens: Some(512),
            reflection_threshold: Some(1.5),
            reflection_half_life_hours: Some(6.0),
            observe_chats: Some(true),
            tools: vec!["docs/*".into(), "builtin/now".into()],
            rules: vec![RuleDraft {
                when: "any".into(),
                action: "ok {{result}}".into(),
                send_to: vec!["manager".into()],
                call: Some("docs/search".into()),
                with: Some(serde_json::json!({"q": "{{message}}", "n": 3})),
            }],
            ..Default::default()
        },
    ];
    if extra_agent {
        agents.push(AgentDraft {
            name: "tester".into(),
            model: "builtin/rules".into(),
            ..Default::default()
        });
    }
    AgencyDraft {
        name: name.into(),
        protocol: "directives".into(),
        manager: "manager".into(),
        max_hops: Some(7),
        turn_deadline_secs: Some(42),
        mcp_servers: vec![agency_core::McpServerDraft {
            name: "docs".into(),
            url: Some("https://mcp.example.com/mcp".into()),
            timeout_secs: Some(5),
            ..Default::default()
        }],
        providers: vec![agency_core::ProviderDraft {
            name: "local".into(),
            kind: "openai".into(),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            api_key_env: Some("LOCAL_KEY".into()),
            max_concurrency: Some(4),
            requests_per_minute: None,
            prices: vec![(
                "qwen".into(),
                agency_core::PriceDraft {
                    input: "0.1".into(),
                    output: "0.25".into(),
                },
            )],
        }],
        agents,
        ..Default::default()
    }
    .validate(AgencyId::new(), owner, &|_| true)
    .unwrap()
}

async fn agencies_round_trip(s: Arc<dyn Store>) {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    assert_eq!(s.agency(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        s.agency_by_name("local", "studio").await.unwrap(),
        Some(a.clone())
    );
    assert_eq!(
        s.agency_by_name("someone-else", "studio").await.unwrap(),
        None
    );
    assert_eq!(s.agency(AgencyId::new()).await.unwrap(), None);

    // Saving again replaces the agents, keeping the id, and moves the revision on.
    let first = s.agency_state(a.id).await.unwrap().unwrap();
    assert_eq!(first.published, None);
    let mut b = agency("studio", "local", true);
    b.id = a.id;
    s.save_agency(&b).await.unwrap();
    assert_ne!(
        s.agency_state(a.id).await.unwrap().unwrap().revision,
        first.revision
    );
    assert_eq!(s.agency_state(AgencyId::new()).await.unwrap(), None);
    let loaded = s.agency(a.id).await.unwrap().unwrap();
    assert_eq!(loaded.agents.len(), 3);
    assert_eq!(loaded, b);

    let c = agency("agency-b", "local", false);
    s.save_agency(&c).await.unwrap();
    let names: Vec<String> = s
        .list_agencies("local")
        .await
        .unwrap()
        .into_iter()
        .map(|(a, _)| a.name)
        .collect();
    assert_eq!(names, ["agency-b", "studio"]);
    s.publish(c.id, "name: agency-b", chrono::Utc::now())
        .await
        .unwrap();
    let listed = s.list_agencies("local").await.unwrap();
    assert_eq!(listed[1].0, b, "agents are loaded with the list");
    // Each with its state, as the agency's own read gives it.
    assert_eq!(listed[0].1.published, Some(1));
    assert_eq!(listed[1].1.published, None);
    for (a, state) in &listed {
        assert_eq!(Some(*state), s.agency_state(a.id).await.unwrap());
    }
}

/// The agency is kept as its draft: every field of it comes back (a field the draft's
/// `to_draft` or `validate` drops leaves it unequal).
async fn every_field_of_an_agency_round_trips(s: Arc<dyn Store>) {
    let d = agency_core::draft::every_agency_field();
    let a = d.validate(AgencyId::new(), "local", &|_| true).unwrap();
    s.save_agency(&a).await.unwrap();
    let loaded = s.agency(a.id).await.unwrap().unwrap();
    assert_eq!(loaded, a);
    assert_eq!(loaded.to_draft(), d);
    let listed = s.list_agencies("local").await.unwrap();
    assert_eq!(listed[0].0, a);
}

async fn names_are_unique_per_owner(s: Arc<dyn Store>) {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    let dup = agency("studio", "local", false);
    match s.save_agency(&dup).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("studio"), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Nothing of the refused agency was written.
    assert_eq!(s.agency(dup.id).await.unwrap(), None);
    assert_eq!(s.agency(a.id).await.unwrap(), Some(a));
    s.save_agency(&agency("studio", "alice", false))
        .await
        .unwrap();
}

fn conversation(agency: AgencyId) -> Conversation {
    Conversation {
        id: ConversationId::new(),
        agency_id: agency,
        version: None,
        created_at: Utc::now().trunc_subsecs(6),
    }
}

fn message(c: ConversationId, turn: Option<TurnId>, seq: i64) -> Message {
    Message {
        // Some show images, which read back in order.
        images: match seq % 4 {
            0 => vec![
                "https://example.com/a.png".into(),
                "data:image/png;base64,iVBORw0KGgo=".into(),
            ],
            _ => Vec::new(),
        },
        id: MessageId::new(),
        conversation_id: c,
        turn_id: turn,
        seq,
        agent: AgentId::new(143),
        kind: MessageKind::Delivery,
        linked: Some(MessageId::new()),
        from: AgentId::new(4522),
        to: AgentId::new(143),
        text: format!("message {seq} ✓ \"quoted\"\nline two"),
        // Some carry tool calls or a tool's result, which read back as they were.
        tool: match seq % 3 {
            1 => Some(agency_core::ToolPart::Calls(vec![
                agency_core::ToolCall {
                    id: format!("call_{seq}"),
                    name: "files/read".into(),
                    arguments: "{\"path\": \"a\"".into(), // malformed, as a model wrote it
                },
                agency_core::ToolCall {
                    id: "b".into(),
                    name: "builtin/now".into(),
                    arguments: String::new(),
                },
            ])),
            2 => Some(agency_core::ToolPart::Result(agency_core::ToolResult {
                call_id: format!("call_{}", seq - 1),
                name: "files/read".into(),
                is_error: seq % 2 == 0,
            })),
            _ => None,
        },
        usage: Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
        }),
        latency_ms: Some(12),
        included: seq % 2 == 0,
        created_at: Utc::now().trunc_subsecs(6),
    }
}

async fn create(s: &Arc<dyn Store>, c: &Conversation) {
    let w = Write {
        conversation: Some(c.clone()),
        ..Write::default()
    };
    s.write(w).await.unwrap();
}

async fn append(s: &Arc<dyn Store>, messages: &[Message]) -> Result<(), StoreError> {
    let w = Write {
        messages: messages.to_vec(),
        ..Write::default()
    };
    s.write(w).await.map(|_| ())
}

async fn save_turn(s: &Arc<dyn Store>, t: &TurnRecord) {
    let w = Write {
        turns: vec![t.clone()],
        ..Write::default()
    };
    s.write(w).await.unwrap();
}

/// A conversation's first turn, just started.
fn first_turn(conversation: ConversationId) -> TurnRecord {
    TurnRecord {
        id: TurnId::new(),
        conversation_id: conversation,
        number: 1,
        started_at: Utc::now().trunc_subsecs(6),
        finished_at: None,
        stopped_by: None,
        hops: 0,
        usage: Usage::default(),
        cost: None,
        error: None,
        face: Some(agency_core::Face::Cli),
    }
}

async fn setup(s: &Arc<dyn Store>) -> ConversationId {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    let c = conversation(a.id);
    create(s, &c).await;
    assert_eq!(s.conversation(c.id).await.unwrap(), Some(c.clone()));
    assert_eq!(s.list_conversations(a.id).await.unwrap(), vec![c.clone()]);
    c.id
}

async fn messages_keep_every_field_in_order(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    let turn = TurnId::new();
    let mut user_side = message(c, Some(turn), 1);
    user_side.agent = None;
    user_side.from = None;
    user_side.to = None;
    user_side.kind = MessageKind::Answer;
    user_side.usage = None;
    user_side.latency_ms = None;
    user_side.linked = None;
    let later = message(c, None, 7);
    let m3 = message(c, Some(turn), 3);
    append(&s, &[later.clone(), user_side.clone()])
        .await
        .unwrap();
    append(&s, std::slice::from_ref(&m3)).await.unwrap();
    assert_eq!(
        s.messages(c).await.unwrap(),
        vec![user_side.clone(), m3.clone(), later]
    );
    assert_eq!(s.turn_messages(c, turn).await.unwrap(), vec![user_side, m3]);
    assert_eq!(s.messages(ConversationId::new()).await.unwrap(), vec![]);
}

async fn appends_are_all_or_nothing(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    append(&s, &[message(c, None, 1)]).await.unwrap();
    // The second row repeats seq 1: the whole append is refused.
    let err = append(&s, &[message(c, None, 2), message(c, None, 1)]).await;
    assert!(err.is_err());
    assert_eq!(s.messages(c).await.unwrap().len(), 1);
    // Also across the chunks of a large append.
    let mut many: Vec<Message> = (10..2_600).map(|i| message(c, None, i)).collect();
    many.push(message(c, None, 1));
    assert!(append(&s, &many).await.is_err());
    assert_eq!(s.messages(c).await.unwrap().len(), 1);
}

async fn a_write_is_all_or_nothing(s: Arc<dyn Store>) {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    let c = conversation(a.id);
    let turn = first_turn(c.id);
    let now = Utc::now().trunc_subsecs(6);
    let key = agency_core::ApiKey {
        id: uuid::Uuid::now_v7(),
        agency_id: a.id,
        name: "app".into(),
        prefix: "agk_1234abcd".into(),
        hash: "hash".into(),
        rate_limit_per_minute: 60,
        created_at: now,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
        budgets: agency_core::KeyBudgets::default(),
    };
    s.create_api_key(&key).await.unwrap();
    let thread = ApiThread {
        key: key.id,
        hash: "h".into(),
        conversation: c.id,
        turn: 1,
    };
    let mut w = Write {
        conversation: Some(c.clone()),
        // The last message repeats a seq: everything else in the write is refused with it.
        messages: vec![message(c.id, None, 0), message(c.id, None, 0)],
        turns: vec![turn.clone()],
        thread: Some(thread.clone()),
    };
    assert!(s.write(w.clone()).await.is_err());
    assert_eq!(s.conversation(c.id).await.unwrap(), None);
    let h = ["h".to_string(), "other".to_string()];
    assert_eq!(s.api_threads(thread.key, &h).await.unwrap(), vec![]);
    w.messages.pop();
    let back = s.write(w).await.unwrap();
    assert_eq!(back.messages.len(), 1, "the write is handed back");
    assert_eq!(s.conversation(c.id).await.unwrap(), Some(c.clone()));
    assert_eq!(s.turns(c.id).await.unwrap(), vec![turn]);
    assert_eq!(s.messages(c.id).await.unwrap().len(), 1);
    assert_eq!(
        s.api_threads(thread.key, &h).await.unwrap(),
        vec![agency_store::ThreadMatch {
            hash: "h".into(),
            conversation: c.id,
            turn: 1,
            last_turn: 1,
        }]
    );
}

/// Writes made together may share a transaction; each still stands or falls alone.
async fn concurrent_writes_succeed_or_fail_alone(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    append(&s, &[message(c, None, 0)]).await.unwrap();
    let tasks: Vec<_> = (1..=64)
        .map(|i| {
            let s = s.clone();
            // Every fourth write repeats seq 0 and must fail; the others add seq i.
            let seq = if i % 4 == 0 { 0 } else { i };
            tokio::spawn(async move { (seq, append(&s, &[message(c, None, seq)]).await) })
        })
        .collect();
    let mut stored = vec![0];
    for t in tasks {
        let (seq, result) = t.await.unwrap();
        if seq == 0 {
            assert!(result.is_err(), "a duplicate seq was accepted");
        } else {
            result.unwrap();
            stored.push(seq);
        }
    }
    stored.sort();
    let seqs: Vec<i64> = s.messages(c).await.unwrap().iter().map(|m| m.seq).collect();
    assert_eq!(seqs, stored);
    assert_eq!(seqs.len(), 49);
}

async fn large_appends(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    let many: Vec<Message> = (0..2_500).map(|i| message(c, None, i)).collect();
    append(&s, &many).await.unwrap();
    assert_eq!(s.messages(c).await.unwrap(), many);
}

async fn messages_through_a_turn_are_what_a_fork_copies(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    let one = first_turn(c);
    let two = TurnRecord {
        id: TurnId::new(),
        number: 2,
        ..first_turn(c)
    };
    save_turn(&s, &one).await;
    save_turn(&s, &two).await;
    let messages = vec![
        message(c, None, 0),
        message(c, Some(one.id), 1),
        message(c, Some(two.id), 2),
        message(c, None, 3),
        // A turn without a record (a crash cut it short) is not one a fork can end at.
        message(c, Some(TurnId::new()), 4),
    ];
    append(&s, &messages).await.unwrap();
    let seqs = |n: u32| {
        let s = s.clone();
        async move {
            s.messages_through(c, n)
                .await
                .unwrap()
                .iter()
                .map(|m| m.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(seqs(0).await, [0, 3]);
    assert_eq!(seqs(1).await, [0, 1, 3]);
    assert_eq!(seqs(2).await, [0, 1, 2, 3]);
}

async fn turns_are_recorded_and_updated(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    assert_eq!(s.last_turn(c).await.unwrap(), None);
    let mut t = first_turn(c);
    save_turn(&s, &t).await;
    assert_eq!(s.turns(c).await.unwrap(), vec![t.clone()]);
    t.finished_at = Some(t.started_at + Duration::from_millis(1500));
    t.stopped_by = Some(StopReason::MaxHops);
    t.hops = 16;
    t.usage = Usage {
        prompt_tokens: 100,
        completion_tokens: 20,
    };
    t.cost = Some(agency_core::Cost(4_500_000_000));
    t.error = Some("boom".into());
    save_turn(&s, &t).await;
    // A cost that is not known stays unknown.
    let t2 = TurnRecord {
        id: TurnId::new(),
        number: 2,
        cost: None,
        ..t.clone()
    };
    save_turn(&s, &t2).await;
    assert_eq!(s.last_turn(c).await.unwrap(), Some(t2.clone()));
    assert_eq!(s.turns(c).await.unwrap(), vec![t, t2]);
}

async fn settings_are_claimed_once(s: Arc<dyn Store>) {
    assert!(!s.is_claimed("demo").await.unwrap());
    assert!(s.claim_once("demo").await.unwrap());
    assert!(s.is_claimed("demo").await.unwrap());
    assert!(!s.claim_once("demo").await.unwrap());
    assert!(s.claim_once("other").await.unwrap());
}

#[tokio::test]
async fn bad_urls_are_clear_errors() {
    let e = agency_store::open("mysql://x").await.err().unwrap();
    assert!(e.to_string().contains("sqlite://PATH"), "{e}");
    let e = agency_store::open("sqlite:///nonexistent-dir/sub/agency.db")
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .starts_with("cannot open the database sqlite:///nonexistent-dir"),
        "{e}"
    );
    let e = agency_store::open("postgres://me:hunter2@127.0.0.1:1/db")
        .await
        .err()
        .unwrap();
    assert!(
        !e.to_string().contains("hunter2"),
        "the password is never shown: {e}"
    );
}

async fn sealed_provider_keys(s: Arc<dyn Store>) {
    let now = Utc::now().trunc_subsecs(6);
    let key = |owner: &str, provider: &str, byte: u8| agency_store::SealedKey {
        owner: owner.into(),
        provider: provider.into(),
        nonce: vec![byte; 24],
        sealed: vec![byte, 0, 255, byte],
        suffix: "wxyz".into(),
        created_at: now,
    };
    s.put_provider_key(&key("local", "openai", 1))
        .await
        .unwrap();
    s.put_provider_key(&key("local", "anthropic", 2))
        .await
        .unwrap();
    s.put_provider_key(&key("alice", "openai", 3))
        .await
        .unwrap();
    // Storing again replaces.
    s.put_provider_key(&key("local", "openai", 4))
        .await
        .unwrap();
    assert_eq!(
        s.provider_key("local", "openai").await.unwrap(),
        Some(key("local", "openai", 4))
    );
    let mine: Vec<String> = s
        .provider_keys("local")
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.provider)
        .collect();
    assert_eq!(mine, ["anthropic", "openai"]);
    assert_eq!(s.all_provider_keys().await.unwrap().len(), 3);
    let mut resealed = s.all_provider_keys().await.unwrap();
    for k in &mut resealed {
        k.sealed = vec![9, 9];
    }
    s.reseal_provider_keys(&resealed).await.unwrap();
    assert!(
        s.all_provider_keys()
            .await
            .unwrap()
            .iter()
            .all(|k| k.sealed == [9, 9])
    );
    assert!(s.delete_provider_key("local", "openai").await.unwrap());
    assert!(!s.delete_provider_key("local", "openai").await.unwrap());
    assert_eq!(s.provider_key("local", "openai").await.unwrap(), None);
    assert!(format!("{:?}", key("a", "b", 7)).contains("…wxyz"));
}

async fn api_keys_by_hash_name_and_state(s: Arc<dyn Store>) {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    let now = Utc::now().trunc_subsecs(6);
    let key = |name: &str, hash: &str| agency_core::ApiKey {
        id: uuid::Uuid::now_v7(),
        agency_id: a.id,
        name: name.into(),
        prefix: "agk_1234abcd".into(),
        hash: hash.into(),
        rate_limit_per_minute: 60,
        created_at: now,
        expires_at: Some(now + Duration::from_secs(3600)),
        last_used_at: None,
        revoked_at: None,
        budgets: agency_core::KeyBudgets::default(),
    };
    let dev = key("dev", "h1");
    s.create_api_key(&dev).await.unwrap();
    assert_eq!(s.api_key_by_hash("h1").await.unwrap(), Some(dev.clone()));
    assert_eq!(s.api_key_by_hash("nope").await.unwrap(), None);
    // One live key per name.
    match s.create_api_key(&key("dev", "h2")).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("`dev`"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(s.revoke_api_key(a.id, "dev", now).await.unwrap());
    assert!(
        !s.revoke_api_key(a.id, "dev", now).await.unwrap(),
        "already revoked"
    );
    let again = key("dev", "h3");
    s.create_api_key(&again).await.unwrap();
    let listed = s.api_keys(a.id).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].revoked_at, Some(now));
    assert_eq!(listed[0].state(now), agency_core::KeyState::Revoked);
    assert_eq!(listed[1].state(now), agency_core::KeyState::Active);
    // Threads: a transcript hash finds its conversation and turn, per key, several at once.
    let c = conversation(a.id);
    create(&s, &c).await;
    let other = conversation(a.id);
    create(&s, &other).await;
    let thread = |hash: &str, conversation: &Conversation, turn: u32| Write {
        thread: Some(ApiThread {
            key: again.id,
            hash: hash.into(),
            conversation: conversation.id,
            turn,
        }),
        ..Write::default()
    };
    let found = |key: uuid::Uuid, hashes: &[&str]| {
        let s = s.clone();
        let hashes: Vec<String> = hashes.iter().map(|h| h.to_string()).collect();
        async move {
            let mut m: Vec<(String, ConversationId, u32)> = s
                .api_threads(key, &hashes)
                .await
                .unwrap()
                .into_iter()
                .map(|m| (m.hash, m.conversation, m.turn))
                .collect();
            m.sort();
            m
        }
    };
    s.write(thread("t1", &c, 1)).await.unwrap();
    assert_eq!(
        found(again.id, &["t1", "t2"]).await,
        [("t1".into(), c.id, 1)]
    );
    assert_eq!(
        found(dev.id, &["t1"]).await,
        [],
        "another key's threads are not found"
    );
    assert_eq!(found(again.id, &[]).await, []);
    // A conversation keeps each turn's transcript; a hash names the latest to reach it.
    s.write(thread("t2", &c, 2)).await.unwrap();
    assert_eq!(
        found(again.id, &["t1", "t2"]).await,
        [("t1".into(), c.id, 1), ("t2".into(), c.id, 2)]
    );
    s.write(thread("t1", &other, 1)).await.unwrap();
    assert_eq!(found(again.id, &["t1"]).await, [("t1".into(), other.id, 1)]);
    // Last use only moves forward.
    let later = now + Duration::from_secs(5);
    s.touch_api_keys(&[(again.id, later), (again.id, now)])
        .await
        .unwrap();
    assert_eq!(
        s.api_key_by_hash("h3").await.unwrap().unwrap().last_used_at,
        Some(later)
    );
}

async fn memories_and_their_sources(s: Arc<dyn Store>) {
    use agency_core::memory::{Memory, MemoryId, MemoryKind};
    let a = agency("memo", "alice", false);
    s.save_agency(&a).await.unwrap();
    let agent = a.manager;
    let start = Utc::now().trunc_subsecs(6) - chrono::Duration::seconds(10);
    let memory = |kind, content: &str, secs: i64, sources: Vec<MemoryId>| Memory {
        id: MemoryId::new(),
        agency_id: a.id,
        agent,
        kind,
        content: content.into(),
        importance: 0.25,
        sources,
        origin: None,
        created_at: start + chrono::Duration::seconds(secs),
    };
    let first = memory(MemoryKind::Observation, "tank 3 hot", 1, vec![]);
    let second = memory(MemoryKind::Observation, "tank 3 hotter", 2, vec![]);
    let reflection = memory(
        MemoryKind::Reflection,
        "tank 3 is heating up",
        3,
        vec![second.id, first.id],
    );
    for m in [&first, &second, &reflection] {
        s.save_memory(m).await.unwrap();
    }
    assert_eq!(
        s.memory(reflection.id).await.unwrap(),
        Some(reflection.clone())
    );
    assert_eq!(s.memory(first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(s.memory(MemoryId::new()).await.unwrap(), None);
    // Newest first, after `since`, at most `limit`.
    let recent = s
        .memories_since(a.id, agent, start + chrono::Duration::seconds(1), 10)
        .await
        .unwrap();
    assert_eq!(recent, vec![reflection.clone(), second.clone()]);
    let one = s.memories_since(a.id, agent, start, 1).await.unwrap();
    assert_eq!(one, vec![reflection.clone()]);
    // A reflection whose source does not exist is refused whole.
    let orphan = memory(MemoryKind::Reflection, "x", 4, vec![MemoryId::new()]);
    assert!(s.save_memory(&orphan).await.is_err());
    assert_eq!(s.memory(orphan.id).await.unwrap(), None);

    // An observation a chat message led to keeps where it came from; the conversation lists
    // it, and no other memory.
    let c = conversation(a.id);
    create(&s, &c).await;
    let turn = TurnId::new();
    let from_chat = Memory {
        origin: Some(agency_core::memory::ChatOrigin {
            conversation: c.id,
            turn,
        }),
        ..memory(MemoryKind::Observation, "valve 9 leaks", 5, vec![])
    };
    s.save_memory(&from_chat).await.unwrap();
    assert_eq!(
        s.memory(from_chat.id).await.unwrap(),
        Some(from_chat.clone())
    );
    assert_eq!(
        s.memories_of_conversation(c.id).await.unwrap(),
        vec![from_chat]
    );
    assert_eq!(
        s.memories_of_conversation(ConversationId::new())
            .await
            .unwrap(),
        vec![]
    );
}

async fn plans_with_tasks_and_actions(s: Arc<dyn Store>) {
    use agency_core::memory::{Memory, MemoryId, MemoryKind};
    use agency_core::plan::{Action, Plan, PlanStatus, TaskDraft, TaskStatus};
    let a = agency("planner", "alice", false);
    s.save_agency(&a).await.unwrap();
    let agent = a.manager;
    let now = Utc::now().trunc_subsecs(6);
    let reflection = Memory {
        id: MemoryId::new(),
        agency_id: a.id,
        agent,
        kind: MemoryKind::Reflection,
        content: "pump 3 is failing".into(),
        importance: 1.0,
        sources: vec![],
        origin: None,
        created_at: now,
    };
    s.save_memory(&reflection).await.unwrap();
    let task = |d: &str, actions: &[(&str, &[&str])]| TaskDraft {
        description: d.into(),
        actions: actions
            .iter()
            .map(|(n, p)| Action {
                name: (*n).into(),
                parameters: p.iter().map(|x| (*x).to_string()).collect(),
            })
            .collect(),
    };
    let mut plan = Plan::new(
        a.id,
        agent,
        reflection.id,
        vec![
            task(
                "Inspect pump 3",
                &[("inspect", &["pump-3"]), ("report", &["pump-3", "manager"])],
            ),
            task("Order a spare", &[]),
        ],
        now,
    );
    assert_eq!(s.active_plan(a.id, agent).await.unwrap(), None);
    s.save_plan(&plan).await.unwrap();
    assert_eq!(
        s.active_plan(a.id, agent).await.unwrap(),
        Some(plan.clone())
    );

    // Adjusted in place: same id, open tasks cancelled, new ones added.
    plan.adjust(
        reflection.id,
        vec![task("Replace pump 3", &[("replace", &["pump-3"])])],
        now + chrono::Duration::seconds(1),
    );
    s.save_plan(&plan).await.unwrap();
    let stored = s.active_plan(a.id, agent).await.unwrap().unwrap();
    assert_eq!(stored, plan);
    assert_eq!(stored.status, PlanStatus::Updated);
    assert_eq!(
        stored.tasks.iter().map(|t| t.status).collect::<Vec<_>>(),
        [
            TaskStatus::Cancelled,
            TaskStatus::Cancelled,
            TaskStatus::Pending
        ]
    );

    // One active plan per agent; inactive ones may stay.
    let other = Plan::new(a.id, agent, reflection.id, vec![task("x", &[])], now);
    assert!(matches!(
        s.save_plan(&other).await,
        Err(agency_store::StoreError::Conflict(_))
    ));
    let mut old = other.clone();
    old.active = false;
    s.save_plan(&old).await.unwrap();
    assert_eq!(s.active_plan(a.id, agent).await.unwrap(), Some(plan));
    let programmer = a.agent_by_handle("programmer").unwrap().id;
    assert_eq!(s.active_plan(a.id, programmer).await.unwrap(), None);
}

async fn versions_are_numbered_and_kept(s: Arc<dyn Store>) {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    let before = s.agency_state(a.id).await.unwrap().unwrap();
    let at = Utc::now().trunc_subsecs(6);
    let v1 = s.publish(a.id, "name: one", at).await.unwrap();
    assert_eq!(v1.version, 1);
    let after = s.agency_state(a.id).await.unwrap().unwrap();
    assert_eq!(after.published, Some(1));
    assert_ne!(
        after.revision, before.revision,
        "a cached copy sees the publication"
    );

    // Concurrent publications each get their own number.
    let numbers = futures::future::join_all((0..8).map(|i| {
        let s = s.clone();
        async move {
            s.publish(a.id, &format!("name: v{i}"), Utc::now())
                .await
                .unwrap()
                .version
        }
    }))
    .await;
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (2..=9).collect::<Vec<u32>>());

    assert_eq!(
        s.agency_state(a.id).await.unwrap().unwrap().published,
        Some(9)
    );
    let (p, body) = s.version(a.id, 1).await.unwrap().unwrap();
    assert_eq!(
        (p.version, p.published_at, body.as_str()),
        (1, at, "name: one")
    );
    assert_eq!(s.version(a.id, 10).await.unwrap(), None);
    let listed: Vec<u32> = s
        .versions(a.id)
        .await
        .unwrap()
        .iter()
        .map(|p| p.version)
        .collect();
    assert_eq!(listed, (1..=9).rev().collect::<Vec<u32>>(), "newest first");

    // Saving the draft leaves the versions alone.
    s.save_agency(&a).await.unwrap();
    assert_eq!(
        s.agency_state(a.id).await.unwrap().unwrap().published,
        Some(9)
    );
    assert!(matches!(
        s.publish(AgencyId::new(), "x", Utc::now()).await,
        Err(StoreError::Conflict(_))
    ));
}

async fn deleting_an_agency_takes_everything_of_it(s: Arc<dyn Store>) {
    let a = agency("studio", "local", false);
    s.save_agency(&a).await.unwrap();
    s.publish(a.id, "name: studio", Utc::now()).await.unwrap();
    let c = conversation(a.id);
    create(&s, &c).await;
    assert!(s.delete_agency(a.id).await.unwrap());
    assert_eq!(s.agency(a.id).await.unwrap(), None);
    assert_eq!(s.conversation(c.id).await.unwrap(), None);
    assert_eq!(s.versions(a.id).await.unwrap(), vec![]);
    assert!(!s.delete_agency(a.id).await.unwrap());
}

async fn accounts_and_sessions(s: Arc<dyn Store>) {
    use agency_core::{Email, LoginSession, PasswordHash, User, UserId};
    let user = User {
        id: UserId::new(),
        email: Email::parse("ada@example.com").unwrap(),
        password_hash: PasswordHash("$argon2id$first".into()),
        created_at: Utc::now().trunc_subsecs(6),
    };
    s.create_user(&user).await.unwrap();
    assert_eq!(s.user(user.id).await.unwrap(), Some(user.clone()));
    assert_eq!(
        s.user_by_email(&user.email).await.unwrap(),
        Some(user.clone())
    );
    let twin = User {
        id: UserId::new(),
        ..user.clone()
    };
    match s.create_user(&twin).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("ada@example.com"), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(s.user(twin.id).await.unwrap(), None);

    let now = Utc::now().trunc_subsecs(6);
    let session = |hash: &str, expires_in: i64| LoginSession {
        token_hash: hash.into(),
        user: user.id,
        created_at: now,
        expires_at: now + chrono::Duration::seconds(expires_in),
    };
    s.create_session(&session("live", 60)).await.unwrap();
    s.create_session(&session("other", 60)).await.unwrap();
    s.create_session(&session("expired", -1)).await.unwrap();
    assert_eq!(
        s.session_user("live", now).await.unwrap(),
        Some(user.clone())
    );
    assert_eq!(s.session_user("expired", now).await.unwrap(), None);
    assert_eq!(s.session_user("unknown", now).await.unwrap(), None);

    let new_hash = PasswordHash("$argon2id$second".into());
    s.set_password(user.id, &new_hash).await.unwrap();
    assert_eq!(
        s.user(user.id).await.unwrap().unwrap().password_hash,
        new_hash
    );
    s.delete_other_sessions(user.id, "live").await.unwrap();
    assert_eq!(s.session_user("other", now).await.unwrap(), None);
    assert!(s.session_user("live", now).await.unwrap().is_some());
    s.delete_session("live").await.unwrap();
    assert_eq!(s.session_user("live", now).await.unwrap(), None);
}

async fn rooms_participants_and_messages(s: Arc<dyn Store>) {
    use agency_core::room::{Author, Bot, Participant, RoomMessage, Speaker};
    use agency_core::{RoomId, RoomMessageId};
    let (room, ann, bob) = room_of_two(&*s).await;
    let agent = |name: &str, position: i64| participant(room.id, name, position);
    assert_eq!(s.room(room.id).await.unwrap(), Some(room.clone()));
    assert_eq!(s.rooms("ada").await.unwrap(), vec![room.clone()]);
    assert_eq!(s.rooms("bob").await.unwrap(), vec![]);
    assert_eq!(
        s.participants(room.id).await.unwrap(),
        vec![ann.clone(), bob.clone()]
    );

    // Names are unique in a room without regard to case; updates keep the id.
    match s.put_participant(&agent("ANN", 2)).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("ANN"), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let disabled = Participant {
        enabled: false,
        ..bob.clone()
    };
    s.put_participant(&disabled).await.unwrap();
    assert_eq!(s.participants(room.id).await.unwrap()[1], disabled);
    // A bot keeps its endpoint and whom it emulates.
    let bot = Participant {
        speaker: Speaker::Bot(Bot {
            endpoint: "https://bots.example.com/ferm".into(),
            emulates: Some("Fermin Ortega".into()),
        }),
        ..agent("ferm", 2)
    };
    s.put_participant(&bot).await.unwrap();
    assert_eq!(s.participants(room.id).await.unwrap()[2], bot);

    let message = |author: Author, text: &str| RoomMessage {
        id: RoomMessageId::new(),
        room: room.id,
        seq: 0,
        author,
        text: text.into(),
        included: true,
        reply_to: None,
        tagged: Vec::new(),
        created_at: Utc::now().trunc_subsecs(6),
    };
    let first = s
        .add_room_message(message(Author::Person, "hello"))
        .await
        .unwrap();
    assert_eq!(first.seq, 1);
    // Parallel answers each get their own place.
    let answers = futures::future::join_all((0..6).map(|i| {
        let s = s.clone();
        let m = message(
            Author::Agent {
                id: ann.id,
                name: "ann".into(),
            },
            &format!("answer {i}"),
        );
        async move { s.add_room_message(m).await.unwrap().seq }
    }))
    .await;
    let mut seqs = answers.clone();
    seqs.sort_unstable();
    assert_eq!(seqs, (2..=7).collect::<Vec<i64>>());
    let failed = s
        .add_room_message(message(
            Author::Error {
                id: bob.id,
                name: "bob".into(),
            },
            "timed out",
        ))
        .await
        .unwrap();
    // Replies and tags are kept; so is the utility bot's word.
    let tagging = s
        .add_room_message(RoomMessage {
            reply_to: Some(failed.id),
            tagged: vec![bot.id, ann.id],
            ..message(Author::Person, "@ferm @ann again?")
        })
        .await
        .unwrap();
    let utility = s
        .add_room_message(RoomMessage {
            included: false,
            ..message(Author::Utility, "registered @ferm")
        })
        .await
        .unwrap();
    assert!(s.set_included(room.id, first.id, false).await.unwrap());
    assert!(
        !s.set_included(RoomId::new(), first.id, false)
            .await
            .unwrap()
    );

    // A removed agent's messages stay, with its name.
    assert!(s.delete_participant(room.id, bob.id).await.unwrap());
    let stored = s.room_messages(room.id).await.unwrap();
    assert_eq!(stored.len(), 10);
    assert_eq!(
        stored[0],
        RoomMessage {
            included: false,
            ..first
        }
    );
    assert_eq!(stored[7], failed);
    assert_eq!(stored[8], tagging);
    assert_eq!(stored[9], utility);
    assert!(stored.windows(2).all(|w| w[0].seq < w[1].seq));

    assert!(s.delete_room(room.id).await.unwrap());
    assert_eq!(s.room(room.id).await.unwrap(), None);
    assert_eq!(s.room_messages(room.id).await.unwrap(), vec![]);
}

async fn definitions_are_pointed_to_and_outlived(s: Arc<dyn Store>) {
    use agency_core::room::{Definition, DefinitionKind, Participant, Room, Speaker};
    use agency_core::{DefinitionId, ModelRef, ParticipantId, RoomId};
    let def = |kind, name: &str, text: &str| Definition {
        id: DefinitionId::new(),
        owner: "ada".into(),
        kind,
        name: name.into(),
        text: text.into(),
        created_at: Utc::now().trunc_subsecs(6),
    };
    let critic = def(DefinitionKind::Role, "critic", "finds the flaws");
    let dry = def(DefinitionKind::Personality, "dry", "dry humour");
    s.put_definition(&critic).await.unwrap();
    s.put_definition(&dry).await.unwrap();
    // A name is unique per owner and kind, without regard to case.
    match s
        .put_definition(&def(DefinitionKind::Role, "Critic", "x"))
        .await
    {
        Err(StoreError::Conflict(m)) => assert!(m.contains("role named `Critic`"), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    s.put_definition(&def(DefinitionKind::Personality, "critic", "a mood"))
        .await
        .unwrap();
    s.put_definition(&Definition {
        owner: "bob".into(),
        ..def(DefinitionKind::Role, "critic", "bob's")
    })
    .await
    .unwrap();
    let mine = s.definitions("ada").await.unwrap();
    let names: Vec<(&str, &str)> = mine
        .iter()
        .map(|d| (d.kind.as_str(), d.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("personality", "critic"),
            ("personality", "dry"),
            ("role", "critic")
        ]
    );
    assert_eq!(s.definition(critic.id).await.unwrap(), Some(critic.clone()));

    let room = Room {
        id: RoomId::new(),
        owner: "ada".into(),
        name: "r".into(),
        agency: None,
        created_at: Utc::now().trunc_subsecs(6),
    };
    let pointing = Participant {
        id: ParticipantId::new(),
        room: room.id,
        name: "ann".into(),
        speaker: Speaker::Model(ModelRef::parse("builtin/rules").unwrap()),
        role: Some("ignored: the definition's text wins".into()),
        role_id: Some(critic.id),
        personality: None,
        personality_id: Some(dry.id),
        instructions: None,
        tools: Default::default(),
        enabled: true,
        position: 0,
        colour: "#2563eb".into(),
    };
    s.create_room(&room, std::slice::from_ref(&pointing))
        .await
        .unwrap();
    let read = s.participants(room.id).await.unwrap().remove(0);
    assert_eq!(read.role.as_deref(), Some("finds the flaws"));
    assert_eq!(read.personality.as_deref(), Some("dry humour"));
    assert_eq!(
        (read.role_id, read.personality_id),
        (Some(critic.id), Some(dry.id))
    );

    // Edited, the definition is what its agents read.
    let sharper = Definition {
        text: "finds every flaw".into(),
        ..critic.clone()
    };
    s.put_definition(&sharper).await.unwrap();
    let read = s.participants(room.id).await.unwrap().remove(0);
    assert_eq!(read.role.as_deref(), Some("finds every flaw"));

    // Deleted, its agents keep its text as their own.
    assert!(s.delete_definition(critic.id).await.unwrap());
    assert!(!s.delete_definition(critic.id).await.unwrap());
    assert_eq!(s.definition(critic.id).await.unwrap(), None);
    let read = s.participants(room.id).await.unwrap().remove(0);
    assert_eq!(read.role.as_deref(), Some("finds every flaw"));
    assert_eq!(read.role_id, None);
    assert_eq!(read.personality_id, Some(dry.id), "the other stays");
}

/// Who is answering is recorded before the calls and cleared with each answer, in the same
/// transaction: what is left is what a crash interrupted.
async fn answers_in_flight_are_recorded_until_stored(s: Arc<dyn Store>) {
    use agency_core::RoomMessageId;
    use agency_core::room::{Author, RoomMessage};
    let (room, ann, bob) = room_of_two(&*s).await;
    let message = |author: Author| RoomMessage {
        id: RoomMessageId::new(),
        room: room.id,
        seq: 0,
        author,
        text: "hello".into(),
        included: true,
        reply_to: None,
        tagged: Vec::new(),
        created_at: Utc::now().trunc_subsecs(6),
    };
    let asked = s.add_room_message(message(Author::Person)).await.unwrap();
    // A process that answers, and one that looks for what others left.
    let (gone, me) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let now = Utc::now().trunc_subsecs(6);
    let left = |s: Arc<dyn Store>| async move {
        let mut open = s.interrupted_answers(me, now).await.unwrap();
        open.sort_by_key(|(_, _, p)| (*p == bob.id, p.0));
        open
    };
    s.start_answers(room.id, asked.id, &[ann.id, bob.id], gone)
        .await
        .unwrap();
    // Recording twice is harmless (a retry of the same agent for the same message).
    s.start_answers(room.id, asked.id, &[ann.id], gone)
        .await
        .unwrap();
    assert_eq!(
        left(s.clone()).await,
        vec![(room.id, asked.id, ann.id), (room.id, asked.id, bob.id)]
    );
    // A process's own answers, and those of a process seen alive since, are not left.
    assert_eq!(s.interrupted_answers(gone, now).await.unwrap(), vec![]);
    s.alive(gone, now + chrono::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(left(s.clone()).await, vec![]);
    s.alive(gone, now - chrono::Duration::seconds(60))
        .await
        .unwrap();
    assert_eq!(left(s.clone()).await.len(), 2);
    let answer = s
        .add_room_answer(
            message(Author::Agent {
                id: ann.id,
                name: "ann".into(),
            }),
            asked.id,
        )
        .await
        .unwrap();
    assert_eq!(answer.seq, 2);
    assert_eq!(left(s.clone()).await, vec![(room.id, asked.id, bob.id)]);
    // A removed agent, or room, leaves nothing to recover.
    assert!(s.delete_participant(room.id, bob.id).await.unwrap());
    assert_eq!(left(s.clone()).await, vec![]);
    s.start_answers(room.id, asked.id, &[ann.id], gone)
        .await
        .unwrap();
    assert!(s.delete_room(room.id).await.unwrap());
    assert_eq!(left(s.clone()).await, vec![]);
}

/// A new room with two agents, `ann` and `bob`, stored.
async fn room_of_two(
    s: &dyn Store,
) -> (
    agency_core::room::Room,
    agency_core::room::Participant,
    agency_core::room::Participant,
) {
    let room = new_room();
    let (ann, bob) = (
        participant(room.id, "ann", 0),
        participant(room.id, "bob", 1),
    );
    s.create_room(&room, &[ann.clone(), bob.clone()])
        .await
        .unwrap();
    (room, ann, bob)
}

fn new_room() -> agency_core::room::Room {
    agency_core::room::Room {
        id: agency_core::RoomId::new(),
        owner: "ada".into(),
        name: "ideas".into(),
        agency: None,
        created_at: Utc::now().trunc_subsecs(6),
    }
}

fn participant(
    room: agency_core::RoomId,
    name: &str,
    position: i64,
) -> agency_core::room::Participant {
    agency_core::room::Participant {
        id: agency_core::ParticipantId::new(),
        room,
        name: name.into(),
        speaker: agency_core::room::Speaker::Model(
            agency_core::ModelRef::parse("builtin/rules").unwrap(),
        ),
        role: Some("thinks".into()),
        role_id: None,
        personality: None,
        personality_id: None,
        instructions: Some("be brief".into()),
        tools: agency_core::ToolGrants(vec!["builtin/now".into(), "files/*".into()]),
        enabled: true,
        position,
        colour: "#2563eb".into(),
    }
}

async fn api_responses_are_kept_per_agency(s: Arc<dyn Store>) {
    let c = setup(&s).await;
    let agency = s.conversation(c).await.unwrap().unwrap().agency_id;
    let other = agency_core::AgencyId::new();
    let r = agency_store::ApiResponse {
        id: "resp_1".into(),
        agency,
        conversation: c,
        turn: 3,
        created_at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        body: r#"{"id":"resp_1"}"#.into(),
        input: "[]".into(),
    };
    s.put_api_response(&r).await.unwrap();
    assert!(s.put_api_response(&r).await.is_err(), "ids are unique");
    assert_eq!(
        s.api_response(agency, "resp_1").await.unwrap(),
        Some(r.clone())
    );
    assert_eq!(
        s.api_response(other, "resp_1").await.unwrap(),
        None,
        "another agency's"
    );
    assert!(!s.delete_api_response(other, "resp_1").await.unwrap());
    assert!(s.delete_api_response(agency, "resp_1").await.unwrap());
    assert_eq!(s.api_response(agency, "resp_1").await.unwrap(), None);
    assert!(!s.delete_api_response(agency, "resp_1").await.unwrap());
}

async fn a_migrated_store_is_ready(s: Arc<dyn Store>) {
    s.ready().await.unwrap();
}

#[tokio::test]
async fn a_schema_this_program_does_not_know_is_not_ready() {
    let (s, dir) = sqlite().await;
    s.ready().await.unwrap();
    // Another program, newer, migrated the file further.
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    conn.execute_batch(&format!("PRAGMA user_version = {}", version + 1))
        .unwrap();
    let e = s.ready().await.unwrap_err();
    assert!(
        e.to_string().contains("newer than this program knows"),
        "{e}"
    );
}

async fn a2a_tasks_are_kept_per_agency_and_end_once(s: Arc<dyn Store>) {
    use agency_store::{StoredTask, TaskFilter};
    let c = setup(&s).await;
    let agency = s.conversation(c).await.unwrap().unwrap().agency_id;
    let other = agency_core::AgencyId::new();
    let at = |secs| chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap();
    let task = |n: i64, conversation| StoredTask {
        id: uuid::Uuid::now_v7(),
        agency,
        conversation,
        state: "working".into(),
        ended: false,
        turn: None,
        message_id: format!("m{n}"),
        request: format!("request {n}"),
        answer: String::new(),
        note: String::new(),
        created_at: at(n),
        updated_at: at(n),
    };
    // A task's conversation may not be written yet (a new one is, with its first turn).
    let elsewhere = ConversationId::new();
    let (first, second, third) = (task(1, c), task(2, c), task(3, elsewhere));
    for t in [&first, &second, &third] {
        s.put_task(t).await.unwrap();
    }
    assert!(s.put_task(&first).await.is_err(), "ids are unique");
    assert_eq!(s.task(agency, first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(
        s.task(other, first.id).await.unwrap(),
        None,
        "another agency's"
    );

    let mut done = first.clone();
    done.state = "completed".into();
    done.ended = true;
    done.turn = Some(1);
    done.answer = "the answer".into();
    done.updated_at = at(10);
    assert!(s.update_task(&done).await.unwrap());
    assert_eq!(s.task(agency, first.id).await.unwrap(), Some(done.clone()));
    let mut again = done.clone();
    again.state = "canceled".into();
    assert!(
        !s.update_task(&again).await.unwrap(),
        "an ended task is not changed"
    );
    assert_eq!(s.task(agency, first.id).await.unwrap(), Some(done.clone()));

    let page = |conversation, state: Option<&str>, offset, limit| TaskFilter {
        conversation,
        state: state.map(str::to_string),
        offset,
        limit,
    };
    let ids =
        |found: (Vec<StoredTask>, u64)| (found.0.iter().map(|t| t.id).collect::<Vec<_>>(), found.1);
    assert_eq!(
        ids(s.tasks(agency, &page(None, None, 0, 10)).await.unwrap()),
        (vec![third.id, second.id, first.id], 3),
        "newest first"
    );
    assert_eq!(
        ids(s.tasks(agency, &page(Some(c), None, 1, 1)).await.unwrap()),
        (vec![first.id], 2)
    );
    assert_eq!(
        ids(s
            .tasks(agency, &page(Some(c), Some("working"), 0, 10))
            .await
            .unwrap()),
        (vec![second.id], 1)
    );
    assert_eq!(
        ids(s.tasks(other, &page(None, None, 0, 10)).await.unwrap()),
        (vec![], 0)
    );
}

fn line(scope: &str, limit: i64) -> agency_store::SpendLine {
    agency_store::SpendLine {
        scope: scope.into(),
        period_start: 1_700_000_000,
        limit,
    }
}

async fn spend_is_reserved_all_or_nothing_and_settled(s: Arc<dyn Store>) {
    let scope = format!("key:{}", uuid::Uuid::now_v7());
    let user = format!("user:{scope}:ann");
    let lines = [line(&scope, 100), line(&user, 30)];
    assert_eq!(s.reserve(&lines, 20).await.unwrap(), None);
    assert_eq!(
        s.reserve(&lines, 20).await.unwrap(),
        None,
        "20 < 30: one more"
    );
    // The end user's line holds 40 of 30: refused, and the key's line is left as it was.
    assert_eq!(s.reserve(&lines, 20).await.unwrap(), Some(1));
    assert_eq!(s.spent(&scope, 1_700_000_000).await.unwrap().reserved, 40);
    // Settled below what was reserved.
    assert_eq!(s.settle(&lines, 20, 7, 12).await.unwrap(), [7, 7]);
    let row = s.spent(&user, 1_700_000_000).await.unwrap();
    assert_eq!((row.spent, row.reserved, row.tokens), (7, 20, 12));
    assert_eq!(s.settle(&lines, 20, 0, 0).await.unwrap(), [7, 7]);
    // Another period starts from nothing.
    let next = agency_store::SpendLine {
        period_start: 1_800_000_000,
        ..line(&scope, 100)
    };
    assert_eq!(s.spent(&scope, 1_800_000_000).await.unwrap().spent, 0);
    assert_eq!(
        s.reserve(std::slice::from_ref(&next), 5).await.unwrap(),
        None
    );
    let rows = s.spend(&scope, 10).await.unwrap();
    let periods: Vec<i64> = rows
        .iter()
        .filter(|r| r.scope == scope)
        .map(|r| r.period_start)
        .collect();
    assert_eq!(periods, [1_800_000_000, 1_700_000_000], "newest first");
    assert_eq!(
        s.spend(&format!("user:{scope}:"), 10).await.unwrap().len(),
        1
    );

    // Many at once on one line: reservations stop once it is reached.
    let race = format!("key:{}", uuid::Uuid::now_v7());
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (s, l) = (s.clone(), line(&race, 100));
            tokio::spawn(async move { s.reserve(&[l], 30).await.unwrap() })
        })
        .collect();
    let mut taken = 0;
    for t in tasks {
        if t.await.unwrap().is_none() {
            taken += 1;
        }
    }
    assert_eq!(taken, 4, "0, 30, 60, 90 were under 100");
}

async fn budgets_of_keys_and_agencies_round_trip(s: Arc<dyn Store>) {
    let mut a = agency("budgeted", "local", false);
    a.limits.budget = Some(agency_core::Budget {
        usd: 20_000_000,
        period: agency_core::Period::Week,
    });
    a.limits.max_turn_cost = Some(agency_core::Cost(250_000_000_000));
    s.save_agency(&a).await.unwrap();
    let back = s.agency(a.id).await.unwrap().unwrap();
    assert_eq!(back.limits, a.limits);
    let now = Utc::now().trunc_subsecs(6);
    let key = agency_core::ApiKey {
        id: uuid::Uuid::now_v7(),
        agency_id: a.id,
        name: "app".into(),
        prefix: "agk_1234abcd".into(),
        hash: format!("hash-{}", a.id.0),
        rate_limit_per_minute: 60,
        created_at: now,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
        budgets: agency_core::KeyBudgets {
            usd: Some(10_000),
            user_usd: None,
            period: agency_core::Period::Day,
        },
    };
    s.create_api_key(&key).await.unwrap();
    assert_eq!(
        s.api_key_by_hash(&key.hash).await.unwrap(),
        Some(key.clone())
    );
    let raised = agency_core::KeyBudgets {
        usd: Some(1_000_000),
        user_usd: Some(5),
        period: agency_core::Period::Total,
    };
    assert!(s.set_api_key_budgets(a.id, "app", &raised).await.unwrap());
    assert!(!s.set_api_key_budgets(a.id, "nope", &raised).await.unwrap());
    let back = s.api_key_by_hash(&key.hash).await.unwrap().unwrap();
    assert_eq!(back.budgets, raised);
}

/// System prompts are kept once per agency (`prompts`), not in each message: every read gives
/// each message its own text back, whichever write brought it, in any agency, and deleting one
/// agency leaves another's prompts whole.
async fn system_prompts_read_back_wherever_they_are_kept(s: Arc<dyn Store>) {
    let long = format!(
        "You are the manager. {}",
        "Be brief and concrete. ".repeat(300)
    );
    let system = |c: ConversationId, turn: Option<TurnId>, seq: i64, text: &str| Message {
        kind: MessageKind::System,
        text: text.to_string(),
        tool: None,
        images: Vec::new(),
        ..message(c, turn, seq)
    };
    let (a, b) = (
        agency("studio", "local", false),
        agency("studio", "other", false),
    );
    s.save_agency(&a).await.unwrap();
    s.save_agency(&b).await.unwrap();
    // Written with its conversation, in one write.
    let first = conversation(a.id);
    let turn = TurnId::new();
    let prompts = vec![
        system(first.id, None, 0, &long),
        system(first.id, None, 1, "short"),
    ];
    s.write(Write {
        conversation: Some(first.clone()),
        messages: prompts.clone(),
        ..Write::default()
    })
    .await
    .unwrap();
    // The same text again, in a write of its own (an agent added since), then a delivery.
    let again = system(first.id, Some(turn), 2, &long);
    let after = message(first.id, Some(turn), 3);
    append(&s, &[again.clone(), after.clone()]).await.unwrap();
    // The same text in another's agency.
    let theirs = conversation(b.id);
    create(&s, &theirs).await;
    let their_prompt = system(theirs.id, None, 0, &long);
    append(&s, std::slice::from_ref(&their_prompt))
        .await
        .unwrap();

    let all = [prompts.clone(), vec![again.clone(), after.clone()]].concat();
    assert_eq!(s.messages(first.id).await.unwrap(), all);
    assert_eq!(
        s.turn_messages(first.id, turn).await.unwrap(),
        vec![again.clone(), after]
    );
    assert_eq!(
        s.messages_by_id(first.id, &[again.id, prompts[0].id])
            .await
            .unwrap(),
        vec![prompts[0].clone(), again]
    );
    assert!(s.delete_agency(a.id).await.unwrap());
    assert_eq!(s.messages(theirs.id).await.unwrap(), vec![their_prompt]);
}

async fn approvals_are_answered_once_and_started_once(s: Arc<dyn Store>) {
    use agency_core::approval::Answer;
    use agency_core::{Approval, ApprovalId, ApprovalState, OnTimeout};
    let c = setup(&s).await;
    let agency = s.conversation(c).await.unwrap().unwrap().agency_id;
    let at = |secs| chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap();
    let turn = TurnId::new();
    let approval = |n: i64| Approval {
        id: ApprovalId::new(),
        agency,
        conversation: c,
        turn,
        agent: agency_core::AgentId::new(4522).unwrap(),
        reply: agency_core::MessageId::new(),
        call: agency_core::ToolCall {
            id: format!("call_{n}"),
            name: "files/write".into(),
            arguments: format!("{{\"n\":{n}}}"),
        },
        asked_at: at(n),
        expires_at: at(n + 300),
        on_timeout: OnTimeout::Approve,
        edits: true,
        state: ApprovalState::Pending,
        answered_by: None,
        answered_at: None,
        reason: None,
        started_at: None,
        result: None,
    };
    let (a, b) = (approval(1), approval(2));
    s.put_approval(&a).await.unwrap();
    s.put_approval(&b).await.unwrap();
    assert!(s.put_approval(&a).await.is_err(), "ids are unique");
    assert_eq!(s.approval(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        s.pending_approvals("local").await.unwrap(),
        [a.clone(), b.clone()]
    );
    assert!(
        s.pending_approvals("someone else")
            .await
            .unwrap()
            .is_empty()
    );

    // Not approved yet: it cannot start.
    assert!(!s.start_approved(a.id, at(5)).await.unwrap());
    let yes = Answer {
        approve: true,
        reason: None,
        arguments: Some("{\"n\":10}".into()),
        by: "ana@example.com".into(),
    };
    let no = Answer {
        approve: false,
        reason: Some("not now".into()),
        arguments: None,
        by: "bo@example.com".into(),
    };
    assert!(s.answer_approval(a.id, &yes, at(6)).await.unwrap());
    assert!(
        !s.answer_approval(a.id, &no, at(7)).await.unwrap(),
        "the first answer wins"
    );
    assert!(s.answer_approval(b.id, &no, at(8)).await.unwrap());
    assert!(
        !s.answer_approval(ApprovalId::new(), &no, at(8))
            .await
            .unwrap()
    );
    let got = s.approval(a.id).await.unwrap().unwrap();
    assert_eq!(got.state, ApprovalState::Approved);
    assert_eq!(
        got.call.arguments, "{\"n\":10}",
        "edited arguments are kept"
    );
    assert_eq!(got.answered_by.as_deref(), Some("ana@example.com"));
    assert_eq!(got.answered_at, Some(at(6)));
    assert!(s.pending_approvals("local").await.unwrap().is_empty());
    let denied = s.approval(b.id).await.unwrap().unwrap();
    assert_eq!(denied.state, ApprovalState::Denied);
    assert_eq!(denied.reason.as_deref(), Some("not now"));
    assert_eq!(denied.call.arguments, "{\"n\":2}");
    assert!(
        !s.start_approved(b.id, at(9)).await.unwrap(),
        "a denied call never starts"
    );

    assert!(s.start_approved(a.id, at(9)).await.unwrap());
    assert!(
        !s.start_approved(a.id, at(10)).await.unwrap(),
        "it starts once"
    );
    s.finish_approved(a.id, "written", false).await.unwrap();
    s.finish_approved(a.id, "again", true).await.unwrap();
    let done = s.approval(a.id).await.unwrap().unwrap();
    assert_eq!(done.started_at, Some(at(9)));
    assert_eq!(done.result, Some(("written".to_string(), false)));
    let of_turn = s.turn_approvals(turn).await.unwrap();
    assert_eq!(
        of_turn.iter().map(|x| x.id).collect::<Vec<_>>(),
        [a.id, b.id]
    );

    // The agency's webhook: set, replaced, removed; gone with its agency.
    assert_eq!(s.approval_webhook(agency).await.unwrap(), None);
    let hook = |url: &str, secs| agency_core::ApprovalWebhook {
        agency,
        id: uuid::Uuid::now_v7(),
        url: url.into(),
        created_at: at(secs),
    };
    let first = hook("https://hooks.example.com/a", 20);
    s.put_approval_webhook(&first).await.unwrap();
    assert_eq!(s.approval_webhook(agency).await.unwrap(), Some(first));
    let second = hook("https://hooks.example.com/b", 30);
    s.put_approval_webhook(&second).await.unwrap();
    assert_eq!(
        s.approval_webhook(agency).await.unwrap(),
        Some(second.clone())
    );
    assert!(s.delete_approval_webhook(agency).await.unwrap());
    assert!(!s.delete_approval_webhook(agency).await.unwrap());
    s.put_approval_webhook(&second).await.unwrap();
    assert!(s.delete_agency(agency).await.unwrap());
    assert_eq!(s.approval_webhook(agency).await.unwrap(), None);
}
