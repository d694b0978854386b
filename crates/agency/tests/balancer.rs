//! Several processes on one PostgreSQL: `agency serve` behind HAProxy, configured by
//! `deploy/haproxy.cfg` (any request on any server), and a process killed mid-turn. Needs
//! PostgreSQL (`AGENCY_TEST_POSTGRES`) and Debian's `haproxy`: skips without them, fails under
//! `CI=true` (`.ci/run` installs HAProxy).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Server, agency, http, signed_up, studio_answer};
use serde_json::{Value, json};

/// Every server seals and opens with the same master key.
const MASTER_KEY: &str = "4242424242424242424242424242424242424242424242424242424242424242";
const SERVERS: usize = 3;
const CONVERSATIONS: usize = 300;
const TURNS: usize = 4;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `agency --db DB ...` in `dir`, with the shared master key.
fn cli(dir: &Path, db: &str) -> Command {
    let mut cmd = agency();
    cmd.current_dir(dir)
        .env("AGENCY_MASTER_KEY", MASTER_KEY)
        // Only errors: nobody reads the servers' logs while the test runs.
        .env("AGENCY_LOG", "error")
        .args(["--db", db]);
    cmd
}

/// HAProxy in the foreground with the deploy configuration, killed when dropped.
struct Balancer {
    child: Child,
    url: String,
}

impl Balancer {
    fn start(servers: &[Server]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/haproxy.cfg");
        let mut cmd = Command::new("haproxy");
        cmd.arg("-db")
            .arg("-f")
            .arg(config)
            .env("AGENCY_LB_BIND", format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (i, s) in servers.iter().enumerate() {
            cmd.env(
                format!("AGENCY_SERVER_{}", i + 1),
                s.url.trim_start_matches("http://"),
            );
        }
        Self {
            child: cmd.spawn().expect("start haproxy"),
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One Chat Completions request through the balancer: the answer's text.
async fn chat(client: &reqwest::Client, url: &str, key: &str, messages: &[Value]) -> String {
    let response = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": "studio", "messages": messages}))
        .send()
        .await
        .expect("the balancer answers");
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(status, 200, "{body}");
    body["choices"][0]["message"]["content"]
        .as_str()
        .expect("an answer")
        .to_string()
}

/// A conversation of `TURNS` stateless requests, each with the whole history so far.
async fn conversation(client: reqwest::Client, url: Arc<str>, key: Arc<str>, n: usize) {
    let mut messages = Vec::new();
    for turn in 0..TURNS {
        let text = format!("conversation {n} turn {turn}");
        messages.push(json!({"role": "user", "content": text}));
        let answer = chat(&client, &url, &key, &messages).await;
        assert_eq!(answer, studio_answer(&text));
        messages.push(json!({"role": "assistant", "content": answer}));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_servers_behind_haproxy_take_any_request() {
    let Some(db) = agency_store::testing::postgres_url().await else {
        return;
    };
    if Command::new("haproxy").arg("-v").output().is_err() {
        assert!(!in_ci(), "CI=true but haproxy is not installed");
        eprintln!("skipping: haproxy is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Three servers start at once on an empty database: migrations, the demo agency and the
    // keys' secret each happen once.
    let servers: Vec<Server> = std::thread::scope(|s| {
        let starting: Vec<_> = (0..SERVERS)
            .map(|_| {
                s.spawn(|| {
                    let mut cmd = cli(dir.path(), &db);
                    cmd.args([
                        "serve",
                        "--listen",
                        "127.0.0.1:0",
                        "--trusted-proxy",
                        "127.0.0.1",
                    ]);
                    Server::start(cmd)
                })
            })
            .collect();
        starting.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let store = agency_store::open(&db).await.unwrap();
    let agencies = store
        .list_agencies(agency_runtime::LOCAL_OWNER)
        .await
        .unwrap();
    assert_eq!(agencies.len(), 1, "the demo agency is imported once");
    let studio = agencies[0].0.id;
    let made = cli(dir.path(), &db)
        .args([
            "keys",
            "create",
            "studio",
            "--name",
            "balanced",
            "--rate-limit",
            "100000",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let key: Arc<str> = String::from_utf8(made.stdout).unwrap().trim().into();

    let lb = Balancer::start(&servers);
    let client = http();
    let started = Instant::now();
    loop {
        let ready = client.get(format!("{}/readyz", lb.url)).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the balancer found no ready server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url: Arc<str> = lb.url.clone().into();

    // Conversations of stateless requests, 16 at a time; round robin sends each request to
    // the next server, so every turn runs on another server than the one before.
    let mut running = tokio::task::JoinSet::new();
    for n in 0..CONVERSATIONS {
        if running.len() >= 16 {
            running.join_next().await.unwrap().unwrap();
        }
        running.spawn(conversation(client.clone(), url.clone(), key.clone(), n));
    }
    while let Some(done) = running.join_next().await {
        done.unwrap();
    }
    // Each request found its conversation on whatever server took it: no forks, no new
    // conversations; each turn's message stored once, in order.
    let conversations = store.list_conversations(studio).await.unwrap();
    assert_eq!(conversations.len(), CONVERSATIONS);
    for c in &conversations {
        let turns = store.turns(c.id).await.unwrap();
        assert_eq!(
            turns.iter().map(|t| t.number).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        let messages = store.messages(c.id).await.unwrap();
        let inputs: Vec<&str> = messages
            .iter()
            .filter(|m| m.kind == agency_core::MessageKind::Input)
            .map(|m| m.text.as_str())
            .collect();
        assert_eq!(inputs.len(), TURNS, "{inputs:?}");
        for (turn, text) in inputs.iter().enumerate() {
            assert!(text.ends_with(&format!(" turn {turn}")), "{inputs:?}");
        }
    }

    // Twenty requests at once continuing one conversation: all answered, none lost.
    let history = vec![
        json!({"role": "user", "content": "conversation 0 turn 0"}),
        json!({"role": "assistant", "content": studio_answer("conversation 0 turn 0")}),
    ];
    let mut at_once = tokio::task::JoinSet::new();
    for i in 0..20 {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        let mut messages = history.clone();
        let text = format!("at once {i}");
        messages.push(json!({"role": "user", "content": text}));
        at_once.spawn(async move {
            assert_eq!(
                chat(&client, &url, &key, &messages).await,
                studio_answer(&text)
            );
        });
    }
    while let Some(done) = at_once.join_next().await {
        done.unwrap();
    }
    let mut stored: HashMap<String, usize> = HashMap::new();
    for c in store.list_conversations(studio).await.unwrap() {
        for m in store.messages(c.id).await.unwrap() {
            if m.kind == agency_core::MessageKind::Input && m.text.starts_with("at once ") {
                *stored.entry(m.text).or_default() += 1;
            }
        }
    }
    assert_eq!(stored.len(), 20, "{stored:?}");
    assert!(stored.values().all(|n| *n == 1), "{stored:?}");

    live_views_cross_servers(&servers).await;
    a_key_limit_holds_across_servers(dir.path(), &db, &url).await;
    drop(lb);
    drop(servers);
}

/// A key limited to 60 requests a minute, used through the balancer (round robin: every
/// request on the next server) by 8 clients at once for 90 requests: 60 are answered (the
/// servers count in PostgreSQL; ±5% allowed), the rest refused with `429` and `Retry-After`.
async fn a_key_limit_holds_across_servers(dir: &Path, db: &str, url: &str) {
    const LIMIT: usize = 60;
    const SENT: usize = 90;
    let made = cli(dir, db)
        .args(["keys", "create", "studio", "--name", "limited"])
        .args(["--rate-limit", &LIMIT.to_string()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let key: Arc<str> = String::from_utf8(made.stdout).unwrap().trim().into();
    let client = http();
    let url: Arc<str> = url.into();
    let mut running = tokio::task::JoinSet::new();
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    for i in 0..SENT {
        if running.len() >= 8 {
            let (status, retry_after) = running.join_next().await.unwrap().unwrap();
            *statuses.entry(status).or_default() += 1;
            assert!(status != 429 || retry_after, "a 429 without Retry-After");
        }
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        running.spawn(async move {
            let response = client
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(&*key)
                .json(&json!({"model": "studio", "messages": [
                    {"role": "user", "content": format!("limited {i}")}
                ]}))
                .send()
                .await
                .expect("the balancer answers");
            let retry_after = response.headers().contains_key("retry-after");
            (response.status().as_u16(), retry_after)
        });
    }
    while let Some(done) = running.join_next().await {
        let (status, retry_after) = done.unwrap();
        *statuses.entry(status).or_default() += 1;
        assert!(status != 429 || retry_after, "a 429 without Retry-After");
    }
    let answered = statuses.get(&200).copied().unwrap_or(0);
    let refused = statuses.get(&429).copied().unwrap_or(0);
    assert_eq!(answered + refused, SENT, "{statuses:?}");
    let slack = LIMIT * 5 / 100;
    assert!(
        (LIMIT - slack..=LIMIT + slack).contains(&answered),
        "{answered} of {SENT} answered for a limit of {LIMIT} a minute: {statuses:?}"
    );
}

/// A playground turn run on the first server shows on a stream opened on the second.
async fn live_views_cross_servers(servers: &[Server]) {
    let (one, two) = (&servers[0].url, &servers[1].url);
    // An account (its session is in the database: good on every server).
    let account = signed_up(one).await;
    let imported = account
        .post(format!("{one}/api/agencies/import"))
        .header("content-type", "application/yaml")
        .body(include_str!("../../../examples/studio.yaml"))
        .send()
        .await
        .unwrap();
    assert_eq!(imported.status(), 201);
    let created: Value = account
        .post(format!("{one}/api/agencies/studio/conversations"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("a conversation id");
    let mut stream = account
        .get(format!("{two}/api/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let sent = account
        .post(format!("{one}/api/conversations/{id}/messages"))
        .json(&json!({"text": "a todo app"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        sent.status(),
        200,
        "{}",
        sent.text().await.unwrap_or_default()
    );
    let mut seen = String::new();
    let read = async {
        while !seen.contains("event: turn_finished") {
            let chunk = stream
                .chunk()
                .await
                .unwrap()
                .expect("the stream stays open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .unwrap_or_else(|_| panic!("no turn_finished on the second server; it showed:\n{seen}"));
    assert!(seen.contains("event: turn_started"), "{seen}");
    assert!(seen.contains("event: hop"), "{seen}");
    assert!(seen.contains("Please build: a todo app"), "{seen}");
}

/// A process killed (`kill -9`) in the middle of a turn — its coder's model call running, the
/// tester's message to the coder waiting for it in memory: the conversation's next message, in
/// another process on the same database, finishes the interrupted turn's work (the tester's
/// message delivered, the coder called again with both) and keeps every message the first
/// process had accepted.
#[tokio::test(flavor = "multi_thread")]
async fn a_process_killed_mid_turn_loses_nothing_accepted() {
    use agency_fakes::{Fake, Reply, openai};
    let Some(db) = agency_store::testing::postgres_url().await else {
        return;
    };
    let (lead, coder, tester) = (
        Fake::start().await,
        Fake::start().await,
        Fake::start().await,
    );
    lead.push(openai::completion(
        r#"[{"to": 2, "context": "build it"}, {"to": 3, "context": "test it"}]"#,
        5,
        5,
    ))
    .otherwise(openai::completion(
        r#"{"to": 0, "context": "working on it"}"#,
        5,
        5,
    ));
    coder
        .push(Reply::Hang)
        .otherwise(openai::completion(r#"{"to": 1, "context": "built"}"#, 5, 5));
    tester.otherwise(openai::completion(
        r#"{"to": 2, "context": "tests ready"}"#,
        5,
        5,
    ));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agency.yaml"),
        format!(
            "providers:\n  lead: {{ kind: openai, base_url: \"{}/v1\", api_key_env: FAKE_KEY }}\n  coder: {{ kind: openai, base_url: \"{}/v1\", api_key_env: FAKE_KEY }}\n  tester: {{ kind: openai, base_url: \"{}/v1\", api_key_env: FAKE_KEY }}\n",
            lead.url, coder.url, tester.url
        ),
    )
    .unwrap();
    std::fs::write(
        d.join("team.yaml"),
        "name: team\nprotocol: json\nmanager: lead\nagents:\n  - { id: 1, name: lead, model: lead/m }\n  - { id: 2, name: coder, model: coder/m }\n  - { id: 3, name: tester, model: tester/m }\n",
    )
    .unwrap();
    let cli = |args: &[&str]| {
        let mut cmd = cli(d, &db);
        cmd.env("FAKE_KEY", "sk-test")
            .args(["--config", "agency.yaml"])
            .args(args);
        cmd
    };
    let imported = cli(&["import", "team.yaml"]).output().unwrap();
    assert!(imported.status.success(), "{imported:?}");

    // The first process: the lead hands the work to the coder, whose call never returns, and
    // to the tester, whose answer to the coder waits for it.
    let mut first = cli(&["chat", "team", "--message", "ship it", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let store = agency_store::open(&db).await.unwrap();
    let team = store
        .agency_by_name(agency_runtime::LOCAL_OWNER, "team")
        .await
        .unwrap()
        .unwrap();
    let started = Instant::now();
    let conversation = loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the tester never answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let Some(c) = store.list_conversations(team.id).await.unwrap().pop() else {
            continue;
        };
        let stored = store.messages(c.id).await.unwrap();
        let tester_replied = stored
            .iter()
            .any(|m| m.kind == agency_core::MessageKind::Reply && m.text.contains("tests ready"));
        if tester_replied && !coder.requests().is_empty() {
            break c;
        }
    };
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let id = conversation.id.to_string();

    // Another process takes the conversation's next message (once the dead one's turn lock
    // has expired) and answers it.
    let mut second = cli(&[
        "chat",
        "team",
        "--conversation",
        &id,
        "--message",
        "status?",
        "--json",
    ]);
    let second = tokio::task::spawn_blocking(move || second.output());
    let second = second.await.unwrap().unwrap();
    assert!(second.status.success(), "{second:?}");
    let turn: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(turn["answer"], "working on it");

    // The coder was called again, with the work and the tester's message, each once.
    let requests = coder.requests();
    assert_eq!(requests.len(), 2);
    let asked: Vec<String> = requests[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    for text in ["build it", "tests ready"] {
        assert_eq!(
            asked.iter().filter(|m| m.contains(text)).count(),
            1,
            "{text}: {asked:?}"
        );
    }
    // Everything the first process had accepted is kept.
    let messages = store.messages(conversation.id).await.unwrap();
    let inputs: Vec<&str> = messages
        .iter()
        .filter(|m| m.kind == agency_core::MessageKind::Input)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(inputs, ["ship it", "status?"]);
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.kind == agency_core::MessageKind::Delivery && m.text == "build it")
            .count(),
        1
    );
}
