//! The embedded broker (`--mqtt embedded`): the spec's chat flow and an observation with a
//! stock client, with nothing installed.
#![cfg(feature = "embedded")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, Server};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_flow_on_the_embedded_broker() {
    let port = common::embedded_broker().await;
    let mut server = Server::start("127.0.0.1", port).await;
    let mut client = Client::connect("127.0.0.1", port, &server.team).await;
    let (m, a) = (server.manager.clone(), server.agent.clone());
    client.wait_for_server(&m).await;

    let cid = uuid::Uuid::now_v7().to_string();
    let init = json!({"agent_id": m, "conversation_id": cid, "content": " "});
    client
        .send_json(&format!("CMD/chat_new/{m}"), init.clone())
        .await;
    let progress = format!("EVT/chat_progress/{m}/{cid}");
    assert_eq!(client.next(&progress).await["status"], "initialized");
    client.send_json(&format!("CMD/chat_new/{m}"), init).await;
    assert_eq!(client.next(&progress).await["status"], "exists");
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "status of XYZ?"}),
        )
        .await;
    let response = client.next(&format!("EVT/chat_response/{m}/{cid}")).await;
    assert_eq!(response["conversation_id"], cid.as_str());
    let (status, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(entries[0]["user_query"], "status of XYZ?");

    client
        .send_json(
            &format!("DATA/observation/{a}"),
            json!({"content": "Valve 9 alarm", "agent_id": a}),
        )
        .await;
    let r = client.next(&format!("EVT/observation_result/{a}")).await;
    assert_eq!(r["importance"], 0.9);

    // Messages that finish out of order (a turn, and an observation behind it) are still
    // acknowledged in order: this broker drops a connection that does otherwise, and would
    // deliver the messages again.
    client
        .send_json(
            &format!("DATA/chat/{m}/{cid}"),
            json!({"agent_id": m, "conversation_id": cid, "content": "and now?"}),
        )
        .await;
    client
        .send_json(
            &format!("DATA/observation/{a}"),
            json!({"content": "Valve 9 leak"}),
        )
        .await;
    client
        .send_json(
            &format!("DATA/observation/{a}"),
            json!({"content": "Valve 9 fine"}),
        )
        .await;
    // Whatever order they come in: two observation results and the response.
    let mut seen = Vec::new();
    let done = |seen: &Vec<(String, serde_json::Value)>| {
        seen.iter()
            .filter(|(t, _)| t.contains("observation_result"))
            .count()
            == 2
            && seen.iter().any(|(t, _)| t.contains("chat_response"))
    };
    while !done(&seen) {
        seen.extend(client.until("").await);
    }
    let results: Vec<_> = seen
        .iter()
        .filter(|(t, _)| t.contains("observation_result"))
        .map(|(_, v)| v["importance"].clone())
        .collect();
    assert_eq!(results, [json!(0.9), json!(0.3)]);
    let agencies = server.rt.agencies();
    let agency = agencies.draft(
        server
            .store
            .list_agencies(agency_runtime::LOCAL_OWNER)
            .await
            .unwrap()[0]
            .0
            .id,
    );
    let agency = agency.await.unwrap();
    let monitor = agency.agent_by_handle(&a).unwrap().id;
    let stored = server
        .store
        .memories_since(agency.id, monitor, chrono::DateTime::UNIX_EPOCH, 100)
        .await
        .unwrap();
    // Each observation once: nothing was delivered twice.
    let observations = stored
        .iter()
        .filter(|m| m.kind == agency_core::memory::MemoryKind::Observation)
        .count();
    assert_eq!(observations, 3, "{stored:?}");
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(entries.as_array().map(Vec::len), Some(2));

    // A second server cannot take the same address.
    assert!(agency_mqtt::embedded::start(([127, 0, 0, 1], port).into()).is_err());
    server.stop().await;
}
