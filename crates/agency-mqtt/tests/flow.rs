//! Spec 002's example flow against a real broker (Mosquitto in CI), driven by a stock MQTT
//! client: initialize, `exists`, chat, progress, the metadata-only response, the content over
//! HTTP; a conversation with one agent alone; malformed payloads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, Server, broker, keys};
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
    assert_eq!(e["prompt"], question);
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
