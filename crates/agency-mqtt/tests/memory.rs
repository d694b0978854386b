//! Spec 002's observe → reflect → plan cycle against a real broker (Mosquitto in CI), driven by
//! a stock MQTT client, with the content read back over HTTP. The agents run on the built-in
//! rules model, which rates an observation with an alert word 0.9 and any other 0.3.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, Server, broker};
use serde_json::{Value, json};

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observation_is_rated_stored_and_announced() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let a = server.agent.clone();
    client.wait_for_server(&a).await;

    let text = "Asset XYZ temperature has exceeded normal operating range";
    client
        .send_json(
            &format!("DATA/observation/{a}"),
            json!({"content": text, "agent_id": a}),
        )
        .await;
    let r = client.next(&format!("EVT/observation_result/{a}")).await;
    assert_eq!(
        keys(&r),
        ["agent_id", "importance", "observation_id", "timestamp"]
    );
    assert_eq!(r["agent_id"], a.as_str());
    assert_eq!(r["importance"], 0.9);
    let id = r["observation_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok());

    // The content, by id, with the agency's key.
    let (status, m) = server.get(&format!("/api/memories/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(m["id"], id.as_str());
    assert_eq!(m["type"], "observation");
    assert_eq!(m["agent_id"], a.as_str());
    assert_eq!(m["content"], text);
    assert_eq!(m["importance"], 0.9);
    assert_eq!(m["sources"], json!([]));
    let r = reqwest::get(format!("{}/api/memories/{id}", server.http))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let (status, _) = server
        .get(&format!("/api/memories/{}", uuid::Uuid::now_v7()))
        .await;
    assert_eq!(status, 404);

    // Team-wide, naming the agent in the payload: a mundane one.
    client
        .send_json(
            "DATA/observation",
            json!({"content": "The shift changed", "agent_id": a}),
        )
        .await;
    let r = client.next(&format!("EVT/observation_result/{a}")).await;
    assert_eq!(r["importance"], 0.3);

    // Team-wide without an agent: every agent observes it.
    client
        .send_json("DATA/observation", json!({"content": "Visitors on site"}))
        .await;
    // In the agency's order: the manager, then the monitor.
    let m = server.manager.clone();
    let r = client.next(&format!("EVT/observation_result/{m}")).await;
    assert_eq!(r["agent_id"], m.as_str());
    let r = client.next(&format!("EVT/observation_result/{a}")).await;
    assert_eq!(r["agent_id"], a.as_str());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_observation_answers_an_error() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let a = server.agent.clone();
    client.wait_for_server(&a).await;

    client
        .send(&format!("DATA/observation/{a}"), "{not json")
        .await;
    let e = client.next(&format!("EVT/error/{a}")).await;
    assert_eq!(e["exception_type"], "InvalidPayload");

    client
        .send_json(&format!("DATA/observation/{a}"), json!({"content": "  "}))
        .await;
    let e = client.next(&format!("EVT/error/{a}")).await;
    assert_eq!(e["exception_type"], "InvalidPayload");

    client
        .send_json(
            "DATA/observation",
            json!({"content": "x", "agent_id": "NOBODY-01"}),
        )
        .await;
    let e = client.next("EVT/error/NOBODY-01").await;
    assert_eq!(e["exception_type"], "UnknownAgent");

    // Still observing.
    client
        .send_json(
            &format!("DATA/observation/{a}"),
            json!({"content": "all fine"}),
        )
        .await;
    let r = client.next(&format!("EVT/observation_result/{a}")).await;
    assert_eq!(r["importance"], 0.3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observations_past_the_threshold_trigger_a_reflection() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let a = server.agent.clone();
    client.wait_for_server(&a).await;

    // The default threshold is 2.0; the rules model rates each of these 0.9.
    let texts = [
        "Fermenter 2 temperature exceeded 40 C",
        "Fermenter 2 cooling pump failure",
        "Fermenter 2 pressure alarm",
    ];
    let mut ids = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        client
            .send_json(
                &format!("DATA/observation/{a}"),
                json!({"content": text, "agent_id": a}),
            )
            .await;
        let seen = client.until(&format!("EVT/observation_result/{a}")).await;
        let (_, r) = seen.last().unwrap();
        ids.push(r["observation_id"].as_str().unwrap().to_string());
        if i < 2 {
            // No reflection yet: nothing else came before the result.
            assert!(
                seen.iter().all(|(t, _)| !t.contains("reflection_result")),
                "{seen:?}"
            );
        }
    }
    let r = client.next(&format!("EVT/reflection_result/{a}")).await;
    assert_eq!(
        keys(&r),
        ["agent_id", "importance", "reflection_id", "timestamp"]
    );
    assert_eq!(r["agent_id"], a.as_str());
    assert_eq!(r["importance"], 0.9);
    let rid = r["reflection_id"].as_str().unwrap();
    let (status, m) = server.get(&format!("/api/memories/{rid}")).await;
    assert_eq!(status, 200);
    assert_eq!(m["type"], "reflection");
    assert_eq!(m["sources"], json!(ids));
    assert_eq!(
        m["content"],
        format!("3 observations to act on: {}", texts.join("; "))
    );
    server.stop().await;
}
