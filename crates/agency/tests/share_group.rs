//! Two `agency serve` processes on one PostgreSQL and one MQTT broker (Mosquitto), in one
//! share group: the broker splits the messages between them, a conversation opened on one
//! process is continued on whichever gets its message, and each message's progress
//! (`EVT/chat_progress`) and answer arrive complete and once, whichever process ran its turn
//! (the processes also hear each other's turns through PostgreSQL). Needs PostgreSQL
//! (`AGENCY_TEST_POSTGRES`) and a broker (`AGENCY_TEST_MQTT`, default 127.0.0.1:1883): skips
//! without them, fails under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use common::mqtt::Mqtt;
use common::{Server, agency, http};
use serde_json::{Value, json};

const MANAGER: &str = "MGR-001";
/// Conversations sent at once.
const AT_ONCE: usize = 20;

fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()[20..].to_string()
}

/// The broker's `host:port`, if one answers.
async fn broker() -> Option<String> {
    let addr = std::env::var("AGENCY_TEST_MQTT").unwrap_or_else(|_| "127.0.0.1:1883".into());
    match tokio::net::TcpStream::connect(&addr).await {
        Ok(_) => Some(addr),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but the MQTT broker at {addr} is not reachable: {e}")
        }
        Err(e) => {
            eprintln!("skipping: the MQTT broker at {addr} is not reachable: {e}");
            None
        }
    }
}

/// A plant: the manager asks the monitor, which answers it, and the manager answers.
fn plant(team: &str) -> String {
    format!(
        r#"
name: plant
handle: {team}
manager: manager
agents:
  - name: manager
    handle: {MANAGER}
    model: builtin/rules
    rules:
      - {{ when: user, do: "Please check: {{{{message}}}}", send_to: monitor }}
      - {{ when: monitor, do: "Status: {{{{message}}}}", send_to: [user] }}
  - name: monitor
    handle: FERM-DATA-AGENT-001
    model: builtin/rules
    rules:
      - {{ when: manager, do: "All normal ({{{{message}}}})", send_to: manager }}
"#
    )
}

/// `chat_new` for a new conversation, answered `initialized` within `wait`.
async fn open(client: &mut Mqtt, wait: Duration) -> Option<String> {
    let cid = uuid::Uuid::now_v7().to_string();
    client
        .send(
            &format!("CMD/chat_new/{MANAGER}"),
            json!({"agent_id": MANAGER, "conversation_id": cid, "content": " "}),
        )
        .await;
    let p = client
        .next_within(&format!("EVT/chat_progress/{MANAGER}/{cid}"), wait)
        .await?;
    assert_eq!(p["status"], "initialized", "{p}");
    Some(cid)
}

/// One message in conversation `cid`.
async fn chat(client: &Mqtt, cid: &str, text: &str) {
    client
        .send(
            &format!("DATA/chat/{MANAGER}/{cid}"),
            json!({"agent_id": MANAGER, "conversation_id": cid, "content": text}),
        )
        .await;
}

/// The turns a server ran so far, from its Prometheus metrics.
async fn turns_run(metrics: &str) -> u64 {
    let text = http()
        .get(metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("agency_turns_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn serve(dir: &Path, db: &str, mqtt: &str) -> (Server, String) {
    let mut cmd = agency();
    cmd.current_dir(dir)
        .env("AGENCY_LOG", "error")
        .args(["--db", db, "serve", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0", "--mqtt", mqtt]);
    let server = Server::start(cmd);
    let metrics = server.printed("agency: metrics on ");
    (server, metrics)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_in_a_share_group_report_each_turn_once() {
    let Some(db) = agency_store::testing::postgres_url().await else {
        return;
    };
    let Some(addr) = broker().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let id = unique();
    let team = format!("PLANT-{id}");
    std::fs::write(dir.path().join("plant.yaml"), plant(&team)).unwrap();
    let imported = agency()
        .current_dir(dir.path())
        .args(["--db", &db, "import", "plant.yaml"])
        .output()
        .unwrap();
    assert!(imported.status.success(), "{imported:?}");
    // Each process its own client id, both in one share group.
    let mqtt = |n: usize| format!("mqtt://{addr}?client_id=agency-{id}-{n}&share=plants-{id}");
    let (_a, metrics_a) = serve(dir.path(), &db, &mqtt(1));
    let (_b, metrics_b) = serve(dir.path(), &db, &mqtt(2));
    let mut client = Mqtt::connect(&addr, &team).await;

    // Both answer once subscribed: conversations (of one message each) until each process
    // ran a turn.
    let mut warm = 0;
    while turns_run(&metrics_a).await == 0 || turns_run(&metrics_b).await == 0 {
        warm += 1;
        assert!(warm <= 100, "one of the processes never ran a turn");
        let Some(cid) = open(&mut client, Duration::from_secs(2)).await else {
            continue; // not subscribed yet
        };
        chat(&client, &cid, "warm up").await;
        client
            .next_within(
                &format!("EVT/chat_response/{MANAGER}/{cid}"),
                Duration::from_secs(30),
            )
            .await
            .expect("an answer");
    }
    let before = (turns_run(&metrics_a).await, turns_run(&metrics_b).await);

    // Conversations opened first (a message may reach the other process, which must find its
    // conversation), then one message each, all at once.
    let mut cids = Vec::new();
    for _ in 0..AT_ONCE {
        cids.push(
            open(&mut client, Duration::from_secs(30))
                .await
                .expect("initialized"),
        );
    }
    for (i, cid) in cids.iter().enumerate() {
        chat(&client, cid, &format!("reading {i}")).await;
    }
    // Everything each conversation was told, in order, until every one has its answer and
    // nothing more came for a while (a report made twice would come about with the first).
    let mut told: HashMap<String, Vec<(String, Value)>> = HashMap::new();
    let mut answered = 0;
    loop {
        let wait = if answered < AT_ONCE { 60_000 } else { 1_000 };
        let Ok(next) = tokio::time::timeout(Duration::from_millis(wait), client.inbox.recv()).await
        else {
            assert_eq!(answered, AT_ONCE, "answers missing: {told:#?}");
            break;
        };
        let (topic, body) = next.unwrap();
        assert!(!topic.contains("/EVT/error/"), "{topic}: {body}");
        let Some(cid) = cids.iter().find(|c| topic.ends_with(c.as_str())) else {
            continue;
        };
        if topic.contains("/EVT/chat_response/") {
            answered += 1;
        }
        told.entry(cid.clone()).or_default().push((topic, body));
    }

    // Every conversation was told the same story, once: its progress reports in order (the
    // turn starting once, each agent's work, each routing, one answer) and one response.
    let story = |cid: &str| -> Vec<String> {
        told[cid]
            .iter()
            .map(|(topic, body)| match body["status"].as_str() {
                Some(status) => format!("{status}: {}", body["message"].as_str().unwrap_or("")),
                None => format!("response: {}", topic.rsplit('/').nth(1).unwrap_or("")),
            })
            .collect()
    };
    let first = story(&cids[0]);
    let count = |what: &str| first.iter().filter(|s| s.starts_with(what)).count();
    assert_eq!(count("processing: Turn 1 started"), 1, "{first:#?}");
    assert_eq!(count("answered"), 1, "{first:#?}");
    assert_eq!(count("response"), 1, "{first:#?}");
    assert!(
        count("model_call") >= 3,
        "manager, monitor, manager: {first:#?}"
    );
    assert!(count("routing") >= 2, "{first:#?}");
    let store = agency_store::open(&db).await.unwrap();
    for (i, cid) in cids.iter().enumerate() {
        assert_eq!(story(cid), first, "{cid}");
        // Stored once, wherever it ran: the answer carries the monitor's word.
        let id = agency_core::ConversationId(cid.parse().unwrap());
        let answers: Vec<String> = store
            .messages(id)
            .await
            .unwrap()
            .into_iter()
            .filter(|m| m.kind == agency_core::MessageKind::Answer)
            .map(|m| m.text)
            .collect();
        assert_eq!(
            answers,
            [format!("Status: All normal (Please check: reading {i})")],
            "{cid}"
        );
    }
    // And the work was shared.
    let after = (turns_run(&metrics_a).await, turns_run(&metrics_b).await);
    assert_eq!(
        (after.0 - before.0) + (after.1 - before.1),
        AT_ONCE as u64,
        "each message ran one turn: {before:?} → {after:?}"
    );
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "both processes ran turns: {before:?} → {after:?}"
    );
}
