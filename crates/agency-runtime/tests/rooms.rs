//! Roundtable rooms on the runtime: parallel answers, mentions, what each agent is sent,
//! failures that hold no one up, and agents disabled and enabled again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;

use agency_core::Role;
use agency_core::room::{self, Author, MAX_MESSAGE_CHARS, RoomMessage};
use agency_runtime::RuntimeError;
use agency_runtime::rooms::{NewParticipant, RoomChange};
use common::{Act, Harness};

const OWNER: &str = "ada";

fn agent(name: &str) -> NewParticipant {
    NewParticipant {
        name: name.into(),
        model: format!("script/{name}"),
        role: Some(format!("the {name}")),
        ..NewParticipant::default()
    }
}

/// `(role, text)` of a context the model was sent, without the system prompt.
fn sent(chat: &[(Role, String)]) -> Vec<(String, String)> {
    chat.iter()
        .filter(|(role, _)| *role != Role::System)
        .map(|(role, text)| (role.as_str().to_string(), text.clone()))
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn enabled_agents_answer_in_parallel_and_see_what_is_included() {
    let h = Harness::sqlite().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let scripts: Vec<_> = ["ann", "bob", "cy"]
        .iter()
        .map(|n| {
            h.script(
                n,
                vec![
                    Act::Together(barrier.clone(), "first"),
                    Act::SayOwned(format!("{n} again")),
                ],
            )
        })
        .collect();
    let (room, _) = h.rt.rooms().create(OWNER, "ideas", None).await.unwrap();
    let mut ids = Vec::new();
    for n in ["ann", "bob", "cy"] {
        ids.push(
            h.rt.rooms()
                .add_participant(OWNER, room.id, agent(n))
                .await
                .unwrap()
                .id,
        );
    }

    // The three calls meet at the barrier: they run at the same time.
    let posted =
        h.rt.rooms()
            .post(OWNER, room.id, "hello", None)
            .await
            .unwrap();
    assert_eq!(posted.answering, ids);
    let (first, answers) = posted.answers().await;
    assert_eq!(answers.len(), 3);
    assert!(answers.iter().all(|m| m.text == "first" && m.included));
    for s in &scripts {
        assert_eq!(
            sent(&s.chats.lock().unwrap()[0]),
            pairs(&[("user", "hello")])
        );
    }
    let (role, system) = scripts[0].chats.lock().unwrap()[0][0].clone();
    assert_eq!(role, Role::System);
    assert!(system.starts_with("You are ann,"), "{system}");
    assert!(system.contains("bob (the bob), cy (the cy)"), "{system}");

    // Untick the person's first message and bob's answer; disable cy.
    let bobs = answers
        .iter()
        .find(|m| matches!(&m.author, Author::Agent { name, .. } if name == "bob"))
        .unwrap();
    h.rt.rooms()
        .set_included(OWNER, room.id, first.id, false)
        .await
        .unwrap();
    h.rt.rooms()
        .set_included(OWNER, room.id, bobs.id, false)
        .await
        .unwrap();
    h.rt.rooms()
        .set_enabled(OWNER, room.id, ids[2], false)
        .await
        .unwrap();
    let (_, answers) =
        h.rt.rooms()
            .post(OWNER, room.id, "second", None)
            .await
            .unwrap()
            .answers()
            .await;
    assert_eq!(answers.len(), 2, "cy is disabled");
    assert_eq!(
        scripts[2].chats.lock().unwrap().len(),
        1,
        "cy received nothing"
    );
    // ann's own answer is hers (assistant); cy's is another's (user, named); the unticked are gone.
    let ann_saw = sent(&scripts[0].chats.lock().unwrap()[1]);
    let mut expected = vec![
        ("assistant", "first"),
        ("user", "cy: first"),
        ("user", "second"),
    ];
    // The parallel answers of the first message are stored in the order they arrived.
    let order: Vec<String> = h
        .store
        .room_messages(room.id)
        .await
        .unwrap()
        .iter()
        .filter_map(|m| match &m.author {
            Author::Agent { name, .. } if m.seq <= 4 => Some(name.clone()),
            _ => None,
        })
        .collect();
    if order.iter().position(|n| n == "cy") < order.iter().position(|n| n == "ann") {
        expected.swap(0, 1);
    }
    assert_eq!(ann_saw, pairs(&expected));

    // Enabled again, cy gets the whole included history on its next answer.
    h.rt.rooms()
        .set_enabled(OWNER, room.id, ids[2], true)
        .await
        .unwrap();
    h.rt.rooms()
        .post(OWNER, room.id, "third", None)
        .await
        .unwrap()
        .answers()
        .await;
    let cy_saw = sent(&scripts[2].chats.lock().unwrap()[1]);
    let texts: Vec<&str> = cy_saw.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        texts.contains(&"second") && texts.contains(&"third"),
        "{cy_saw:?}"
    );
    assert!(texts.contains(&"ann: ann again"), "{cy_saw:?}");
    assert!(
        !texts.contains(&"hello") && !texts.contains(&"bob: first"),
        "{cy_saw:?}"
    );
}

#[tokio::test]
async fn mentions_ask_only_those_named_and_a_disabled_one_receives_nothing() {
    let h = Harness::sqlite().await;
    let ann = h.script("ann", vec![Act::Say("from ann")]);
    let bob = h.script("bob", vec![Act::Say("from bob")]);
    let (room, _) = h.rt.rooms().create(OWNER, "ideas", None).await.unwrap();
    h.rt.rooms()
        .add_participant(OWNER, room.id, agent("ann"))
        .await
        .unwrap();
    let b =
        h.rt.rooms()
            .add_participant(OWNER, room.id, agent("bob"))
            .await
            .unwrap();
    h.rt.rooms()
        .set_enabled(OWNER, room.id, b.id, false)
        .await
        .unwrap();

    // Bob is disabled: named, he is sent nothing, and the room says so.
    let (asked, answers) =
        h.rt.rooms()
            .post(OWNER, room.id, "@Bob what do you think?", None)
            .await
            .unwrap()
            .answers()
            .await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].author, Author::Utility);
    assert_eq!(
        answers[0].text,
        "@bob is disabled and received nothing: enable it to ask it."
    );
    assert_eq!(answers[0].reply_to, Some(asked.id));
    assert!(!answers[0].included);
    assert_eq!(ann.chats.lock().unwrap().len(), 0);
    assert_eq!(bob.chats.lock().unwrap().len(), 0);

    // Enabled, he answers when named; Ann, not named, is not asked.
    h.rt.rooms()
        .set_enabled(OWNER, room.id, b.id, true)
        .await
        .unwrap();
    let (_, answers) =
        h.rt.rooms()
            .post(OWNER, room.id, "@Bob and now?", None)
            .await
            .unwrap()
            .answers()
            .await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].text, "from bob");
    assert_eq!(ann.chats.lock().unwrap().len(), 0);
    assert_eq!(bob.chats.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_agent_calls_its_tools_while_it_answers() {
    let h = Harness::sqlite().await;
    let ann = h.script(
        "ann",
        vec![
            Act::Call(vec![
                ("c1", "builtin/calculate", r#"{"expression": "6 * 7"}"#),
                ("c2", "builtin/echo", r#"{"text": "not mine"}"#),
            ]),
            Act::Call(vec![("c1", "builtin/calculate", "{not json")]),
            Act::Say("six times seven is 42"),
        ],
    );
    let (room, _) = h.rt.rooms().create(OWNER, "maths", None).await.unwrap();
    // Each tool is checked where it is added: a tool its server does not list, a server that
    // does not exist, a name that is not `server/tool`.
    for (tools, path, says) in [
        (
            vec!["builtin/now", "builtin/nope"],
            "tools[1]",
            "lists no tool `nope`",
        ),
        (
            vec!["nowhere/x"],
            "tools[0]",
            "no MCP server is named `nowhere`",
        ),
        (vec!["calculate"], "tools[0]", "is not `server/tool`"),
    ] {
        let with = NewParticipant {
            tools: tools.into_iter().map(String::from).collect(),
            ..agent("ann")
        };
        match h.rt.rooms().add_participant(OWNER, room.id, with).await {
            Err(RuntimeError::Validation(v)) => {
                assert_eq!(v.0[0].path, path);
                assert!(v.0[0].message.contains(says), "{}", v.0[0].message);
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
    }
    let a =
        h.rt.rooms()
            .add_participant(
                OWNER,
                room.id,
                NewParticipant {
                    tools: vec!["builtin/calculate".into(), "builtin/now".into()],
                    ..agent("ann")
                },
            )
            .await
            .unwrap();
    assert_eq!(a.tools.0, ["builtin/calculate", "builtin/now"]);

    let mut events = h.rt.subscribe();
    let (_, answers) =
        h.rt.rooms()
            .post(OWNER, room.id, "what is six times seven?", None)
            .await
            .unwrap()
            .answers()
            .await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].text, "six times seven is 42");

    // Three calls of its model: each offered its tools; the second saw the results of the
    // first's calls (the one it may not make refused), the third the malformed call's error.
    let offered = ann.chat_tools.lock().unwrap().clone();
    assert_eq!(offered.len(), 3);
    assert!(
        offered
            .iter()
            .all(|t| *t == ["builtin/calculate", "builtin/now"]),
        "{offered:?}"
    );
    let chats = ann.chats.lock().unwrap().clone();
    let results = |chat: &[(Role, String)]| -> Vec<String> {
        chat.iter()
            .filter(|(r, _)| *r == Role::Tool)
            .map(|(_, t)| t.clone())
            .collect()
    };
    let first = results(&chats[1]);
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0], "42");
    assert!(first[1].contains("not one of your tools"), "{}", first[1]);
    let second = results(&chats[2]);
    assert_eq!(second.len(), 3, "the earlier round stays in the context");
    assert!(second[2].to_lowercase().contains("json"), "{}", second[2]);

    // The room's stream told of each call and its end.
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let agency_runtime::Event::Room { change, .. } = e {
            match change {
                RoomChange::ToolCalled { agent, tool } if agent == a.id => {
                    seen.push(format!("called {tool}"));
                }
                RoomChange::ToolDone {
                    agent,
                    tool,
                    is_error,
                } if agent == a.id => seen.push(format!("done {tool} {is_error}")),
                _ => {}
            }
        }
    }
    assert_eq!(
        seen,
        [
            "called builtin/calculate",
            "done builtin/calculate false",
            "called builtin/calculate",
            "done builtin/calculate true",
        ]
    );
    // The tools stay with the agent.
    let stored = h.store.participants(room.id).await.unwrap();
    assert_eq!(stored[0].tools, a.tools);
}

/// What a room agent's model was offered, call by call, and its answer, when it is scripted
/// to make `acts`.
async fn offered_while_answering(acts: Vec<Act>) -> (Vec<Vec<String>>, RoomMessage) {
    let h = Harness::sqlite().await;
    let ann = h.script("ann", acts);
    let (room, _) = h.rt.rooms().create(OWNER, "loop", None).await.unwrap();
    h.rt.rooms()
        .add_participant(
            OWNER,
            room.id,
            NewParticipant {
                tools: vec!["builtin/*".into()],
                ..agent("ann")
            },
        )
        .await
        .unwrap();
    let (_, mut answers) =
        h.rt.rooms()
            .post(OWNER, room.id, "what time is it?", None)
            .await
            .unwrap()
            .answers()
            .await;
    let offered = ann.chat_tools.lock().unwrap().clone();
    (offered, answers.remove(0))
}

#[tokio::test]
async fn a_model_that_keeps_calling_tools_answers_when_its_hops_run_out() {
    // Eight rounds of one call each (a reply and a result: two hops each) reach the room's
    // limit of 16 hops; the ninth call is told to answer and offered no tools.
    let expressions = [
        r#"{"expression": "1 + 1"}"#,
        r#"{"expression": "1 + 2"}"#,
        r#"{"expression": "1 + 3"}"#,
        r#"{"expression": "1 + 4"}"#,
        r#"{"expression": "1 + 5"}"#,
        r#"{"expression": "1 + 6"}"#,
        r#"{"expression": "1 + 7"}"#,
        r#"{"expression": "1 + 8"}"#,
    ];
    let mut acts: Vec<Act> = expressions
        .into_iter()
        .map(|e| Act::Call(vec![("c", "builtin/calculate", e)]))
        .collect();
    acts.push(Act::Say("it is late"));
    let (offered, answer) = offered_while_answering(acts).await;
    assert_eq!(answer.text, "it is late");
    assert!(!matches!(answer.author, Author::Error { .. }));
    let rounds = (room::MAX_HOPS / 2) as usize;
    assert_eq!(offered.len(), rounds + 1, "{offered:?}");
    assert!(offered[..rounds].iter().all(|t| t.len() == 3));
    assert!(offered[rounds].is_empty(), "the last call offers no tools");
}

#[tokio::test]
async fn a_model_repeating_a_call_is_told_to_answer() {
    // The same call with the same result a third time is a loop, as in an agency's turn.
    let same = || {
        Act::Call(vec![(
            "c",
            "builtin/calculate",
            r#"{"expression": "6 * 7"}"#,
        )])
    };
    let (offered, answer) =
        offered_while_answering(vec![same(), same(), same(), Act::Say("it is 42")]).await;
    assert_eq!(answer.text, "it is 42");
    assert_eq!(offered.len(), 4, "{offered:?}");
    assert!(offered[..3].iter().all(|t| t.len() == 3));
    assert!(
        offered[3].is_empty(),
        "told to answer, it is offered no tools"
    );
}

#[tokio::test]
async fn a_failing_agent_holds_no_one_up_and_can_be_retried() {
    let h = Harness::sqlite().await;
    let gate = Arc::new(tokio::sync::Notify::new());
    h.script(
        "ann",
        vec![Act::Fail("the provider is down"), Act::Say("ann, at last")],
    );
    h.script("bob", vec![Act::Gated(gate.clone(), "bob answers")]);
    let (room, _) = h.rt.rooms().create(OWNER, "ideas", None).await.unwrap();
    let a =
        h.rt.rooms()
            .add_participant(OWNER, room.id, agent("ann"))
            .await
            .unwrap();
    h.rt.rooms()
        .add_participant(OWNER, room.id, agent("bob"))
        .await
        .unwrap();

    let mut events = h.rt.subscribe();
    let mut posted =
        h.rt.rooms()
            .post(OWNER, room.id, "hello", None)
            .await
            .unwrap();
    // ann's failure is stored and published while bob is still working.
    let failed = posted.answers.join_next().await.unwrap().unwrap();
    assert_eq!(failed.text, "script: the provider is down");
    assert!(matches!(failed.author, Author::Error { id, .. } if id == a.id));
    assert!(!failed.included, "a failure is never context");
    gate.notify_one();
    let (_, rest) = posted.answers().await;
    assert_eq!(rest[0].text, "bob answers");
    let mut saw_failure_event = false;
    while let Ok(e) = events.try_recv() {
        if let agency_runtime::Event::Room {
            change: agency_runtime::rooms::RoomChange::Message(m),
            ..
        } = e
        {
            saw_failure_event |= m.id == failed.id;
        }
    }
    assert!(saw_failure_event);

    let (asked, answers) =
        h.rt.rooms()
            .retry(OWNER, room.id, a.id)
            .await
            .unwrap()
            .answers()
            .await;
    assert_eq!(asked.text, "hello");
    assert_eq!(answers[0].text, "ann, at last");
}

#[tokio::test]
async fn solo_mode_and_limits() {
    let h = Harness::sqlite().await;
    h.script("ann", vec![Act::Say("hi")]);
    let (room, _) = h.rt.rooms().create(OWNER, "notes", None).await.unwrap();
    let a =
        h.rt.rooms()
            .add_participant(OWNER, room.id, agent("ann"))
            .await
            .unwrap();
    h.rt.rooms()
        .set_enabled(OWNER, room.id, a.id, false)
        .await
        .unwrap();

    let posted =
        h.rt.rooms()
            .post(OWNER, room.id, "a note to self", None)
            .await
            .unwrap();
    assert!(posted.answering.is_empty());
    let (m, answers) = posted.answers().await;
    assert!(answers.is_empty());
    assert_eq!(h.store.room_messages(room.id).await.unwrap(), vec![m]);

    let long = "x".repeat(MAX_MESSAGE_CHARS + 1);
    match h.rt.rooms().post(OWNER, room.id, &long, None).await {
        Err(RuntimeError::Invalid(msg)) => assert!(msg.contains("5000"), "{msg}"),
        other => panic!("expected a refusal, got {:?}", other.map(|p| p.message)),
    }
    assert_eq!(h.store.room_messages(room.id).await.unwrap().len(), 1);

    // Another owner's room does not exist for them; names are checked.
    assert!(matches!(
        h.rt.rooms().post("eve", room.id, "hi", None).await,
        Err(RuntimeError::RoomNotFound(_))
    ));
    for bad in ["", "1abc", "two words"] {
        let r =
            h.rt.rooms()
                .add_participant(
                    OWNER,
                    room.id,
                    NewParticipant {
                        name: bad.into(),
                        ..agent("x")
                    },
                )
                .await;
        assert!(matches!(r, Err(RuntimeError::Validation(_))), "{bad:?}");
    }
    let r =
        h.rt.rooms()
            .add_participant(OWNER, room.id, agent("ANN"))
            .await;
    assert!(
        matches!(r, Err(RuntimeError::Validation(_))),
        "a taken name"
    );
}

#[tokio::test]
async fn agents_point_to_reusable_roles_and_personalities() {
    use agency_core::room::DefinitionKind;
    let h = Harness::sqlite().await;
    let ann = h.script("ann", vec![Act::Say("ok")]);
    let bob = h.script("bob", vec![Act::Say("ok")]);
    h.script("cy", vec![Act::Say("ok")]);
    let critic =
        h.rt.rooms()
            .create_definition(OWNER, DefinitionKind::Role, "critic", "finds the flaws")
            .await
            .unwrap();
    let dry =
        h.rt.rooms()
            .create_definition(OWNER, DefinitionKind::Personality, "dry", "dry humour")
            .await
            .unwrap();
    let (room, _) = h.rt.rooms().create(OWNER, "ideas", None).await.unwrap();
    // Two agents of one room share the role; the first has the personality too.
    for (name, personality) in [("ann", Some(dry.id)), ("bob", None)] {
        let p =
            h.rt.rooms()
                .add_participant(
                    OWNER,
                    room.id,
                    NewParticipant {
                        role: None,
                        role_id: Some(critic.id),
                        personality_id: personality,
                        ..agent(name)
                    },
                )
                .await
                .unwrap();
        assert_eq!(p.role.as_deref(), Some("finds the flaws"));
    }
    let system = |s: &common::Script, i: usize| s.chats.lock().unwrap()[i][0].1.clone();
    h.rt.rooms()
        .post(OWNER, room.id, "first", None)
        .await
        .unwrap()
        .answers()
        .await;
    assert!(
        system(&ann, 0).contains("Your role: finds the flaws"),
        "{}",
        system(&ann, 0)
    );
    assert!(system(&ann, 0).contains("Your personality: dry humour"));
    assert!(system(&bob, 0).contains("Your role: finds the flaws"));
    assert!(!system(&bob, 0).contains("dry humour"));

    // Rewritten once, both agents have the new text from their next answer.
    h.rt.rooms()
        .update_definition(OWNER, critic.id, "critic", "finds every flaw")
        .await
        .unwrap();
    h.rt.rooms()
        .post(OWNER, room.id, "second", None)
        .await
        .unwrap()
        .answers()
        .await;
    for s in [&ann, &bob] {
        assert!(
            system(s, 1).contains("Your role: finds every flaw"),
            "{}",
            system(s, 1)
        );
    }

    // Deleted, the agents keep its text.
    h.rt.rooms()
        .delete_definition(OWNER, critic.id)
        .await
        .unwrap();
    h.rt.rooms()
        .post(OWNER, room.id, "third", None)
        .await
        .unwrap()
        .answers()
        .await;
    assert!(system(&bob, 2).contains("Your role: finds every flaw"));
    assert_eq!(
        h.rt.rooms()
            .definitions(OWNER)
            .await
            .unwrap()
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["dry"]
    );

    // Pointing to someone else's, to the wrong kind, or giving text and a pointer is refused.
    let eves =
        h.rt.rooms()
            .create_definition("eve", DefinitionKind::Role, "mole", "leaks")
            .await
            .unwrap();
    for (new, field) in [
        (
            NewParticipant {
                role: None,
                role_id: Some(eves.id),
                ..agent("cy")
            },
            "role_id",
        ),
        (
            NewParticipant {
                role: None,
                role_id: Some(dry.id),
                ..agent("cy")
            },
            "role_id",
        ),
        (
            NewParticipant {
                personality: Some("cheerful".into()),
                personality_id: Some(dry.id),
                ..agent("cy")
            },
            "personality",
        ),
    ] {
        match h.rt.rooms().add_participant(OWNER, room.id, new).await {
            Err(RuntimeError::Validation(e)) => assert_eq!(e.0[0].path, field, "{e}"),
            other => panic!("expected a field error, got {other:?}"),
        }
    }
    // Another owner cannot change or delete mine; names are unique per kind.
    assert!(matches!(
        h.rt.rooms()
            .update_definition("eve", dry.id, "dry", "x")
            .await,
        Err(RuntimeError::NotFound(_))
    ));
    assert!(matches!(
        h.rt.rooms().delete_definition("eve", dry.id).await,
        Err(RuntimeError::NotFound(_))
    ));
    match h
        .rt
        .rooms()
        .create_definition(OWNER, DefinitionKind::Personality, "DRY", "x")
        .await
    {
        Err(RuntimeError::Validation(e)) => assert_eq!(e.0[0].path, "name", "{e}"),
        other => panic!("expected a taken name, got {other:?}"),
    }
}

/// A crash while agents answer: on the next start their answers are failures in their place,
/// answering the person's message, and Retry asks them again. Answers stored before the crash
/// are left as they are.
#[tokio::test]
async fn answers_in_flight_at_a_crash_become_failures_with_retry() {
    let h = Harness::sqlite().await;
    h.script("ann", vec![Act::Say("ann here")]);
    h.script("bob", vec![Act::Hang]);
    let (room, _) = h.rt.rooms().create(OWNER, "ideas", None).await.unwrap();
    let ann =
        h.rt.rooms()
            .add_participant(OWNER, room.id, agent("ann"))
            .await
            .unwrap();
    let bob =
        h.rt.rooms()
            .add_participant(OWNER, room.id, agent("bob"))
            .await
            .unwrap();
    let posted =
        h.rt.rooms()
            .post(OWNER, room.id, "hello", None)
            .await
            .unwrap();
    let asked = posted.message.clone();
    // Ann answers; Bob's call is still running when the "crash" comes.
    let mut stored = Vec::new();
    for _ in 0..100 {
        stored = h.store.room_messages(room.id).await.unwrap();
        if stored.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(stored.len(), 2, "{stored:?}");

    // The restarted server: another runtime on the same database.
    let restarted = Harness::on(h.url.clone(), None).await;
    restarted.script("bob", vec![Act::Say("bob here")]);
    assert_eq!(restarted.rt.rooms().recover().await.unwrap(), 1);
    let messages = restarted.store.room_messages(room.id).await.unwrap();
    assert_eq!(messages.len(), 3);
    let failure = &messages[2];
    assert_eq!(
        failure.author,
        Author::Error {
            id: bob.id,
            name: "bob".into()
        }
    );
    assert_eq!(failure.reply_to, Some(asked.id));
    assert!(failure.text.contains("server stopped"), "{}", failure.text);
    assert!(!failure.included);
    assert!(messages.iter().any(|m| m.author
        == Author::Agent {
            id: ann.id,
            name: "ann".into()
        }));
    // Nothing is left to recover, and Retry has Bob answer the person's message.
    assert_eq!(restarted.rt.rooms().recover().await.unwrap(), 0);
    let (_, answers) = restarted
        .rt
        .rooms()
        .retry(OWNER, room.id, bob.id)
        .await
        .unwrap()
        .answers()
        .await;
    assert_eq!(answers[0].text, "bob here");
    assert_eq!(restarted.rt.rooms().recover().await.unwrap(), 0);
}
