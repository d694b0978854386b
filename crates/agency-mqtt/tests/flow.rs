//! Spec 002's example flow against a real broker (Mosquitto in CI), driven by a stock MQTT
//! client: initialize, `exists`, chat, progress, the metadata-only response, the content over
//! HTTP; a conversation with one agent alone; malformed payloads; cancelling a running turn;
//! a provider's retry as a progress update; a tool call that waits for a person's approval,
//! answered on `CMD/chat_approval`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Client, Gate, GateProvider, Server, Setup, broker, keys, plant_on};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_example_flow_with_the_manager() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    client.wait_for_server(&server.manager).await;
    let m = server.manager.clone();
    let cid = uuid::Uuid::now_v7().to_string();

    // 1. Initialize.
    let init = json!({"agent_id": m, "conversation_id": cid, "content": " "});
    client
        .send_json(&format!("CMD/chat_new/{m}"), init.clone())
        .await;
    let progress = format!("EVT/chat_progress/{m}/{cid}");
    let first = client.next(&progress).await;
    assert_eq!(first["status"], "initialized");
    assert_eq!(first["conversation_id"], cid.as_str());
    assert_eq!(first["agent_id"], m.as_str());
    assert!(
        first["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    // The same id again: `exists`, on the progress topic.
    client.send_json(&format!("CMD/chat_new/{m}"), init).await;
    let again = client.next(&progress).await;
    assert_eq!(again["status"], "exists");
    assert_eq!(again["message"], "Conversation Id already exists");

    // 2. A message: progress updates describing the routed turn, then the response.
    let question = "What is the current status of asset XYZ?";
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": question}),
        )
        .await;
    let seen = client.until(&format!("EVT/chat_response/{m}/{cid}")).await;
    let (last_topic, response) = seen.last().unwrap();
    assert!(last_topic.starts_with(&format!("XMAGS/{}/", server.team)));
    assert_eq!(keys(response), ["agent_id", "conversation_id", "timestamp"]);
    assert_eq!(response["conversation_id"], cid.as_str());
    assert!(response["timestamp"].is_i64());
    let updates: Vec<&Value> = seen[..seen.len() - 1]
        .iter()
        .filter(|(t, _)| t.ends_with(&progress))
        .map(|(_, b)| b)
        .collect();
    let statuses: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["status"].as_str())
        .collect();
    assert!(statuses.contains(&"received"), "{statuses:?}");
    assert!(statuses.contains(&"model_call"), "{statuses:?}");
    assert!(statuses.contains(&"answered"), "{statuses:?}");
    let hops: Vec<&str> = updates
        .iter()
        .filter(|u| u["status"] == "routing")
        .filter_map(|u| u["message"].as_str())
        .collect();
    assert_eq!(hops, ["manager → monitor", "monitor → manager"]);
    for u in &updates {
        assert!(u["current_operation"].is_string());
        assert!(
            !u.to_string().contains(question),
            "progress is metadata, not content: {u}"
        );
    }

    // 3. The content, by the conversation's id, with the agency's key.
    let (status, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(status, 200, "{entries}");
    let e = &entries[0];
    assert_eq!(e["user_query"], question);
    // What the manager was sent: the question, framed by the agency's protocol (json).
    let sent: Value = serde_json::from_str(e["prompt"].as_str().unwrap()).unwrap();
    assert_eq!(sent, json!({"from": 0, "context": question}));
    // What it replied, as it wrote it: the answer, addressed to the user.
    let replied: Value = serde_json::from_str(e["reply"].as_str().unwrap()).unwrap();
    assert_eq!(replied["to"], 0, "{e}");
    assert_eq!(e["tools"], json!([]));
    // This plant's agents do not check their chats for observations.
    assert_eq!(e["observations"], json!([]));
    assert_eq!(
        e["response"],
        format!("Status: All normal (Please check: {question})")
    );
    assert_eq!(e["stopped_by"], "answered");
    assert!(e["summary"].as_str().is_some_and(|s| s.contains("monitor")));
    assert!(e["token_usage"]["total_tokens"].is_u64());
    assert!(e["response_time_ms"].is_u64());
    assert!(e["timestamp"].is_string());

    // 4. The next message in the same conversation; the content grows by one entry.
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "And asset ABC?"}),
        )
        .await;
    let response = client.next(&format!("EVT/chat_response/{m}/{cid}")).await;
    assert_eq!(response["agent_id"], m.as_str());
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    let queries: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["user_query"].as_str())
        .collect();
    assert_eq!(queries, [question, "And asset ABC?"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chatting_with_another_agent_is_a_conversation_with_it_alone() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let a = server.agent.clone();
    client.wait_for_server(&a).await;
    let cid = uuid::Uuid::now_v7().to_string();
    client
        .send_json(
            &format!("CMD/chat_new/{a}"),
            json!({"agent_id": a, "conversation_id": cid, "content": " "}),
        )
        .await;
    let progress = format!("EVT/chat_progress/{a}/{cid}");
    assert_eq!(client.next(&progress).await["status"], "initialized");
    client
        .send_json(
            &format!("DATA/chat/{a}/{cid}"),
            json!({"agent_id": a, "conversation_id": cid, "content": "Tank 3 pressure?"}),
        )
        .await;
    let seen = client.until(&format!("EVT/chat_response/{a}/{cid}")).await;
    assert!(
        !seen.iter().any(|(_, b)| b.to_string().contains("manager")),
        "the manager took no part: {seen:?}"
    );
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    // The monitor's only rule addresses the manager, who is not in this conversation: with no
    // rule for the user, the rules model answers the sender with the message.
    assert_eq!(entries[0]["response"], "Tank 3 pressure?");
    assert!(
        entries[0]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("monitor"))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_answers_an_error_and_disturbs_nothing() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let m = server.manager.clone();
    client.wait_for_server(&m).await;
    let error_topic = format!("EVT/error/{m}");
    let cid = uuid::Uuid::now_v7().to_string();

    // Not JSON at all.
    client
        .send(&format!("DATA/chat/{m}/{cid}"), "{not json")
        .await;
    let e = client.next(&error_topic).await;
    assert_eq!(
        keys(&e),
        ["agent_id", "exception_type", "message", "timestamp"]
    );
    assert_eq!(e["exception_type"], "InvalidPayload");
    assert_eq!(e["agent_id"], m.as_str());

    // chat_new without a GUID.
    client
        .send_json(
            &format!("CMD/chat_new/{m}"),
            json!({"agent_id": m, "conversation_id": "not-a-guid", "content": " "}),
        )
        .await;
    let e = client.next(&error_topic).await;
    assert_eq!(e["exception_type"], "InvalidPayload");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|s| s.contains("not-a-guid")),
        "{e}"
    );

    // A chat message to a conversation never initialized: an error, not silence.
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "hello?"}),
        )
        .await;
    let e = client.next(&error_topic).await;
    assert_eq!(e["exception_type"], "ConversationNotInitialized");

    // An agent the team does not have.
    client
        .send_json(
            "CMD/chat_new/NOBODY-01",
            json!({"conversation_id": cid, "content": " "}),
        )
        .await;
    let e = client.next("EVT/error/NOBODY-01").await;
    assert_eq!(e["exception_type"], "UnknownAgent");

    // Nothing else was disturbed: the same conversation id still initializes and chats.
    client
        .send_json(
            &format!("CMD/chat_new/{m}"),
            json!({"agent_id": m, "conversation_id": cid, "content": " "}),
        )
        .await;
    assert_eq!(
        client.next(&format!("EVT/chat_progress/{m}/{cid}")).await["status"],
        "initialized"
    );
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "status?"}),
        )
        .await;
    client.next(&format!("EVT/chat_response/{m}/{cid}")).await;
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(entries.as_array().map(Vec::len), Some(1));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_content_needs_the_agencys_key() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let cid = uuid::Uuid::now_v7();
    let url = format!("{}/api/conversations/{cid}/entries", server.http);
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = reqwest::Client::new()
        .get(&url)
        .bearer_auth("agk_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let (status, _) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(status, 404);
    server.stop().await;
}

/// The progress statuses among `seen`.
fn statuses(seen: &[(String, Value)]) -> Vec<String> {
    seen.iter()
        .filter(|(t, _)| t.contains("/EVT/chat_progress/"))
        .filter_map(|(_, b)| b["status"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_cancel_ends_a_running_turn_and_the_conversation_goes_on() {
    let Some((host, port)) = broker().await else {
        return;
    };
    // The manager's model blocks until the test opens the gate.
    let gate = Gate::new(r#"{"to": 0, "context": "done"}"#);
    let mut server = Server::start_with(
        &host,
        port,
        Setup {
            providers: vec![("gate".into(), Arc::new(GateProvider(gate.clone())))],
            yaml: Some(|name, team| plant_on("gate", name, team)),
            ..Setup::default()
        },
    )
    .await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let m = server.manager.clone();
    client.wait_for_server(&m).await;
    let cid = uuid::Uuid::now_v7().to_string();
    let (progress, response, error) = (
        format!("EVT/chat_progress/{m}/{cid}"),
        format!("EVT/chat_response/{m}/{cid}"),
        format!("EVT/error/{m}"),
    );
    let cancel = format!("CMD/chat_cancel/{m}/{cid}");

    // A conversation never initialized has nothing to cancel.
    client.send(&cancel, "").await;
    assert_eq!(
        client.next(&error).await["exception_type"],
        "ConversationNotInitialized"
    );
    client
        .send_json(
            &format!("CMD/chat_new/{m}"),
            json!({"agent_id": m, "conversation_id": cid, "content": " "}),
        )
        .await;
    assert_eq!(client.next(&progress).await["status"], "initialized");
    // Initialized, but no turn is running: an error that says so, not silence.
    client
        .send_json(&cancel, json!({"agent_id": m, "conversation_id": cid}))
        .await;
    let e = client.next(&error).await;
    assert_eq!(e["exception_type"], "NoRunningTurn");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|s| s.contains(&cid) && s.contains("no turn running")),
        "{e}"
    );

    // A turn whose manager is working (blocked): the cancel ends it.
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "a long question"}),
        )
        .await;
    loop {
        if client.next(&progress).await["status"] == "model_call" {
            break;
        }
    }
    client.send(&cancel, "").await;
    let seen = client.until(&response).await;
    let st = statuses(&seen);
    assert_eq!(st.last().map(String::as_str), Some("cancelled"), "{st:?}");
    assert!(!st.contains(&"answered".to_string()), "{st:?}");
    let cancelled = &seen[seen.len() - 2].1;
    assert_eq!(cancelled["current_operation"], "cancel");
    assert_eq!(
        keys(&seen[seen.len() - 1].1),
        ["agent_id", "conversation_id", "timestamp"]
    );
    assert!(
        !seen.iter().any(|(t, _)| t.ends_with(&error)),
        "a running turn's cancel is no error: {seen:?}"
    );
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(entries[0]["stopped_by"], "cancelled");
    assert_eq!(entries[0]["response"], Value::Null);

    // The turn is over: another cancel has nothing to cancel.
    client.send(&cancel, "").await;
    assert_eq!(client.next(&error).await["exception_type"], "NoRunningTurn");

    // The manager's call returns late (kept for the record); the next message is answered.
    gate.open();
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "and now?"}),
        )
        .await;
    let seen = client.until(&response).await;
    assert!(statuses(&seen).contains(&"answered".to_string()));
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    let ends: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["stopped_by"].as_str())
        .collect();
    assert_eq!(ends, ["cancelled", "answered"]);
    assert_eq!(entries[1]["response"], "done");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_retries_are_progress_updates() {
    use agency_fakes::{Fake, openai};
    use agency_providers::http::HttpSettings;
    use agency_providers::openai::{OpenAi, OpenAiConfig};

    let Some((host, port)) = broker().await else {
        return;
    };
    // A rate limit, a server error, then the answer.
    let fake = Fake::start().await;
    fake.push(openai::rate_limited(0))
        .push(openai::server_error())
        .otherwise(openai::completion(r#"{"to": 0, "context": "fine"}"#, 3, 2));
    let mut config = OpenAiConfig::new(Some(&format!("{}/v1", fake.url)), None);
    config.http = HttpSettings {
        max_retries: 2,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(20),
        ..HttpSettings::default()
    };
    let provider = OpenAi::new("fake", config).unwrap();
    let mut server = Server::start_with(
        &host,
        port,
        Setup {
            providers: vec![("fake".into(), Arc::new(provider))],
            yaml: Some(|name, team| plant_on("fake", name, team)),
            ..Setup::default()
        },
    )
    .await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let m = server.manager.clone();
    client.wait_for_server(&m).await;
    let (cid, seen) = client.converse(&m, "status?").await;
    let retries: Vec<&Value> = seen
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b["status"] == "retry")
        .collect();
    let messages: Vec<&str> = retries
        .iter()
        .filter_map(|r| r["message"].as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "manager's model call failed (HTTP 429); trying again (attempt 2)",
            "manager's model call failed (HTTP 500); trying again (attempt 3)"
        ]
    );
    assert!(
        retries
            .iter()
            .all(|r| r["current_operation"] == "model_call")
    );
    // Metadata only: not the provider's own error text.
    assert!(
        !seen
            .iter()
            .any(|(_, b)| b.to_string().contains(openai::SERVER_ERROR_MESSAGE))
    );
    let st = statuses(&seen);
    assert_eq!(st.last().map(String::as_str), Some("answered"), "{st:?}");
    assert_eq!(fake.requests().len(), 3);
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(entries[0]["response"], "fine");
    server.stop().await;
}

/// A clerk whose every echo waits for a person's approval.
fn clerk_on(name: &str, team: &str) -> String {
    format!(
        r#"
name: {name}
handle: {team}
manager: manager
agents:
  - name: manager
    handle: MGR-001
    model: builtin/rules
    tools: [builtin/echo]
    approve: [builtin/echo]
    rules:
      - {{ when: user, call: builtin/echo, with: {{ text: "{{{{message}}}}" }}, do: "Echoed: {{{{result}}}}", send_to: user }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_approval_is_answered_on_its_command_topic() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start_with(
        &host,
        port,
        Setup {
            yaml: Some(clerk_on),
            ..Setup::default()
        },
    )
    .await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let m = server.manager.clone();
    client.wait_for_server(&m).await;
    let cid = uuid::Uuid::now_v7().to_string();
    let (progress, response, error) = (
        format!("EVT/chat_progress/{m}/{cid}"),
        format!("EVT/chat_response/{m}/{cid}"),
        format!("EVT/error/{m}"),
    );
    let answer = format!("CMD/chat_approval/{m}/{cid}");
    client
        .send_json(
            &format!("CMD/chat_new/{m}"),
            json!({"agent_id": m, "conversation_id": cid, "content": " "}),
        )
        .await;
    assert_eq!(client.next(&progress).await["status"], "initialized");
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "pay 5 dollars"}),
        )
        .await;
    // The call waits: its progress says so, with the approval's id and no arguments (progress
    // is metadata only).
    let asked = loop {
        let p = client.next(&progress).await;
        if p["status"] == "awaiting_approval" {
            break p;
        }
    };
    assert_eq!(asked["current_operation"], "approval");
    let approval = asked["approval_id"].as_str().unwrap().to_string();
    let message = asked["message"].as_str().unwrap();
    assert!(
        message.contains("builtin/echo") && message.contains(&approval),
        "{asked}"
    );
    assert!(!asked.to_string().contains("pay 5"), "{asked}");

    // Bad answers: each an error, and the call still waits.
    client
        .send_json(&answer, json!({"approval_id": approval}))
        .await;
    assert_eq!(
        client.next(&error).await["exception_type"],
        "InvalidPayload"
    );
    client
        .send_json(
            &answer,
            json!({"approval_id": uuid::Uuid::now_v7().to_string(), "approve": true}),
        )
        .await;
    let e = client.next(&error).await;
    assert_eq!(e["exception_type"], "InvalidPayload");
    assert!(
        e["message"].as_str().unwrap().contains("no approval"),
        "{e}"
    );
    client
        .send_json(
            &answer,
            json!({"approval_id": approval, "approve": true, "arguments": {"text": "pay 500"}}),
        )
        .await;
    assert_eq!(
        client.next(&error).await["exception_type"],
        "InvalidRequest"
    );

    // Denied, with why: the progress says so, the agent read it, the turn answers.
    client
        .send_json(
            &answer,
            json!({"agent_id": m, "conversation_id": cid, "approval_id": approval, "approve": false, "reason": "too much"}),
        )
        .await;
    let seen = client.until(&response).await;
    let denied = seen
        .iter()
        .find(|(_, b)| b["status"] == "denied")
        .unwrap_or_else(|| panic!("no `denied` progress: {seen:?}"));
    assert_eq!(denied.1["approval_id"], approval.as_str());
    assert!(
        denied.1["message"]
            .as_str()
            .unwrap()
            .contains("denied by MQTT"),
        "{denied:?}"
    );
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(
        entries[0]["response"],
        "Echoed: Not run: a person denied it. Their reason: too much"
    );
    // Answered already: a second answer changes nothing and says so.
    client
        .send_json(&answer, json!({"approval_id": approval, "approve": true}))
        .await;
    assert_eq!(client.next(&error).await["exception_type"], "Conflict");
    server.stop().await;
}
