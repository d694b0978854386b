//! Spec 002's observe → reflect → plan cycle against a real broker (Mosquitto in CI), driven by
//! a stock MQTT client, with the content read back over HTTP. The agents run on the built-in
//! rules model, which rates an observation with an alert word 0.9 and any other 0.3.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, Server, broker, keys};
use serde_json::{Value, json};

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

/// The message on the topic ending with `suffix` among `seen`.
fn find<'a>(seen: &'a [(String, Value)], suffix: &str) -> &'a Value {
    &seen
        .iter()
        .find(|(t, _)| t.ends_with(suffix))
        .unwrap_or_else(|| panic!("nothing on …{suffix} in {seen:?}"))
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observations_trigger_a_reflection_and_a_plan() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let team = server.team.clone();
    let mut client = Client::connect_to(
        &host,
        port,
        &team,
        &[
            format!("XMAGS/{team}/EVT/#"),
            format!("XMAGS/{team}/CMD/plan_task"),
            format!("XMAGS/{team}/CMD/plan_action"),
        ],
    )
    .await;
    let a = server.agent.clone();
    client.wait_for_server(&a).await;

    // The default threshold is 2.0; the rules model rates each of these 0.9.
    let texts = [
        "Fermenter 2 temperature exceeded 40 C",
        "Fermenter 2 cooling pump failure",
        "Fermenter 2 pressure alarm",
    ];
    let mut ids = Vec::new();
    let mut seen = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        client
            .send_json(
                &format!("DATA/observation/{a}"),
                json!({"content": text, "agent_id": a}),
            )
            .await;
        seen = if i < 2 {
            client.until(&format!("EVT/observation_result/{a}")).await
        } else {
            client.until("CMD/plan_action").await
        };
        let r = find(&seen, &format!("EVT/observation_result/{a}"));
        ids.push(r["observation_id"].as_str().unwrap().to_string());
        if i < 2 {
            // No reflection yet: nothing else came with the result.
            assert_eq!(seen.len(), 1, "{seen:?}");
        }
    }

    // The reflection: metadata on the broker, content over HTTP.
    let r = find(&seen, &format!("EVT/reflection_result/{a}"));
    assert_eq!(
        keys(r),
        ["agent_id", "importance", "reflection_id", "timestamp"]
    );
    assert_eq!(r["agent_id"], a.as_str());
    assert_eq!(r["importance"], 0.9);
    let rid = r["reflection_id"].as_str().unwrap().to_string();
    let (status, m) = server.get(&format!("/api/memories/{rid}")).await;
    assert_eq!(status, 200);
    assert_eq!(m["type"], "reflection");
    assert_eq!(m["sources"], json!(ids));
    assert_eq!(
        m["content"],
        format!("3 observations to act on: {}", texts.join("; "))
    );

    // The plan it led to: announced, then distributed to the team.
    let new = find(&seen, &format!("EVT/plan_new/{a}"));
    assert_eq!(
        keys(new),
        ["active", "agent_id", "plan_id", "status", "timestamp"]
    );
    assert_eq!(new["active"], true);
    assert_eq!(new["status"], "Active");
    let plan_id = new["plan_id"].as_str().unwrap().to_string();
    assert!(plan_id.starts_with("plan_"));
    let task = find(&seen, "CMD/plan_task");
    assert_eq!(
        keys(task),
        [
            "active",
            "pddl_actions",
            "plan_id",
            "source_agent_id",
            "status",
            "timestamp"
        ]
    );
    assert_eq!(task["plan_id"], plan_id.as_str());
    assert_eq!(task["source_agent_id"], a.as_str());
    assert_eq!(task["status"], "new");
    let pddl = task["pddl_actions"].as_str().unwrap();
    let ground: Vec<&str> = pddl.lines().filter(|l| !l.starts_with(';')).collect();
    assert_eq!(
        ground,
        [
            "(investigate observation-1)",
            "(report observation-1 manager)",
            "(investigate observation-2)",
            "(report observation-2 manager)",
            "(investigate observation-3)",
            "(report observation-3 manager)"
        ]
    );
    let action = find(&seen, "CMD/plan_action");
    assert_eq!(
        keys(action),
        ["plan_id", "source_agent_id", "status", "tasks", "timestamp"]
    );
    assert_eq!(action["status"], "new");
    let tasks = action["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    assert_eq!(tasks[0]["description"], format!("Follow up: {}", texts[0]));
    assert_eq!(tasks[0]["status"], "Pending");
    assert!(tasks[0]["id"].as_str().unwrap().starts_with("task_"));

    // The active plan over HTTP.
    let (status, p) = server.get(&format!("/api/agents/{a}/plan")).await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["plan_id"], plan_id.as_str());
    assert_eq!(p["agent_id"], a.as_str());
    assert_eq!(p["status"], "Active");
    assert_eq!(p["reflection_id"], rid.as_str());
    assert_eq!(p["pddl_actions"], pddl);
    assert_eq!(p["tasks"].as_array().unwrap().len(), 3);
    assert_eq!(p["tasks"][0]["id"], tasks[0]["id"]);
    assert_eq!(
        p["tasks"][0]["actions"][1],
        json!({"name": "report", "parameters": ["observation-1", "manager"], "pddl": "(report observation-1 manager)"})
    );

    // Three more: a second reflection adjusts the same plan.
    for text in ["Pump 7 leak", "Pump 7 overheat", "Pump 7 stopped"] {
        client
            .send_json(&format!("DATA/observation/{a}"), json!({"content": text}))
            .await;
    }
    let seen = client.until("CMD/plan_action").await;
    let update = find(&seen, &format!("EVT/plan_update/{a}"));
    assert_eq!(update["plan_id"], plan_id.as_str());
    assert_eq!(update["status"], "Updated");
    assert_eq!(update["active"], true);
    assert_eq!(find(&seen, "CMD/plan_task")["status"], "adjusted");
    let action = find(&seen, "CMD/plan_action");
    assert_eq!(action["status"], "adjusted");
    let statuses: Vec<&str> = action["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "Cancelled",
            "Cancelled",
            "Cancelled",
            "Pending",
            "Pending",
            "Pending"
        ]
    );
    let (_, p) = server.get(&format!("/api/agents/{a}/plan")).await;
    assert_eq!(p["status"], "Updated");
    let descriptions: Vec<&str> = p["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["description"].as_str().unwrap())
        .collect();
    assert_eq!(
        descriptions,
        [
            "Follow up: Pump 7 leak",
            "Follow up: Pump 7 overheat",
            "Follow up: Pump 7 stopped"
        ]
    );

    // Another agent has no plan; the plan needs the key.
    let (status, _) = server
        .get(&format!("/api/agents/{}/plan", server.manager))
        .await;
    assert_eq!(status, 404);
    let (status, _) = server.get("/api/agents/NOBODY-01/plan").await;
    assert_eq!(status, 404);
    let r = reqwest::get(format!("{}/api/agents/{a}/plan", server.http))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    server.stop().await;
}

/// The plant with a manager that checks what it is told in chats for observations.
fn observant_plant(name: &str, team: &str) -> String {
    common::agency_yaml(name, team).replacen(
        "handle: MGR-001\n",
        "handle: MGR-001\n    observe_chats: true\n",
        1,
    )
}

/// Spec 002's `observation check`: after each chat message the manager checks it for an
/// observation (the rules model: a statement is one, a question is not), records it as
/// `DATA/observation` would — announced before the response, listed in the turn's entry — and
/// three alarming ones lead to a reflection, as three `DATA/observation` messages do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_lead_to_observations_and_a_reflection() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let setup = common::Setup {
        yaml: Some(observant_plant),
        ..common::Setup::default()
    };
    let mut server = Server::start_with(&host, port, setup).await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let m = server.manager.clone();
    client.wait_for_server(&m).await;

    // A question: checked, nothing observed.
    let (cid, seen) = client.converse(&m, "status of XYZ?").await;
    let check = find(&seen, &format!("EVT/chat_progress/{m}/{cid}"));
    assert!(
        seen.iter()
            .any(|(t, v)| t.ends_with(&format!("chat_progress/{m}/{cid}"))
                && v["status"] == "observation check"
                && v["current_operation"] == "observation"
                && v["message"]
                    == "Verifying if an observation is required based on the information received"),
        "{seen:?} (first progress: {check})"
    );
    assert!(!seen.iter().any(|(t, _)| t.contains("observation_result")));
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    assert_eq!(entries[0]["observations"], json!([]), "{entries}");

    let texts = [
        "Fermenter 2 temperature exceeded 40 C",
        "Fermenter 2 cooling pump failure",
        "Fermenter 2 pressure alarm",
    ];
    let mut ids = Vec::new();
    let mut last = Vec::new();
    for text in texts {
        let (cid, seen) = client.converse(&m, text).await;
        let at = |suffix: &str| seen.iter().position(|(t, _)| t.ends_with(suffix));
        let check = seen
            .iter()
            .position(|(_, v)| v["status"] == "observation check")
            .unwrap_or_else(|| panic!("no observation check in {seen:?}"));
        let result = at(&format!("EVT/observation_result/{m}")).expect("an observation");
        let response = at(&format!("EVT/chat_response/{m}/{cid}")).unwrap();
        assert!(check < result && result < response, "{seen:?}");
        let r = &seen[result].1;
        assert_eq!(r["importance"], 0.9);
        let id = r["observation_id"].as_str().unwrap().to_string();

        // The entry lists it; its content is the message, as the rules model observes it.
        let (status, entries) = server
            .get(&format!("/api/conversations/{cid}/entries"))
            .await;
        assert_eq!(status, 200);
        let observed = &entries[0]["observations"];
        assert_eq!(observed.as_array().map(Vec::len), Some(1), "{entries}");
        assert_eq!(observed[0]["id"], id.as_str());
        assert_eq!(observed[0]["type"], "observation");
        assert_eq!(observed[0]["agent_id"], m.as_str());
        assert_eq!(observed[0]["content"], text);
        let (_, memory) = server.get(&format!("/api/memories/{id}")).await;
        assert_eq!(memory["content"], text);
        ids.push(id);
        last = seen;
    }

    // The third passes the threshold (3 × 0.9 ≥ 2.0): a reflection from the three.
    let r = find(&last, &format!("EVT/reflection_result/{m}"));
    let rid = r["reflection_id"].as_str().unwrap().to_string();
    let (_, reflection) = server.get(&format!("/api/memories/{rid}")).await;
    assert_eq!(reflection["sources"], json!(ids));
    assert_eq!(
        reflection["content"],
        format!("3 observations to act on: {}", texts.join("; "))
    );
    server.stop().await;
}
