//! The manager's answer streams token by token when its provider streams: through the real
//! OpenAI provider, against a fake that streams the reply in pieces.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use agency_core::ProviderDraft;
use agency_fakes::{Fake, openai};
use agency_runtime::{Caller, TurnEvent, TurnRequest};
use futures::StreamExt;

#[tokio::test]
async fn the_answer_streams_as_the_manager_writes_it() {
    let fake = Fake::start().await;
    // First call: a reply to the worker (streams nothing to the user). Second: the answer.
    fake.push(openai::stream(
        &[r#"{"to": 2, "#, r#""context": "count"}"#],
        10,
        3,
    ))
    .push(openai::stream(
        &[
            r#"{"to": 0, "con"#,
            r#"text": "one, "#,
            "two, ",
            r#"three\n"}"#,
        ],
        20,
        6,
    ));
    let h = common::Harness::sqlite().await;
    let mut d = common::draft(
        "json",
        16,
        vec![
            common::agent(1, "boss", "local/model-x", &[]),
            common::agent(
                2,
                "worker",
                "builtin/rules",
                &[("boss", "counted: {{message}}", &["boss"])],
            ),
        ],
    );
    d.providers = vec![ProviderDraft {
        name: "local".into(),
        kind: "openai".into(),
        base_url: Some(format!("{}/v1", fake.url)),
        ..Default::default()
    }];
    let agency = h.agency(d).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();

    let request = TurnRequest {
        stream_text: true,
        ..TurnRequest::message(Caller::Local, c.id, "count to three".into())
    };
    let events: Vec<TurnEvent> = h.rt.begin(request).await.unwrap().events().collect().await;
    let mut pieces = Vec::new();
    let mut finished = None;
    for event in events {
        match event {
            TurnEvent::Text(piece) => pieces.push(piece),
            TurnEvent::Finished { outcome, rest } => finished = Some((outcome, rest)),
            other => panic!("unexpected {other:?}"),
        }
    }
    let (out, rest) = finished.expect("the turn's end comes last");
    assert_eq!(out.answer, "one, two, three\n");
    assert_eq!(pieces.concat(), out.answer, "everything streamed");
    assert_eq!(rest, "", "nothing left to send");
    assert!(pieces.len() >= 3, "in pieces as they came: {pieces:?}");
    // Both calls of the manager streamed from the provider.
    let calls = fake.requests();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|r| r.body["stream"] == true));
    assert_eq!(out.usage.total(), 39);

    // Without a listener nothing streams from the provider.
    fake.push(openai::completion(r#"{"to": 0, "context": "plain"}"#, 1, 1));
    let out = h.rt.send(c.id, "again".into()).await.unwrap();
    assert_eq!(out.answer, "plain");
    assert_eq!(fake.requests()[2].body.get("stream"), None);
}
