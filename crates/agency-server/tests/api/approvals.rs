//! Approvals through the management API (issue 36): a Chat Completions request waits (Chat
//! Completions has no shape for it) while a person lists, approves or denies the call through
//! `/api/approvals`; an unanswered call is denied at its timeout; another account sees nothing;
//! an agency's approval webhook is told of each call, signed, and its receiver answers with the
//! agency's API key.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{App, read, signed_up};

/// A clerk that echoes the user's message through `builtin/echo`, a call that needs approval.
fn clerk(timeout: Option<u64>) -> String {
    let timeout = timeout.map_or(String::new(), |t| {
        format!("    approve_timeout_secs: {t}\n")
    });
    format!(
        r#"name: clerk
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [builtin/echo]
    approve: [builtin/echo]
{timeout}    rules:
      - {{ when: user, call: builtin/echo, with: {{ text: "{{{{message}}}}" }}, do: "Echoed: {{{{result}}}}", send_to: user }}
"#
    )
}

/// Imports the clerk (an import publishes) and makes a key for it.
async fn clerk_key(app: &App, timeout: Option<u64>) -> String {
    let (status, created) = app
        .send(
            app.client
                .post(app.url("/api/agencies/import"))
                .header("content-type", "application/yaml")
                .body(clerk(timeout)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, key) = app
        .send(
            app.client
                .post(app.url("/api/agencies/clerk/keys"))
                .json(&json!({ "name": "app" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    key["key"].as_str().unwrap().to_string()
}

/// The approvals pending, once there is one.
async fn pending(app: &App) -> Vec<Value> {
    for _ in 0..500 {
        let (status, list) = app.get("/api/approvals").await;
        assert_eq!(status, StatusCode::OK, "{list}");
        if !list.as_array().unwrap().is_empty() {
            return list.as_array().unwrap().clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no approval was asked for");
}

fn ask(app: &App, key: &str, text: &str) -> tokio::task::JoinHandle<(StatusCode, String)> {
    let url = app.url("/api/agency/clerk/chat/completions");
    let (key, text) = (key.to_string(), text.to_string());
    tokio::spawn(async move {
        let res = reqwest::Client::new()
            .post(url)
            .bearer_auth(key)
            .json(&json!({ "model": "clerk", "messages": [{ "role": "user", "content": text }] }))
            .send()
            .await
            .unwrap();
        let (status, body) = read(res).await;
        let answer = body["choices"][0]["message"]["content"]
            .as_str()
            .map_or_else(|| body.to_string(), str::to_string);
        (status, answer)
    })
}

#[tokio::test]
async fn a_chat_completion_waits_for_an_approval_given_through_the_api() {
    let app = App::spawn().await;
    let key = clerk_key(&app, None).await;
    let asked = ask(&app, &key, "pay 5 dollars");
    let list = pending(&app).await;
    assert_eq!(list.len(), 1, "{list:?}");
    let a = &list[0];
    assert_eq!(a["tool"], json!("builtin/echo"));
    assert_eq!(a["state"], json!("pending"));
    assert_eq!(a["on_timeout"], json!("deny"));
    assert_eq!(
        (&a["agency_name"], &a["agent_name"]),
        (&json!("clerk"), &json!("clerk"))
    );
    let args: Value = serde_json::from_str(a["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({ "text": "pay 5 dollars" }));
    let id = a["id"].as_str().unwrap();

    // Another account does not see it, nor answer it.
    let other = signed_up(&app.base, "bo@example.com").await;
    let (_, theirs) = read(other.get(app.url("/api/approvals")).send().await.unwrap()).await;
    assert_eq!(theirs, json!([]));
    let res = other
        .post(app.url(&format!("/api/approvals/{id}/approve")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    // Edits need the policy's leave.
    let (status, refused) = app
        .send(
            app.client
                .post(app.url(&format!("/api/approvals/{id}/approve")))
                .json(&json!({ "arguments": { "text": "pay 500 dollars" } })),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");

    let (status, approved) = app
        .send(
            app.client
                .post(app.url(&format!("/api/approvals/{id}/approve"))),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["state"], json!("approved"));
    assert_eq!(approved["answered_by"], json!("ada@example.com"));
    let (status, answer) = asked.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer, "Echoed: pay 5 dollars");

    // The first answer stands.
    let (status, again) = app
        .send(
            app.client
                .post(app.url(&format!("/api/approvals/{id}/deny")))
                .json(&json!({ "reason": "changed my mind" })),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    let (_, list) = app.get("/api/approvals").await;
    assert_eq!(list, json!([]));

    // The turn keeps its audit: who approved what, when, with which arguments; it went out.
    let conversation = approved["conversation_id"].as_str().unwrap();
    let (status, turn) = app
        .get(&format!("/api/conversations/{conversation}/turns/1"))
        .await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    let audit = &turn["approvals"][0];
    assert_eq!(audit["id"], json!(id));
    assert_eq!(audit["state"], json!("approved"));
    assert_eq!(audit["answered_by"], json!("ada@example.com"));
    assert!(
        audit["answered_at"].is_string() && audit["started_at"].is_string(),
        "{audit}"
    );
    assert_eq!(audit["failed"], json!(false));
    assert_eq!(audit["arguments"], a["arguments"]);
}

#[tokio::test]
async fn a_denied_call_tells_the_agent_why_and_an_unanswered_one_is_denied_at_its_timeout() {
    let app = App::spawn().await;
    let key = clerk_key(&app, Some(1)).await;
    let asked = ask(&app, &key, "delete everything");
    let id = pending(&app).await[0]["id"].as_str().unwrap().to_string();
    let (status, denied) = app
        .send(
            app.client
                .post(app.url(&format!("/api/approvals/{id}/deny")))
                .json(&json!({ "reason": "too risky" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{denied}");
    assert_eq!(denied["state"], json!("denied"));
    assert_eq!(denied["reason"], json!("too risky"));
    let (status, answer) = asked.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        answer,
        "Echoed: Not run: a person denied it. Their reason: too risky"
    );

    // Nobody answers: at the policy's timeout (1 s) the call is denied and the turn goes on.
    let (status, answer) = ask(&app, &key, "again").await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer, "Echoed: Not run: nobody approved it in time.");
    let (_, list) = app.get("/api/approvals").await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn a_streamed_chat_completion_keeps_alive_while_it_waits() {
    let app = App::spawn().await;
    let key = clerk_key(&app, None).await;
    let url = app.url("/api/agency/clerk/chat/completions");
    let streamed = tokio::spawn(async move {
        let res = reqwest::Client::new()
            .post(url)
            .bearer_auth(key)
            .json(&json!({ "model": "clerk", "stream": true,
                           "messages": [{ "role": "user", "content": "ship it" }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.text().await.unwrap()
    });
    let id = pending(&app).await[0]["id"].as_str().unwrap().to_string();
    let (status, _) = app
        .send(
            app.client
                .post(app.url(&format!("/api/approvals/{id}/approve"))),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let text = streamed.await.unwrap();
    let content: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, "Echoed: ship it");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

#[tokio::test]
async fn a_webhook_is_told_signed_and_its_receiver_answers_with_the_key() {
    let app = App::spawn().await;
    let key = clerk_key(&app, None).await;
    // A receiver on loopback: each request's headers and body, as they come.
    let (tx, mut told) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let receiver = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((headers, body));
                StatusCode::NO_CONTENT
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let put = |url: Value| {
        app.send(
            app.client
                .put(app.url("/api/agencies/clerk/approval-webhook"))
                .json(&json!({ "url": url })),
        )
    };
    let (status, refused) = put(json!("ftp://example.com/hook")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let (status, first) = put(json!(hook)).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, set) = put(json!(hook)).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    let secret = set["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{set}");
    assert_ne!(first["secret"], set["secret"], "set again, a new secret");
    let (status, shown) = app.get("/api/agencies/clerk/approval-webhook").await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["url"], json!(hook));
    assert!(
        shown.get("secret").is_none(),
        "the secret is shown once: {shown}"
    );

    let asked = ask(&app, &key, "pay 5 dollars");
    let (headers, body) = tokio::time::timeout(Duration::from_secs(30), told.recv())
        .await
        .expect("the webhook was told")
        .unwrap();
    let header = |name: &str| headers[name].to_str().unwrap().to_string();
    assert!(
        agency_runtime::approvals::webhook::verify(
            &secret,
            &header("webhook-id"),
            &header("webhook-timestamp"),
            &body,
            &header("webhook-signature"),
        ),
        "signed with the secret: {headers:?}"
    );
    assert!(
        !agency_runtime::approvals::webhook::verify(
            first["secret"].as_str().unwrap(),
            &header("webhook-id"),
            &header("webhook-timestamp"),
            &body,
            &header("webhook-signature"),
        ),
        "not with the one it replaced"
    );
    let event: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(event["type"], json!("approval.requested"));
    let data = &event["data"];
    assert_eq!(header("webhook-id"), data["id"].as_str().unwrap());
    assert_eq!(
        (&data["tool"], &data["agent_name"], &data["agency_name"]),
        (&json!("builtin/echo"), &json!("clerk"), &json!("clerk"))
    );
    let args: Value = serde_json::from_str(data["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({ "text": "pay 5 dollars" }));

    // Another agency's key cannot answer it; the agency's key can.
    let (_, studio_key) = app
        .send(
            app.client
                .post(app.url("/api/agencies/studio/keys"))
                .json(&json!({ "name": "other" })),
        )
        .await;
    let answer = |key: String| {
        reqwest::Client::new()
            .post(app.url(data["approve"].as_str().unwrap()))
            .bearer_auth(key)
            .send()
    };
    let res = answer(studio_key["key"].as_str().unwrap().to_string())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let (status, approved) = read(answer(key.clone()).await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["answered_by"], json!("API key app"));
    let (status, answer) = asked.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer, "Echoed: pay 5 dollars");

    let res = app
        .client
        .delete(app.url("/api/agencies/clerk/approval-webhook"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let (status, _) = app.get("/api/agencies/clerk/approval-webhook").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
