//! Webhook bots in rooms (spec 003), called on loopback: registered by the utility bot, the
//! exact request a tagged bot receives, how its answer replies and tags, and its failures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use agency_core::room::{Author, Participant, RoomMessage};
use agency_core::{RoomId, RoomMessageId};
use agency_fakes::{Fake, Reply};
use agency_runtime::rooms::NewParticipant;
use common::{Act, Harness};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

const OWNER: &str = "ada";

/// Posts `text` (a reply to `reply_to`) and waits for every answer.
async fn say(
    h: &Harness,
    room: RoomId,
    text: &str,
    reply_to: Option<RoomMessageId>,
) -> (RoomMessage, Vec<RoomMessage>) {
    h.rt.rooms()
        .post(OWNER, room, text, reply_to)
        .await
        .unwrap()
        .answers()
        .await
}

/// The utility bot's answer to a command, and the caller key it gave, if any.
async fn command(h: &Harness, room: RoomId, text: &str) -> (String, Option<String>) {
    let mut posted = h.rt.rooms().post(OWNER, room, text, None).await.unwrap();
    let key = posted
        .caller_key
        .take()
        .map(|k| k.expose_secret().to_string());
    let (asked, answers) = posted.answers().await;
    assert!(!asked.included, "a command is never in a context");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].author, Author::Utility);
    assert_eq!(answers[0].reply_to, Some(asked.id));
    assert!(!answers[0].included);
    (answers[0].text.clone(), key)
}

fn wire(m: &RoomMessage, from: &str, tagged: &[&Participant]) -> Value {
    json!({
        "from": from,
        "tagged": tagged.iter().map(|p| p.id.to_string()).collect::<Vec<_>>(),
        "id": m.id.to_string(),
        "text": m.text,
        "timestamp": m.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
}

#[tokio::test]
async fn a_tagged_bot_gets_the_spec_request_and_its_answer_replies_with_the_tags() {
    let h = Harness::sqlite().await;
    h.script(
        "ann",
        vec![Act::Say("morning!"), Act::Say("about 30 °C is fine")],
    );
    let bot = Fake::start().await;
    bot.push(Reply::json(json!({"message": "31 °C"})));
    bot.push(Reply::json(json!({"message": "a little, yes"})));
    let (room, _) = h.rt.rooms().create(OWNER, "plant", None).await.unwrap();
    let ann =
        h.rt.rooms()
            .add_participant(
                OWNER,
                room.id,
                NewParticipant {
                    name: "ann".into(),
                    model: "script/ann".into(),
                    ..NewParticipant::default()
                },
            )
            .await
            .unwrap();

    let (said, key) = command(
        &h,
        room.id,
        &format!("/register @ferm {}/hooks/ferm Fermin Ortega", bot.url),
    )
    .await;
    let key = key.expect("the caller key, once");
    assert!(key.starts_with("ck_") && key.len() == 67, "{key}");
    assert!(said.starts_with("Registered @ferm"), "{said}");
    assert!(
        !said.contains(&key),
        "the stored answer does not hold the key"
    );
    assert!(said.contains(&key[key.len() - 4..]), "{said}");
    let ferm = h.rt.rooms().bots(OWNER, room.id).await.unwrap().remove(0);
    assert_eq!(ferm.name, "ferm");
    assert_eq!(
        ferm.bot().unwrap().emulates.as_deref(),
        Some("Fermin Ortega")
    );

    // Not tagged: the bot is not called, the model agent answers.
    let (morning, answers) = say(&h, room.id, "morning", None).await;
    assert_eq!(answers.len(), 1);
    assert!(bot.requests().is_empty());
    let ann_morning = answers[0].clone();

    // Tagged, with another agent: both answer.
    let (asked, answers) = say(&h, room.id, "@ferm @ann temperature?", None).await;
    assert_eq!(asked.tagged, vec![ann.id, ferm.id], "display order");
    assert_eq!(answers.len(), 2);
    let got = bot.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/hooks/ferm");
    assert_eq!(got[0].headers["x-caller-key"], key);
    assert_eq!(
        got[0].body,
        json!({
            "context": [wire(&morning, OWNER, &[]), wire(&ann_morning, &ann.id.to_string(), &[])],
            "conversation": [],
            "message": wire(&asked, OWNER, &[&ann, &ferm]),
            "users": [{"id": ann.id.to_string(), "username": "ann"},
                      {"id": ferm.id.to_string(), "username": "ferm"}],
        })
    );
    let first = answers
        .iter()
        .find(|m| m.participant() == Some(ferm.id))
        .unwrap()
        .clone();
    assert_eq!(first.text, "31 °C");
    assert!(matches!(first.author, Author::Agent { .. }));
    assert_eq!(first.reply_to, Some(asked.id), "posted as a reply");
    assert_eq!(first.tagged, vec![ann.id], "tags whom the question tagged");
    let ann_answer = answers
        .iter()
        .find(|m| m.participant() == Some(ann.id))
        .unwrap()
        .clone();

    // A reply to the bot asks only the bot; the exchange so far is its conversation.
    let (follow_up, answers) = say(&h, room.id, "is that high?", Some(first.id)).await;
    assert_eq!(answers.len(), 1);
    let got = bot.requests();
    assert_eq!(got.len(), 2);
    let mut context: Vec<Value> = vec![
        wire(&morning, OWNER, &[]),
        wire(&ann_morning, &ann.id.to_string(), &[]),
        wire(&asked, OWNER, &[&ann, &ferm]),
    ];
    // The two answers to the question, in the order the room stored them.
    let mut two = vec![
        (first.seq, wire(&first, "BOT", &[&ann])),
        (ann_answer.seq, wire(&ann_answer, &ann.id.to_string(), &[])),
    ];
    two.sort_by_key(|(seq, _)| *seq);
    context.extend(two.into_iter().map(|(_, v)| v));
    assert_eq!(got[1].body["context"], Value::from(context));
    assert_eq!(
        got[1].body["conversation"],
        json!([{"id": asked.id.to_string(), "messages": [
            wire(&asked, OWNER, &[&ann, &ferm]),
            wire(&first, "BOT", &[&ann]),
        ]}])
    );
    assert_eq!(
        got[1].body["message"],
        wire(&follow_up, OWNER, &[]),
        "a reply tags no one"
    );
    assert_eq!(got[1].body["users"], json!([]));
    let second = &answers[0];
    assert_eq!(second.text, "a little, yes");
    assert_eq!(second.reply_to, Some(follow_up.id));
    assert_eq!(second.tagged, vec![], "the question tagged no one");
}

#[tokio::test]
async fn a_failing_bot_shows_its_error_in_its_place_and_can_be_retried() {
    let h = Harness::sqlite().await;
    let bot = Fake::start().await;
    let (room, _) = h.rt.rooms().create(OWNER, "plant", None).await.unwrap();
    command(&h, room.id, &format!("/register ferm {}/bot", bot.url)).await;
    let ferm = h.rt.rooms().bots(OWNER, room.id).await.unwrap().remove(0);

    // A 5xx is retried once, then shown.
    for _ in 0..2 {
        bot.push(Reply::Json {
            status: 503,
            body: json!({"error": {"message": "warming up"}}),
            headers: vec![],
        });
    }
    let (asked, answers) = say(&h, room.id, "@ferm status?", None).await;
    assert_eq!(bot.requests().len(), 2, "one retry");
    assert_eq!(
        answers[0].author,
        Author::Error {
            id: ferm.id,
            name: "ferm".into()
        }
    );
    assert!(answers[0].text.contains("HTTP 503"), "{}", answers[0].text);
    assert!(answers[0].text.contains("@ferm"), "{}", answers[0].text);
    assert_eq!(answers[0].reply_to, Some(asked.id));
    assert!(!answers[0].included);

    // Malformed JSON is asked for once more, then is the error.
    for _ in 0..2 {
        bot.push(Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: "{\"reply\": \"hi\"}".into(),
        });
    }
    let answers =
        h.rt.rooms()
            .retry(OWNER, room.id, ferm.id)
            .await
            .unwrap()
            .answers()
            .await
            .1;
    assert_eq!(bot.requests().len(), 4);
    assert!(
        answers[0].text.contains("malformed answer"),
        "{}",
        answers[0].text
    );

    // A bot that never answers times out (and is retried once).
    bot.push(Reply::Hang);
    bot.push(Reply::Hang);
    let answers =
        h.rt.rooms()
            .retry(OWNER, room.id, ferm.id)
            .await
            .unwrap()
            .answers()
            .await
            .1;
    assert_eq!(bot.requests().len(), 6);
    assert!(answers[0].text.contains("timed out"), "{}", answers[0].text);

    // Retrying answers the message the failure answered.
    bot.push(Reply::json(json!({"message": "all good"})));
    let retried = h.rt.rooms().retry(OWNER, room.id, ferm.id).await.unwrap();
    assert_eq!(retried.message.id, asked.id);
    let answers = retried.answers().await.1;
    assert_eq!(answers[0].text, "all good");
    assert_eq!(answers[0].reply_to, Some(asked.id));
    let last = bot.requests().pop().unwrap();
    assert_eq!(last.body["message"]["id"], asked.id.to_string());
    assert!(
        last.body["context"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["from"] != "BOT"),
        "failures are never sent"
    );
}

#[tokio::test]
async fn the_utility_bot_says_what_is_wrong_and_lists_and_removes_bots() {
    let h = Harness::sqlite().await;
    let (room, _) = h.rt.rooms().create(OWNER, "plant", None).await.unwrap();
    h.rt.rooms()
        .add_participant(
            OWNER,
            room.id,
            NewParticipant {
                name: "ann".into(),
                model: "builtin/rules".into(),
                ..NewParticipant::default()
            },
        )
        .await
        .unwrap();
    for (text, wanted) in [
        ("/register", "usage: `/register <username> <endpoint>"),
        ("/register ferm", "usage"),
        (
            "/register ferm not-a-url",
            "endpoint: `not-a-url` is not a URL",
        ),
        (
            "/register ferm ftp://files.example.com/x",
            "endpoint: the endpoint must be an http or https URL",
        ),
        (
            "/register ANN http://127.0.0.1:9/bot",
            "username: the room has an agent named `ANN` already",
        ),
        ("/register utility http://127.0.0.1:9/bot", "utility bot"),
        (
            "/register 9lives http://127.0.0.1:9/bot",
            "username: a letter",
        ),
        ("/unregister", "usage: `/unregister <username>`"),
        ("/unregister ferm", "the room has no bot `@ferm`"),
        ("/bots", "No bots are registered"),
        ("/dance", "I do not know `/dance`"),
    ] {
        let (said, key) = command(&h, room.id, text).await;
        assert!(said.contains(wanted), "{text}: {said}");
        assert_eq!(key, None, "{text}");
    }
    assert_eq!(
        h.store.participants(room.id).await.unwrap().len(),
        1,
        "nothing was added"
    );

    let (_, key) = command(&h, room.id, "/register ferm http://127.0.0.1:9/bot Fermin").await;
    assert!(key.is_some());
    let (said, _) = command(&h, room.id, "/bots").await;
    assert_eq!(
        said,
        "Bots in this room:\n@ferm (emulating Fermin) at http://127.0.0.1:9/bot"
    );
    let (said, _) = command(&h, room.id, "/unregister @FERM").await;
    assert_eq!(said, "Unregistered @ferm.");
    assert!(h.rt.rooms().bots(OWNER, room.id).await.unwrap().is_empty());
    // Commands and the utility bot's answers never reach a model's context.
    let context = h.store.room_messages(room.id).await.unwrap();
    assert!(context.iter().all(|m| !m.included));
}

#[tokio::test]
async fn a_server_that_does_not_allow_private_addresses_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agency.db").display());
    let store = agency_store::open(&url).await.unwrap();
    let master =
        agency_runtime::secrets::MasterKeySource::Hex(secrecy::SecretString::from("42".repeat(32)));
    let rt = agency_runtime::Runtime::with_master_key(
        store,
        agency_providers::Providers::builtin(),
        Some(master),
    );
    let (room, _) = rt.rooms().create(OWNER, "plant", None).await.unwrap();
    for endpoint in [
        "http://127.0.0.1:9/bot",
        "http://localhost:9/bot",
        "http://[::1]/b",
    ] {
        let mut posted = rt
            .rooms()
            .post(OWNER, room.id, &format!("/register ferm {endpoint}"), None)
            .await
            .unwrap();
        assert!(posted.caller_key.take().is_none());
        let said = posted.answers().await.1.remove(0).text;
        assert!(said.contains("loopback or private"), "{endpoint}: {said}");
    }
    assert!(rt.rooms().bots(OWNER, room.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_caller_key_is_the_same_every_time_and_differs_per_bot() {
    let h = Harness::sqlite().await;
    let (room, _) = h.rt.rooms().create(OWNER, "plant", None).await.unwrap();
    let bot = Fake::start().await;
    bot.otherwise(Reply::json(json!({"message": "ok"})));
    let (_, a) = command(&h, room.id, &format!("/register a {}/a", bot.url)).await;
    let (_, b) = command(&h, room.id, &format!("/register b {}/b", bot.url)).await;
    assert_ne!(a, b);
    say(&h, room.id, "@a @b hi", None).await;
    say(&h, room.id, "@a again", None).await;
    let keys: Vec<(String, String)> = bot
        .requests()
        .iter()
        .map(|r| (r.path.clone(), r.headers["x-caller-key"].clone()))
        .collect();
    for (path, key) in keys {
        let wanted = if path == "/a" { &a } else { &b };
        assert_eq!(Some(&key), wanted.as_ref(), "{path}");
    }
}
