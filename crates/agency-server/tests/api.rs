//! The HTTP API end to end: the real app on a fresh SQLite file, a user signed up through the
//! API with the demo agency (`examples/studio.yaml`, on the deterministic rules model) imported,
//! spoken to over loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use agency_providers::Providers;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// What an account must not be able to do to the server or to other accounts (issue 17).
#[path = "api/security.rs"]
mod security;

/// The web UI's pages as addresses: what each shows whom, and what an unknown one answers.
#[path = "api/pages.rs"]
mod pages;

/// A person's approval before a tool acts, through the management API (issue 36).
#[path = "api/approvals.rs"]
mod approvals;

/// Every field of an agency through the API: file, JSON, store, publishing, export.
#[path = "api/drafts.rs"]
mod drafts;

const STUDIO: &str = include_str!("../../../examples/studio.yaml");

const ANSWER: &str = "Here is your reviewed build. Approved: Please review: fn main() { /* Please build: a todo app */ }";

/// A running server and a client for it. The server task and the database live as long as this.
struct App {
    base: String,
    client: reqwest::Client,
    studio_id: String,
    _dir: tempfile::TempDir,
}

impl App {
    async fn spawn() -> App {
        App::spawn_with(agency_server::Connections::default()).await
    }

    /// A server holding at most as many connections, as patiently, as `connections` says.
    async fn spawn_with(connections: agency_server::Connections) -> App {
        let dir = tempfile::tempdir().unwrap();
        // The tests' bots and providers run on loopback.
        let mut providers = Providers::builtin();
        providers.allow_private_addresses().unwrap();
        let base = agency_testing::serve(dir.path(), providers, Vec::new(), connections)
            .await
            .unwrap()
            .base;
        let client = signed_up(&base, "ada@example.com").await;
        let res = client
            .post(format!("{base}/api/agencies/import"))
            .header("content-type", "application/yaml")
            .body(STUDIO)
            .send()
            .await
            .unwrap();
        let (status, studio) = read(res).await;
        assert_eq!(status, StatusCode::CREATED, "{studio}");
        App {
            base,
            client,
            studio_id: studio["id"].as_str().unwrap().to_string(),
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let res = self.client.get(self.url(path)).send().await.unwrap();
        read(res).await
    }

    async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let res = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap();
        read(res).await
    }

    /// Posts `body` verbatim as `application/json`.
    async fn post_raw(&self, path: &str, body: &'static str) -> (StatusCode, Value) {
        let res = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        read(res).await
    }

    async fn new_conversation(&self) -> String {
        let res = self
            .client
            .post(self.url("/api/agencies/studio/conversations"))
            .send()
            .await
            .unwrap();
        let (status, body) = read(res).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    async fn say(&self, conversation: &str, text: &str) -> Value {
        let (status, body) = self
            .post_json(
                &format!("/api/conversations/{conversation}/messages"),
                &json!({ "text": text }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    async fn messages(&self, conversation: &str) -> Vec<Value> {
        let (status, body) = self
            .get(&format!("/api/conversations/{conversation}/messages"))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body.as_array().unwrap().clone()
    }
}

/// A client of a new account: its session cookie and CSRF token on every request.
async fn signed_up(base: &str, email: &str) -> reqwest::Client {
    let res = reqwest::Client::new()
        .post(format!("{base}/api/auth/signup"))
        .json(&json!({ "email": email, "password": "correct horse battery" }))
        .send()
        .await
        .unwrap();
    let cookie = res
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let (status, me) = read(res).await;
    assert_eq!(status, StatusCode::CREATED, "{me}");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("cookie", cookie.parse().unwrap());
    headers.insert(
        "x-csrf-token",
        me["csrf_token"].as_str().unwrap().parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// The status and the JSON body (every response of this API is JSON, but a 204's: null).
async fn read(res: reqwest::Response) -> (StatusCode, Value) {
    let status = res.status();
    let text = res.text().await.unwrap();
    if status == StatusCode::NO_CONTENT {
        assert_eq!(text, "");
        return (status, Value::Null);
    }
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status}: body is not JSON ({e}): {text:?}"));
    (status, body)
}

/// The message of an error body, checking its shape and that it repeats the status.
fn error_message(status: StatusCode, body: &Value) -> String {
    assert_eq!(body["error"]["status"], json!(status.as_u16()), "{body}");
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"));
    assert!(!message.is_empty(), "{body}");
    message.to_string()
}

/// `(from, to, kind)` of each trace entry.
fn hops(trace: &Value) -> Vec<(String, String, String)> {
    trace
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_string(),
                e["to"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn owned(v: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    v.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

/// The studio's turn for "a todo app", hop by hop.
fn studio_hops() -> Vec<(String, String, String)> {
    owned(&[
        ("user", "manager", "input"),
        ("manager", "programmer", "delivery"),
        ("programmer", "manager", "delivery"),
        ("manager", "reviewer", "delivery"),
        ("reviewer", "builtin/echo", "tool_call"),
        ("builtin/echo", "reviewer", "tool_result"),
        ("reviewer", "manager", "delivery"),
        ("manager", "user", "answer"),
    ])
}

#[tokio::test]
async fn health_is_ok() {
    let app = App::spawn().await;
    let (status, body) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({ "status": "ok" }));
    let (status, body) = app.get("/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({ "status": "ready" }));

    // A newer program migrated the database further: this one is alive but not ready.
    let db = rusqlite::Connection::open(app._dir.path().join("agency.db")).unwrap();
    db.execute_batch("PRAGMA user_version = 9999").unwrap();
    let (status, body) = app.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["status"], json!("unavailable"));
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("newer than this program knows"),
        "{body}"
    );
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
}

fn assert_is_studio(detail: &Value, id: &str) {
    assert_eq!(detail["id"], json!(id));
    assert_eq!(detail["published_version"], json!(1), "an import publishes");
    let a = &detail["draft"];
    assert_eq!(a["name"], json!("studio"));
    assert_eq!(a["protocol"], json!("json"));
    assert_eq!(a["manager"], json!("manager"));
    assert_eq!(a["max_hops"], json!(16));
    assert_eq!(a["turn_deadline_secs"], json!(120));
    let agents: Vec<(u64, &str, &str, &str)> = a["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["id"].as_u64().unwrap(),
                g["name"].as_str().unwrap(),
                g["model"].as_str().unwrap(),
                g["role"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        agents,
        vec![
            (
                4522,
                "manager",
                "builtin/rules",
                "runs the studio and talks to the client"
            ),
            (143, "programmer", "builtin/rules", "writes Rust"),
            (224, "reviewer", "builtin/rules", "reviews code"),
        ]
    );
    for g in a["agents"].as_array().unwrap() {
        assert_eq!(g.get("handle"), None, "{g}");
    }
}

#[tokio::test]
async fn lists_the_agencies() {
    let app = App::spawn().await;
    let (status, body) = app.get("/api/agencies").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let list = body.as_array().unwrap();
    assert_eq!(list.len(), 1, "{body}");
    assert_is_studio(&list[0], &app.studio_id);
}

#[tokio::test]
async fn gets_an_agency_by_name_or_id() {
    let app = App::spawn().await;
    let (status, by_name) = app.get("/api/agencies/studio").await;
    assert_eq!(status, StatusCode::OK, "{by_name}");
    assert_is_studio(&by_name, &app.studio_id);

    let (status, by_id) = app.get(&format!("/api/agencies/{}", app.studio_id)).await;
    assert_eq!(status, StatusCode::OK, "{by_id}");
    assert_eq!(by_id, by_name);
}

#[tokio::test]
async fn an_unknown_agency_is_not_found() {
    let app = App::spawn().await;
    let (status, body) = app.get("/api/agencies/nosuch").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_message(status, &body).contains("nosuch"), "{body}");

    // A well-formed id that is no agency's.
    let ghost = "00000000-0000-4000-8000-000000000000";
    let (status, body) = app.get(&format!("/api/agencies/{ghost}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_message(status, &body).contains(ghost), "{body}");

    // No conversation with an agency that does not exist.
    let res = app
        .client
        .post(app.url("/api/agencies/nosuch/conversations"))
        .send()
        .await
        .unwrap();
    let (status, body) = read(res).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_message(status, &body).contains("nosuch"), "{body}");
}

#[tokio::test]
async fn a_new_conversation_has_no_turns() {
    let app = App::spawn().await;
    let res = app
        .client
        .post(app.url("/api/agencies/studio/conversations"))
        .send()
        .await
        .unwrap();
    let (status, created) = read(res).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["agency_id"], json!(app.studio_id));
    assert_eq!(created["turns"], json!([]));

    let (status, got) = app.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got, created);

    // Only the system prompts, one per agent, manager first.
    let messages = app.messages(id).await;
    let who: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m["agent"].as_str().unwrap(), m["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        who,
        vec![
            ("manager", "system"),
            ("programmer", "system"),
            ("reviewer", "system")
        ]
    );
}

#[tokio::test]
async fn a_turn_goes_through_the_studio() {
    let app = App::spawn().await;
    let id = app.new_conversation().await;

    let turn = app.say(&id, "a todo app").await;
    assert_eq!(turn["conversation_id"], json!(id));
    assert_eq!(turn["number"], json!(1));
    assert_eq!(turn["answer"], json!(ANSWER));
    assert_eq!(turn["stopped_by"], json!("answered"));
    assert_eq!(turn["hops"], json!(7));
    assert!(turn["turn_id"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(hops(&turn["trace"]), studio_hops());
    let texts: Vec<&str> = turn["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        vec![
            "a todo app",
            "Please build: a todo app",
            "fn main() { /* Please build: a todo app */ }",
            "Please review: fn main() { /* Please build: a todo app */ }",
            r#"{"text":"Please review: fn main() { /* Please build: a todo app */ }"}"#,
            "Please review: fn main() { /* Please build: a todo app */ }",
            "Approved: Please review: fn main() { /* Please build: a todo app */ }",
            ANSWER,
        ]
    );
    // The rules model is free.
    assert_eq!(
        turn["usage"],
        json!({ "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0 })
    );
    // Each agent's cost, in the order they first answered; the stored turn says the same.
    let agents: Vec<&Value> = turn["agent_costs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["agent"])
        .collect();
    assert_eq!(
        agents,
        [&json!("manager"), &json!("programmer"), &json!("reviewer")]
    );
    let (status, stored) = app.get(&format!("/api/conversations/{id}/turns/1")).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["agent_costs"], turn["agent_costs"], "{stored}");

    // The next message is the next turn.
    let second = app.say(&id, "a todo app").await;
    assert_eq!(second["number"], json!(2));
    assert_eq!(second["answer"], json!(ANSWER));
    assert_ne!(second["turn_id"], turn["turn_id"]);
    assert_eq!(hops(&second["trace"]), studio_hops());
}

/// Every example of the gallery, imported by a new account the way "Use this" does, answers a
/// message on the rules model, offline, and its graph (the preview's edges) is its rules'.
#[tokio::test]
async fn every_example_of_the_gallery_answers_in_a_new_account() {
    let app = App::spawn().await;
    let client = signed_up(&app.base, "newcomer@example.com").await;
    let (status, list) = read(client.get(app.url("/api/examples")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let list = list.as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["studio", "research", "support", "standup"]);
    let expected = [
        (
            "studio",
            "Here is your reviewed build. Approved: Please review: fn main() { /* Please build: a haiku */ }",
        ),
        (
            "research",
            "Brief, checked by our critic. Critic's note: sourced and dated; flag anything unverified. Check this brief: Brief (",
        ),
        (
            "support",
            "Sorry for the trouble. Billing credited your account with 19 USD. (Escalated to billing. New ticket: a haiku)",
        ),
        (
            "standup",
            "Standup notes. Standup on a haiku. Ana: the API yesterday, tests today. Ben: the chat yesterday, the graph today. Carl: no incidents; deploying at noon.",
        ),
    ];
    for (e, (name, answer)) in list.iter().zip(expected) {
        assert_eq!(e["name"], json!(name));
        assert!(!e["title"].as_str().unwrap().is_empty());
        assert!(e["agents"].as_array().unwrap().len() >= 3, "{e}");
        let res = client
            .post(app.url("/api/agencies/import"))
            .header("content-type", "application/yaml")
            .body(e["file"].as_str().unwrap().to_string())
            .send()
            .await
            .unwrap();
        let (status, agency) = read(res).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {agency}");
        let id = agency["id"].as_str().unwrap();
        let res = client
            .post(app.url(&format!("/api/agencies/{id}/conversations")))
            .json(&json!({ "on": "draft" }))
            .send()
            .await
            .unwrap();
        let (status, c) = read(res).await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
        let res = client
            .post(app.url(&format!(
                "/api/conversations/{}/messages",
                c["id"].as_str().unwrap()
            )))
            .json(&json!({ "text": "a haiku" }))
            .send()
            .await
            .unwrap();
        let (status, turn) = read(res).await;
        assert_eq!(status, StatusCode::OK, "{name}: {turn}");
        assert_eq!(turn["stopped_by"], json!("answered"), "{name}: {turn}");
        let got = turn["answer"].as_str().unwrap();
        assert!(got.starts_with(answer), "{name} answered {got:?}");
        // The preview of its draft gives the graph: every edge its rules allow.
        let res = client
            .post(app.url("/api/agencies/preview"))
            .json(&agency["draft"])
            .send()
            .await
            .unwrap();
        let (status, preview) = read(res).await;
        assert_eq!(status, StatusCode::OK, "{preview}");
        assert_eq!(preview["manager"], e["manager"]);
        let edges = preview["edges"].as_array().unwrap();
        assert!(
            edges
                .iter()
                .any(|x| x["to"] == json!("user") && x["from"] == e["manager"]),
            "{name}: {preview}"
        );
    }
    // The studio's graph, exactly: the reviewer's rule calls its tool first.
    let res = client
        .post(app.url("/api/agencies/preview"))
        .json(
            &client
                .get(app.url("/api/agencies/studio"))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()["draft"],
        )
        .send()
        .await
        .unwrap();
    let (_, preview) = read(res).await;
    assert_eq!(
        preview["edges"],
        json!([
            { "from": "manager", "to": "programmer", "fan_out": false, "tool": null },
            { "from": "manager", "to": "reviewer", "fan_out": false, "tool": null },
            { "from": "manager", "to": "user", "fan_out": false, "tool": null },
            { "from": "programmer", "to": "manager", "fan_out": false, "tool": null },
            { "from": "reviewer", "to": "manager", "fan_out": false, "tool": "builtin/echo" },
        ])
    );
}

/// The model field's suggestions: the server's providers, each with its key's state.
#[tokio::test]
async fn the_providers_are_listed_with_their_models_and_keys() {
    let app = App::spawn().await;
    let (status, list) = app.get("/api/providers").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        list,
        json!([{ "name": "builtin", "kind": null, "models": ["rules"], "key_state": "not_needed", "your_key": false }])
    );
}

#[tokio::test]
async fn turns_are_recorded_and_replayed() {
    let app = App::spawn().await;
    let id = app.new_conversation().await;
    let first = app.say(&id, "a todo app").await;
    let second = app.say(&id, "a chess engine").await;

    let (status, c) = app.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{c}");
    assert_eq!(c["id"], json!(id));
    assert_eq!(c["agency_id"], json!(app.studio_id));
    let turns = c["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{c}");
    for (t, posted) in turns.iter().zip([&first, &second]) {
        assert_eq!(t["id"], posted["turn_id"]);
        assert_eq!(t["number"], posted["number"]);
        assert_eq!(t["stopped_by"], json!("answered"));
        assert_eq!(t["hops"], json!(7));
        assert_eq!(t["error"], Value::Null);
        assert!(t["finished_at"].is_string(), "{t}");
    }
    assert_eq!(turns[0]["number"], json!(1));
    assert_eq!(turns[1]["number"], json!(2));

    // A turn's stored trace is the one the POST returned.
    for (n, posted) in [(1, &first), (2, &second)] {
        let (status, t) = app.get(&format!("/api/conversations/{id}/turns/{n}")).await;
        assert_eq!(status, StatusCode::OK, "{t}");
        assert_eq!(t["turn"], turns[n - 1]);
        assert_eq!(t["trace"], posted["trace"]);
    }
    assert_eq!(
        second["trace"][0]["text"],
        json!("a chess engine"),
        "{second}"
    );

    // Turns that are not there, or cannot be: 404, with this API's JSON error.
    for n in ["99", "0", "abc", "-1", "1.5"] {
        let (status, body) = app.get(&format!("/api/conversations/{id}/turns/{n}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{n}: {body}");
        assert!(error_message(status, &body).contains(n), "{body}");
    }
}

#[tokio::test]
async fn each_agent_sees_only_its_own_context() {
    let app = App::spawn().await;
    let id = app.new_conversation().await;
    app.say(&id, "a todo app").await;
    app.say(&id, "a todo app").await;
    let messages = app.messages(&id).await;

    // In order, each message once.
    let seqs: Vec<i64> = messages
        .iter()
        .map(|m| m["seq"].as_i64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    let context = |agent: Option<&str>| -> Vec<&Value> {
        messages
            .iter()
            .filter(|m| m["agent"].as_str() == agent)
            .collect()
    };
    let kinds = |ms: &[&Value]| -> Vec<String> {
        ms.iter()
            .map(|m| m["kind"].as_str().unwrap().to_string())
            .collect()
    };

    for name in ["manager", "programmer", "reviewer"] {
        let ctx = context(Some(name));
        let first = ctx
            .first()
            .unwrap_or_else(|| panic!("{name} has no context"));
        assert_eq!(first["kind"], json!("system"), "{name}: {first}");
        assert_eq!(first["role"], json!("system"), "{name}: {first}");
        assert!(
            first["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!("You are {name} ")),
            "{name}: {first}"
        );
        // Exactly one system prompt each.
        assert_eq!(
            ctx.iter().filter(|m| m["kind"] == json!("system")).count(),
            1,
            "{name}"
        );
    }

    // The programmer: its system prompt, then per turn the manager's delivery and its reply.
    let programmer = context(Some("programmer"));
    assert_eq!(
        kinds(&programmer),
        ["system", "delivery", "reply", "delivery", "reply"]
    );
    for pair in programmer[1..].chunks(2) {
        let (delivery, reply) = (pair[0], pair[1]);
        assert_eq!(delivery["from"], json!("manager"));
        assert_eq!(delivery["to"], json!("programmer"));
        assert_eq!(delivery["role"], json!("user"));
        assert_eq!(delivery["text"], json!("Please build: a todo app"));
        assert_eq!(reply["from"], json!("programmer"));
        assert_eq!(reply["to"], json!("manager"));
        assert_eq!(reply["role"], json!("assistant"));
        assert!(
            reply["text"]
                .as_str()
                .unwrap()
                .contains("fn main() { /* Please build: a todo app */ }"),
            "{reply}"
        );
    }

    // The reviewer likewise.
    let reviewer = context(Some("reviewer"));
    assert_eq!(
        kinds(&reviewer),
        [
            "system",
            "delivery",
            "reply",
            "tool_result",
            "reply",
            "delivery",
            "reply",
            "tool_result",
            "reply"
        ]
    );
    // Its check of the build: a call of its tool, answered in its own context alone.
    assert_eq!(reviewer[2]["tool_calls"][0]["name"], json!("builtin/echo"));
    assert_eq!(
        reviewer[3]["tool_result"]["call_id"],
        reviewer[2]["tool_calls"][0]["id"]
    );
    assert_eq!(reviewer[3]["role"], json!("tool"));
    assert_eq!(reviewer[1]["from"], json!("manager"));

    // The manager: the user's input, its reply, and one delivery and reply per agent it asked.
    let manager = context(Some("manager"));
    let per_turn = ["input", "reply", "delivery", "reply", "delivery", "reply"];
    let expected: Vec<&str> = std::iter::once("system")
        .chain(per_turn)
        .chain(per_turn)
        .collect();
    assert_eq!(kinds(&manager), expected);
    assert_eq!(manager[1]["from"], Value::Null);
    assert_eq!(manager[1]["text"], json!("a todo app"));
    assert_eq!(manager[3]["from"], json!("programmer"));
    assert_eq!(manager[5]["from"], json!("reviewer"));

    // The user's transcript: the answers, belonging to no agent's context.
    let user = context(None);
    assert_eq!(kinds(&user), ["answer", "answer"]);
    for answer in user {
        assert_eq!(answer["from"], json!("manager"));
        assert_eq!(answer["to"], Value::Null);
        assert_eq!(answer["role"], json!("assistant"));
        assert_eq!(answer["text"], json!(ANSWER));
    }

    // Three system prompts, then thirteen messages a turn (the reviewer's call and its
    // result among them).
    assert_eq!(messages.len(), 3 + 13 * 2);
}

#[tokio::test]
async fn unknown_conversations_are_not_found() {
    let app = App::spawn().await;
    let ghost = "00000000-0000-4000-8000-000000000000";
    let not_uuid = "not-a-uuid";

    for id in [ghost, not_uuid] {
        for path in [
            format!("/api/conversations/{id}"),
            format!("/api/conversations/{id}/messages"),
            format!("/api/conversations/{id}/turns/1"),
        ] {
            let (status, body) = app.get(&path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
            error_message(status, &body);
        }
        let (status, body) = app
            .post_json(
                &format!("/api/conversations/{id}/messages"),
                &json!({ "text": "a todo app" }),
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}: {body}");
        assert!(error_message(status, &body).contains(id), "{body}");
    }

    // The ghost conversation was not created by any of that.
    let (status, _) = app.get(&format!("/api/conversations/{ghost}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_messages_are_rejected_and_store_nothing() {
    let app = App::spawn().await;
    let id = app.new_conversation().await;
    app.say(&id, "a todo app").await;
    let before = app.messages(&id).await;
    let path = format!("/api/conversations/{id}/messages");

    // Empty or blank text.
    for text in ["", "   ", "\n\t "] {
        let (status, body) = app.post_json(&path, &json!({ "text": text })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text:?}: {body}");
        assert!(error_message(status, &body).contains("empty"), "{body}");
    }

    // Not JSON, or not the JSON expected.
    let (status, body) = app.post_raw(&path, "{\"text\": ").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    error_message(status, &body);

    let (status, body) = app.post_raw(&path, "not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    error_message(status, &body);

    let (status, body) = app.post_json(&path, &json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_message(status, &body).contains("text"), "{body}");

    let (status, body) = app.post_json(&path, &json!({ "message": "hi" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_message(status, &body).contains("text"), "{body}");

    let (status, body) = app.post_json(&path, &json!({ "text": 42 })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    error_message(status, &body);

    let (status, body) = app
        .post_json(&path, &json!({ "text": "a todo app", "urgent": true }))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_message(status, &body).contains("urgent"), "{body}");

    // Nothing was stored, and no turn was recorded.
    assert_eq!(app.messages(&id).await, before);
    let (_, c) = app.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(c["turns"].as_array().unwrap().len(), 1, "{c}");

    // And the conversation still works: the next turn is number 2.
    let next = app.say(&id, "a todo app").await;
    assert_eq!(next["number"], json!(2));
    assert_eq!(next["answer"], json!(ANSWER));
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_errors() {
    let app = App::spawn().await;
    let (status, body) = app.get("/api/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(error_message(status, &body), "no such endpoint");
    let (status, body) = app.post_json("/healthz", &serde_json::json!({})).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(error_message(status, &body).contains("method"), "{body}");
}

// ---- Accounts, tenancy, publishing ----

/// A two-agent agency on the rules model: the manager asks the echoer, who answers with
/// `reply` and the message; the manager passes it to the user.
fn echo_draft(reply: &str) -> Value {
    json!({
        "name": "echo",
        "manager": "boss",
        "agents": [
            { "name": "boss", "model": "builtin/rules", "rules": [
                { "when": "user", "do": "{{message}}", "send_to": ["echoer"] },
                { "when": "echoer", "do": "{{message}}", "send_to": ["user"] }
            ]},
            { "name": "echoer", "model": "builtin/rules", "rules": [
                { "when": "boss", "do": format!("{reply} {{{{message}}}}"), "send_to": ["boss"] }
            ]}
        ]
    })
}

impl App {
    async fn send(&self, req: reqwest::RequestBuilder) -> (StatusCode, Value) {
        read(req.send().await.unwrap()).await
    }

    /// One Chat Completions request to `agency` with `key`: the status and the answer (or the
    /// error message).
    async fn complete(&self, agency: &str, key: &str, text: &str) -> (StatusCode, String) {
        let res = reqwest::Client::new()
            .post(self.url(&format!("/api/agency/{agency}/chat/completions")))
            .bearer_auth(key)
            .json(&json!({ "model": "x", "messages": [{ "role": "user", "content": text }] }))
            .send()
            .await
            .unwrap();
        let (status, body) = read(res).await;
        let text = if status == StatusCode::OK {
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        } else {
            body["error"]["message"].as_str().unwrap().to_string()
        };
        (status, text)
    }
}

#[tokio::test]
async fn the_api_serves_the_published_version_only() {
    let app = App::spawn().await;
    let (status, created) = app
        .send(
            app.client
                .post(app.url("/api/agencies"))
                .json(&echo_draft("one:")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["published_version"], Value::Null);
    let id = created["id"].as_str().unwrap().to_string();

    let (status, key) = app
        .send(
            app.client
                .post(app.url(&format!("/api/agencies/{id}/keys")))
                .json(&json!({ "name": "prod", "expires_in": "30d" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let key = key["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("agk_"));

    // A draft is not reachable through the API.
    let (status, message) = app.complete(&id, &key, "hi").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{message}");
    assert!(message.contains("not published"), "{message}");

    let (status, v1) = app
        .send(
            app.client
                .post(app.url(&format!("/api/agencies/{id}/publish"))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v1}");
    assert_eq!(v1["version"], json!(1));
    assert_eq!(
        app.complete(&id, &key, "hi").await,
        (StatusCode::OK, "one: hi".into())
    );

    // Editing the draft changes nothing served until it is published.
    let (status, edited) = app
        .send(
            app.client
                .put(app.url(&format!("/api/agencies/{id}")))
                .json(&echo_draft("two:")),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["published_version"], json!(1));
    assert_eq!(
        app.complete(&id, &key, "hi").await,
        (StatusCode::OK, "one: hi".into())
    );

    // The playground runs the draft meanwhile.
    let (status, c) = app
        .send(
            app.client
                .post(app.url(&format!("/api/agencies/{id}/conversations")))
                .json(&json!({ "on": "draft" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    assert_eq!(c["version"], Value::Null);
    let turn = app.say(c["id"].as_str().unwrap(), "hi").await;
    assert_eq!(turn["answer"], json!("two: hi"));

    let (status, v2) = app
        .send(
            app.client
                .post(app.url(&format!("/api/agencies/{id}/publish"))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v2}");
    assert_eq!(v2["version"], json!(2));
    assert_eq!(
        app.complete(&id, &key, "hi").await,
        (StatusCode::OK, "two: hi".into())
    );

    // Earlier versions stay readable.
    let (_, versions) = app.get(&format!("/api/agencies/{id}/versions")).await;
    let numbers: Vec<u64> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 1]);
    let (status, first) = app.get(&format!("/api/agencies/{id}/versions/1")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(
        first["agency"]["agents"][1]["rules"][0]["do"],
        json!("one: {{message}}")
    );

    // A revoked key is refused at once.
    let (status, _) = app
        .send(
            app.client
                .delete(app.url(&format!("/api/agencies/{id}/keys/prod"))),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, message) = app.complete(&id, &key, "hi").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{message}");
    let (_, keys) = app.get(&format!("/api/agencies/{id}/keys")).await;
    assert_eq!(keys[0]["state"], json!("revoked"), "{keys}");
    assert_eq!(keys[0].get("hash"), None, "{keys}");
}

#[tokio::test]
async fn a_keys_budget_is_set_changed_seen_and_refuses_as_openai_does() {
    let app = App::spawn().await;
    let (_, created) = app
        .send(
            app.client
                .post(app.url("/api/agencies"))
                .json(&echo_draft("b:")),
        )
        .await;
    let id = created["id"].as_str().unwrap().to_string();
    app.send(
        app.client
            .post(app.url(&format!("/api/agencies/{id}/publish"))),
    )
    .await;
    let keys = app.url(&format!("/api/agencies/{id}/keys"));
    // A budget of nothing: every call is refused.
    let (status, key) = app
        .send(app.client.post(&keys).json(&json!({
            "name": "app", "budget_usd": 0, "budget_period": "day", "user_budget_usd": "0.5"
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    assert_eq!(key["budget_usd"], json!(0.0));
    assert_eq!(key["budget_period"], json!("day"));
    assert_eq!(key["user_budget_usd"], json!(0.5));
    let plain = key["key"].as_str().unwrap().to_string();
    let res = reqwest::Client::new()
        .post(app.url(&format!("/api/agency/{id}/chat/completions")))
        .bearer_auth(&plain)
        .json(&json!({ "model": "x", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    let (status, body) = read(res).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], json!("insufficient_quota"));
    assert_eq!(body["error"]["type"], json!("insufficient_quota"));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("API key `app`'s budget of $0 a day is spent"),
        "{message}"
    );

    // Raised, at once; what is not named stays.
    let one = app.url(&format!("/api/agencies/{id}/keys/app"));
    let (status, changed) = app
        .send(app.client.patch(&one).json(&json!({ "budget_usd": 5 })))
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["budget_usd"], json!(5.0));
    assert_eq!(changed["user_budget_usd"], json!(0.5));
    assert_eq!(
        app.complete(&id, &plain, "hi").await,
        (StatusCode::OK, "b: hi".into())
    );
    let (_, listed) = app.get(&format!("/api/agencies/{id}/keys")).await;
    assert_eq!(listed[0]["spent_usd"], json!(0.0), "{listed}");
    let (status, spend) = app.get(&format!("/api/agencies/{id}/keys/app/spend")).await;
    assert_eq!(status, StatusCode::OK, "{spend}");
    assert_eq!(spend["periods"].as_array().unwrap().len(), 1, "{spend}");
    // `null` removes a budget; a bad period is refused at its field.
    let (_, changed) = app
        .send(
            app.client
                .patch(&one)
                .json(&json!({ "user_budget_usd": null })),
        )
        .await;
    assert_eq!(changed["user_budget_usd"], Value::Null);
    let (status, bad) = app
        .send(
            app.client
                .patch(&one)
                .json(&json!({ "budget_period": "year" })),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    assert_eq!(bad["error"]["fields"][0]["path"], json!("budget_period"));
    let (status, _) = app
        .send(
            app.client
                .patch(app.url(&format!("/api/agencies/{id}/keys/nope")))
                .json(&json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, spend) = app.get(&format!("/api/agencies/{id}/spend")).await;
    assert_eq!((status, spend), (StatusCode::OK, json!([])));
}

#[tokio::test]
async fn drafts_are_validated_field_by_field() {
    let app = App::spawn().await;
    let mut draft = echo_draft("x");
    draft["agents"][1]["rules"][0]["send_to"] = json!(["nobody"]);
    draft["agents"][0]["model"] = json!("nomodel");
    let (status, body) = app
        .send(app.client.post(app.url("/api/agencies")).json(&draft))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let paths: Vec<&str> = body["error"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"agents[0].model"), "{body}");
    assert!(paths.contains(&"agents[1].rules[0].send_to"), "{body}");
    let (_, list) = app.get("/api/agencies").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "nothing stored: {list}");

    // A name taken by another of the user's agencies is the name field's problem.
    let mut dup = echo_draft("x");
    dup["name"] = json!("studio");
    let (status, body) = app
        .send(app.client.post(app.url("/api/agencies")).json(&dup))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["fields"][0]["path"], json!("name"), "{body}");

    // The preview compiles each agent's prompt, rules included, and saves nothing.
    let (status, preview) = app
        .send(
            app.client
                .post(app.url("/api/agencies/preview"))
                .json(&echo_draft("x")),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["prompts"][0]["agent"], json!("boss"));
    let prompt = preview["prompts"][1]["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("You are echoer (#"), "{prompt}");
    assert!(
        prompt.contains(
            "- When a message is from #1 (boss): x {{message}}. Send your response to #1 (boss)."
        ),
        "{prompt}"
    );

    // An account's agency may not start a process (a stdio MCP server) nor read the server's
    // variables: refused at those fields, with their lines, and nothing stored.
    let (status, body) = app
        .send(app.client.post(app.url("/api/agencies/import")).body(
            "name: tooled\nmanager: a\nmcp_servers:\n  files: { command: sh, args: [-c, \"id\"] }\n  web: { url: \"https://mcp.example.com/mcp\", headers_env: { Authorization: HOME } }\nagents:\n  - name: a\n    model: builtin/rules\n    tools: [files/*]\n",
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let fields = body["error"]["fields"].as_array().unwrap();
    let at = |path: &str| {
        fields
            .iter()
            .find(|f| f["path"] == json!(path))
            .unwrap_or_else(|| panic!("no problem at {path}: {body}"))
    };
    assert!(
        at("mcp_servers.files.command")["message"]
            .as_str()
            .unwrap()
            .starts_with("line 4"),
        "{body}"
    );
    assert!(
        at("mcp_servers.web.headers_env")["message"]
            .as_str()
            .unwrap()
            .starts_with("line 5"),
        "{body}"
    );
    // The same through the JSON API.
    let mut draft = echo_draft("x");
    draft["mcp_servers"] = json!({"files": {"command": "sh"}});
    let (status, body) = app
        .send(app.client.post(app.url("/api/agencies")).json(&draft))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["error"]["fields"][0]["path"],
        json!("mcp_servers.files.command"),
        "{body}"
    );
    let (_, list) = app.get("/api/agencies").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "nothing stored: {list}");

    // An agency file with a problem names its line.
    let (status, body) =
        app.send(app.client.post(app.url("/api/agencies/import")).body(
            "name: broken\nmanager: ghost\nagents:\n  - name: a\n    model: builtin/rules\n",
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["fields"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 2"),
        "{body}"
    );
}

#[tokio::test]
async fn another_users_things_do_not_exist_for_you() {
    let app = App::spawn().await;
    let studio = app.studio_id.clone();
    let conversation = app.new_conversation().await;
    app.say(&conversation, "a todo app").await;
    let (status, _) = app
        .send(
            app.client
                .post(app.url(&format!("/api/agencies/{studio}/keys")))
                .json(&json!({ "name": "prod" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let bob = signed_up(&app.base, "bob@example.com").await;
    let (_, mine) = read(bob.get(app.url("/api/agencies")).send().await.unwrap()).await;
    assert_eq!(mine, json!([]), "Bob sees none of Ada's agencies");

    let c = &conversation;
    let requests = [
        bob.get(app.url(&format!("/api/agencies/{studio}"))),
        bob.get(app.url("/api/agencies/studio")),
        bob.put(app.url(&format!("/api/agencies/{studio}")))
            .json(&echo_draft("x")),
        bob.delete(app.url(&format!("/api/agencies/{studio}"))),
        bob.get(app.url(&format!("/api/agencies/{studio}/export"))),
        bob.post(app.url(&format!("/api/agencies/{studio}/publish"))),
        bob.get(app.url(&format!("/api/agencies/{studio}/versions"))),
        bob.get(app.url(&format!("/api/agencies/{studio}/versions/1"))),
        bob.get(app.url(&format!("/api/agencies/{studio}/keys"))),
        bob.post(app.url(&format!("/api/agencies/{studio}/keys")))
            .json(&json!({ "name": "stolen" })),
        bob.delete(app.url(&format!("/api/agencies/{studio}/keys/prod"))),
        bob.get(app.url(&format!("/api/agencies/{studio}/conversations"))),
        bob.post(app.url(&format!("/api/agencies/{studio}/conversations"))),
        bob.get(app.url(&format!("/api/conversations/{c}"))),
        bob.get(app.url(&format!("/api/conversations/{c}/messages"))),
        bob.post(app.url(&format!("/api/conversations/{c}/messages")))
            .json(&json!({ "text": "hi" })),
        bob.get(app.url(&format!("/api/conversations/{c}/turns/1"))),
        bob.get(app.url(&format!("/api/conversations/{c}/events"))),
    ];
    for req in requests {
        let req = req.build().unwrap();
        let what = format!("{} {}", req.method(), req.url().path());
        let res = bob.execute(req).await.unwrap();
        let (status, body) = read(res).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{what}: {body}");
    }

    // Nothing of Ada's changed.
    let (status, detail) = app.get(&format!("/api/agencies/{studio}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_is_studio(&detail, &studio);
    let (_, keys) = app.get(&format!("/api/agencies/{studio}/keys")).await;
    let keys: Vec<(&str, &str)> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["name"].as_str().unwrap(), k["state"].as_str().unwrap()))
        .collect();
    assert_eq!(keys, [("prod", "active")]);
    let (_, c) = app.get(&format!("/api/conversations/{conversation}")).await;
    assert_eq!(c["turns"].as_array().unwrap().len(), 1, "{c}");
    let (_, versions) = app.get(&format!("/api/agencies/{studio}/versions")).await;
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
}

#[tokio::test]
async fn accounts_sign_up_log_in_and_out() {
    let app = App::spawn().await;
    let anon = reqwest::Client::new();
    let signup = |body: Value| anon.post(app.url("/api/auth/signup")).json(&body).send();
    for (body, field) in [
        (
            json!({ "email": "not-an-email", "password": "long enough" }),
            "email",
        ),
        (
            json!({ "email": "eve@example.com", "password": "short" }),
            "password",
        ),
    ] {
        let (status, out) = read(signup(body).await.unwrap()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
        assert_eq!(out["error"]["fields"][0]["path"], json!(field), "{out}");
    }

    let login = |password: &str| {
        anon.post(app.url("/api/auth/login"))
            .json(&json!({ "email": "ada@example.com", "password": password }))
            .send()
    };
    let (status, out) = read(login("wrong password").await.unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{out}");
    let res = login("correct horse battery").await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let second_session = cookie.split(';').next().unwrap().to_string();

    // Without the CSRF token, nothing changes.
    let (status, out) = read(
        anon.post(app.url("/api/agencies"))
            .header("cookie", &second_session)
            .json(&echo_draft("x"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{out}");
    let (_, list) = app.get("/api/agencies").await;
    assert_eq!(list.as_array().unwrap().len(), 1);

    // A password change needs the current one, and ends the other sessions.
    let change = |current: &str, new: &str| {
        app.client
            .post(app.url("/api/auth/password"))
            .json(&json!({ "current_password": current, "new_password": new }))
            .send()
    };
    let (status, out) = read(change("nope", "a new password").await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(out["error"]["fields"][0]["path"], json!("current_password"));
    let res = change("correct horse battery", "a new password")
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let other = anon
        .get(app.url("/api/auth/me"))
        .header("cookie", &second_session)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::UNAUTHORIZED);
    let (status, me) = app.get("/api/auth/me").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["email"], json!("ada@example.com"));
    assert_eq!(me.get("password_hash"), None);
    assert_eq!(
        read(login("correct horse battery").await.unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        read(login("a new password").await.unwrap()).await.0,
        StatusCode::OK
    );

    // Logging out ends the session and clears the cookie.
    let res = app
        .client
        .post(app.url("/api/auth/logout"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert!(
        res.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let (status, _) = app.get("/api/auth/me").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn failed_log_ins_are_limited_per_email_and_address_without_locking_out_the_owner() {
    // As behind a proxy on this machine, which names each client in X-Forwarded-For.
    let app = App::spawn_with(agency_server::Connections {
        trusted_proxies: agency_server::TrustedProxies::parse(&["127.0.0.1", "::1"]).unwrap(),
        ..Default::default()
    })
    .await;
    let _bob = signed_up(&app.base, "bob@example.com").await;
    let anon = reqwest::Client::new();
    let login = |email: &str, password: &str| {
        anon.post(app.url("/api/auth/login"))
            .json(&json!({ "email": email, "password": password }))
            .send()
    };
    for _ in 0..5 {
        let res = login("ada@example.com", "not the password").await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    // Past five failures, even the right password waits: the answer says for how long.
    let res = login("ada@example.com", "correct horse battery")
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=15 * 60).contains(&wait), "{wait}");
    let (status, body) = read(res).await;
    assert!(
        error_message(status, &body).contains("too many failed log-ins"),
        "{body}"
    );
    // The log-in page says so too, at its form.
    let res = anon
        .post(app.url("/login"))
        .header("origin", &app.base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("email=ada%40example.com&password=correct+horse+battery")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().contains_key("retry-after"));
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("too many failed log-ins")
    );
    // Someone else, from the same address, still gets in.
    let res = login("bob@example.com", "correct horse battery")
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // And so does Ada, from her own address: someone else's failures do not lock her out.
    let res = anon
        .post(app.url("/api/auth/login"))
        .header("x-forwarded-for", "198.51.100.7")
        .json(&json!({ "email": "ada@example.com", "password": "correct horse battery" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_client_cannot_name_its_own_address_unless_it_is_a_trusted_proxy() {
    // No proxy named: what a client writes in X-Forwarded-For or Forwarded is not its address.
    let app = App::spawn().await;
    let anon = reqwest::Client::new();
    let login = |password: &str, header: (&str, String)| {
        anon.post(app.url("/api/auth/login"))
            .header(header.0, header.1)
            .json(&json!({ "email": "ada@example.com", "password": password }))
            .send()
    };
    for i in 0..5 {
        // Each failure from "another" address, as a spoofer would send them.
        let header = ("x-forwarded-for", format!("198.51.100.{i}"));
        let res = login("not the password", header).await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    for header in [
        ("x-forwarded-for", "203.0.113.7".to_string()),
        ("forwarded", "for=203.0.113.8".to_string()),
    ] {
        let res = login("correct horse battery", header).await.unwrap();
        assert_eq!(
            res.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "the failures counted against the real address, which is still limited"
        );
    }
}

#[tokio::test]
async fn a_turn_costs_its_calls_at_the_prices_of_the_agency_file() {
    let app = App::spawn().await;
    let model = agency_fakes::Fake::start().await;
    // The manager answers the user at once: one call, 1,000 tokens in and 200 out.
    model.otherwise(agency_fakes::openai::completion(
        r#"{"to": 0, "context": "done"}"#,
        1000,
        200,
    ));
    let file = format!(
        "name: priced\nmanager: boss\nproviders:\n  fake:\n    kind: openai\n    base_url: {}/v1\n    prices:\n      cheap: {{ input: 2.50, output: 10 }}\nagents:\n  - name: boss\n    model: fake/cheap\n  - name: helper\n    model: fake/unpriced\n",
        model.url
    );
    let res = app
        .client
        .post(app.url("/api/agencies/import"))
        .header("content-type", "application/yaml")
        .body(file)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let (_, draft) = app.get("/api/agencies/priced").await;
    assert_eq!(
        draft["draft"]["providers"]["fake"]["prices"],
        json!({ "cheap": { "input": 2.5, "output": 10 } })
    );
    let (status, created) = app
        .post_json(
            "/api/agencies/priced/conversations",
            &json!({ "on": "published" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap();
    let said = app.say(id, "hello").await;
    // Agent by agent too: the boss alone was called.
    assert_eq!(
        said["agent_costs"],
        json!([{ "agent": "boss", "cost_usd": "0.004500" }])
    );
    // The stored turn (what a page shows after a reload) says the same, from its replies.
    let (status, stored) = app.get(&format!("/api/conversations/{id}/turns/1")).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["agent_costs"], said["agent_costs"], "{stored}");
    let (_, conversation) = app.get(&format!("/api/conversations/{id}")).await;
    let turn = &conversation["turns"][0];
    assert_eq!(turn["usage"]["total_tokens"], json!(1200), "{conversation}");
    // 1,000 × $2.50/M + 200 × $10/M.
    assert_eq!(turn["cost_usd"], json!("0.004500"), "{conversation}");

    // A price that is not an amount is refused at its field.
    let mut bad = draft["draft"].clone();
    bad["providers"]["fake"]["prices"]["cheap"]["input"] = json!("-1");
    let res = app
        .client
        .put(app.url("/api/agencies/priced"))
        .json(&bad)
        .send()
        .await
        .unwrap();
    let (status, body) = read(res).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["error"]["fields"][0]["path"],
        json!("providers.fake.prices.cheap.input")
    );
}

// ---- Roundtable rooms ----

#[tokio::test]
async fn a_room_of_the_studio_answers_in_parallel_and_keeps_its_flags() {
    let app = App::spawn().await;
    let (status, created) = app
        .send(
            app.client
                .post(app.url("/api/rooms"))
                .json(&json!({ "name": "standup", "agency": "studio" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let room = created["room"]["id"].as_str().unwrap().to_string();
    let names: Vec<&str> = created["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["manager", "programmer", "reviewer"]);
    let reviewer = created["participants"][2]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The agency's agents bring their tools; an agent added by hand names its own, each
    // checked against what its server lists.
    assert_eq!(created["participants"][2]["tools"], json!(["builtin/echo"]));
    let (status, refused) = app
        .send(
            app.client
                .post(app.url(&format!("/api/rooms/{room}/participants")))
                .json(&json!({ "name": "clock", "model": "builtin/rules", "tools": ["builtin/nope"] })),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(
        refused["error"]["fields"][0]["path"],
        json!("tools[0]"),
        "{refused}"
    );
    let (status, clock) = app
        .send(
            app.client
                .post(app.url(&format!("/api/rooms/{room}/participants")))
                .json(
                    &json!({ "name": "clock", "model": "builtin/rules", "tools": ["builtin/now"] }),
                ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{clock}");
    assert_eq!(clock["tools"], json!(["builtin/now"]));
    let (status, _) = app
        .send(app.client.delete(app.url(&format!(
            "/api/rooms/{room}/participants/{}",
            clock["id"].as_str().unwrap()
        ))))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Every enabled agent answers (the rules model, with no rule for a room, echoes).
    let (status, posted) = app
        .send(
            app.client
                .post(app.url(&format!("/api/rooms/{room}/messages?wait=true")))
                .json(&json!({ "text": "status?" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    assert_eq!(posted["message"]["kind"], json!("person"));
    assert_eq!(posted["message"]["command"], json!(false));
    assert_eq!(posted["answering"].as_array().unwrap().len(), 3);
    let answers = posted["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 3, "{posted}");
    assert!(
        answers.iter().all(|a| a["kind"] == json!("agent")),
        "{posted}"
    );

    // Disable the reviewer, untick the person's message: stored, and read back.
    let (status, p) = app
        .send(
            app.client
                .patch(app.url(&format!("/api/rooms/{room}/participants/{reviewer}")))
                .json(&json!({ "enabled": false })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["enabled"], json!(false));
    let first = posted["message"]["id"].as_str().unwrap();
    let (status, _) = app
        .send(
            app.client
                .patch(app.url(&format!("/api/rooms/{room}/messages/{first}")))
                .json(&json!({ "included": false })),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, posted) = app
        .send(
            app.client
                .post(app.url(&format!("/api/rooms/{room}/messages?wait=true")))
                .json(&json!({ "text": "and now?" })),
        )
        .await;
    assert_eq!(posted["answers"].as_array().unwrap().len(), 2, "{posted}");

    let (status, stored) = app.get(&format!("/api/rooms/{room}")).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    let messages = stored["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1 + 3 + 1 + 2);
    assert_eq!(messages[0]["included"], json!(false));
    assert!(
        messages
            .windows(2)
            .all(|w| w[0]["seq"].as_i64() < w[1]["seq"].as_i64())
    );
    assert_eq!(stored["participants"][2]["enabled"], json!(false));

    // Too long: refused, nothing stored.
    let (status, body) = app
        .send(
            app.client
                .post(app.url(&format!("/api/rooms/{room}/messages")))
                .json(&json!({ "text": "x".repeat(5001) })),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_message(status, &body).contains("5000"), "{body}");
    let (_, again) = app.get(&format!("/api/rooms/{room}")).await;
    assert_eq!(again["messages"].as_array().unwrap().len(), messages.len());

    // Another user's room does not exist for them.
    let bob = signed_up(&app.base, "bob@example.com").await;
    for req in [
        bob.get(app.url(&format!("/api/rooms/{room}"))),
        bob.post(app.url(&format!("/api/rooms/{room}/messages")))
            .json(&json!({ "text": "hi" })),
        bob.patch(app.url(&format!("/api/rooms/{room}/messages/{first}")))
            .json(&json!({ "included": true })),
        bob.patch(app.url(&format!("/api/rooms/{room}/participants/{reviewer}")))
            .json(&json!({ "enabled": true })),
        bob.delete(app.url(&format!("/api/rooms/{room}/participants/{reviewer}"))),
        bob.post(app.url(&format!("/api/rooms/{room}/participants")))
            .json(&json!({ "name": "mole", "model": "builtin/rules" })),
        bob.get(app.url(&format!("/api/rooms/{room}/events"))),
        bob.delete(app.url(&format!("/api/rooms/{room}"))),
    ] {
        let req = req.build().unwrap();
        let what = format!("{} {}", req.method(), req.url().path());
        let (status, body) = read(bob.execute(req).await.unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{what}: {body}");
    }
    let (_, mine) = read(bob.get(app.url("/api/rooms")).send().await.unwrap()).await;
    assert_eq!(mine, json!([]));
    let (_, after) = app.get(&format!("/api/rooms/{room}")).await;
    assert_eq!(after, again, "nothing of Ada's changed");
}

#[tokio::test]
async fn a_bot_registered_in_a_room_is_called_when_tagged_or_replied_to() {
    let app = App::spawn().await;
    let bot = agency_fakes::Fake::start().await;
    bot.otherwise(agency_fakes::Reply::json(json!({"message": "on it"})));
    let (_, created) = app
        .post_json("/api/rooms", &json!({ "name": "plant" }))
        .await;
    let room = created["room"]["id"].as_str().unwrap().to_string();
    let bots = format!("/api/rooms/{room}/bots");

    let (status, registered) = app
        .post_json(
            &bots,
            &json!({ "username": "ferm", "endpoint": format!("{}/bot", bot.url), "emulates": "Fermin" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    let key = registered["caller_key"].as_str().unwrap().to_string();
    assert!(key.starts_with("ck_"), "{key}");
    assert_eq!(registered["bot"]["kind"], json!("bot"));
    assert_eq!(registered["bot"]["model"], Value::Null);
    assert_eq!(registered["bot"]["bot"]["emulates"], json!("Fermin"));
    let ferm = registered["bot"]["id"].as_str().unwrap().to_string();

    // Wrong input is refused at its field, and nothing is added.
    for (body, path) in [
        (
            json!({ "username": "ferm", "endpoint": "https://bots.example.com/x" }),
            "username",
        ),
        (
            json!({ "username": "x", "endpoint": "ftp://bots.example.com/x" }),
            "endpoint",
        ),
        (
            json!({ "username": "two words", "endpoint": "https://bots.example.com/x" }),
            "username",
        ),
    ] {
        let (status, body) = app.post_json(&bots, &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"]["fields"][0]["path"], json!(path), "{body}");
    }
    let (_, listed) = app.get(&bots).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let (_, detail) = app.get(&format!("/api/rooms/{room}")).await;
    assert!(
        !detail.to_string().contains(&key),
        "the key is never shown again"
    );

    // Tagged: the bot answers, as a reply; untagged, it is not called.
    let messages = format!("/api/rooms/{room}/messages?wait=true");
    let (_, posted) = app
        .post_json(&messages, &json!({ "text": "morning" }))
        .await;
    assert_eq!(posted["answers"], json!([]), "{posted}");
    let (status, posted) = app
        .post_json(&messages, &json!({ "text": "@ferm status?" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    assert_eq!(posted["message"]["tagged"], json!([ferm]));
    let answer = &posted["answers"][0];
    assert_eq!(answer["kind"], json!("agent"), "{posted}");
    assert_eq!(answer["text"], json!("on it"));
    assert_eq!(answer["reply_to"], posted["message"]["id"]);
    let (status, posted) = app
        .post_json(
            &messages,
            &json!({ "text": "thanks", "reply_to": answer["id"] }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    assert_eq!(
        posted["answering"],
        json!([ferm]),
        "a reply asks its author"
    );
    let calls = bot.requests();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c.headers["x-caller-key"] == key));
    assert_eq!(calls[1].body["message"]["text"], json!("thanks"));
    let (status, body) = app
        .post_json(&messages, &json!({ "text": "hm", "reply_to": "nope" }))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["fields"][0]["path"], json!("reply_to"));

    // The utility bot registers one too; its key is in this answer only.
    let (status, posted) = app
        .post_json(
            &messages,
            &json!({ "text": format!("/register qa {}/qa", bot.url) }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    let qa_key = posted["caller_key"].as_str().unwrap();
    assert_eq!(posted["answers"][0]["kind"], json!("utility"));
    // The server says what a command is, so the page need not copy its rule.
    assert_eq!(posted["message"]["command"], json!(true));
    assert_eq!(posted["answers"][0]["command"], json!(false));
    let (_, detail) = app.get(&format!("/api/rooms/{room}")).await;
    assert!(!detail.to_string().contains(qa_key), "{detail}");

    // Another user's room has no bots for them.
    let bob = signed_up(&app.base, "bob@example.com").await;
    for req in [
        bob.get(app.url(&bots)),
        bob.post(app.url(&bots))
            .json(&json!({ "username": "mole", "endpoint": "https://bots.example.com/m" })),
        bob.delete(app.url(&format!("{bots}/ferm"))),
    ] {
        let (status, body) = read(bob.execute(req.build().unwrap()).await.unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
    let res = app
        .client
        .delete(app.url(&format!("{bots}/ferm")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let res = app
        .client
        .delete(app.url(&format!("{bots}/ferm")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let (_, listed) = app.get(&bots).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["qa"]);
}

#[tokio::test]
async fn saved_roles_are_pointed_to_edited_and_outlived() {
    let app = App::spawn().await;
    let (status, critic) = app
        .post_json(
            "/api/definitions",
            &json!({ "kind": "role", "name": "critic", "text": "finds the flaws" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{critic}");
    let id = critic["id"].as_str().unwrap().to_string();
    for (body, path) in [
        (json!({ "kind": "mood", "name": "x", "text": "y" }), "kind"),
        (
            json!({ "kind": "role", "name": "CRITIC", "text": "y" }),
            "name",
        ),
        (json!({ "kind": "role", "name": "", "text": "" }), "name"),
    ] {
        let (status, body) = app.post_json("/api/definitions", &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"]["fields"][0]["path"], json!(path), "{body}");
    }
    let (_, created) = app.post_json("/api/rooms", &json!({ "name": "r" })).await;
    let room = created["room"]["id"].as_str().unwrap().to_string();
    let (status, ann) = app
        .post_json(
            &format!("/api/rooms/{room}/participants"),
            &json!({ "name": "ann", "model": "builtin/rules", "role_id": id }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{ann}");
    assert_eq!(ann["role"], json!("finds the flaws"));
    assert_eq!(ann["role_id"], json!(id));

    let res = app
        .client
        .put(app.url(&format!("/api/definitions/{id}")))
        .json(&json!({ "name": "critic", "text": "finds every flaw" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (_, detail) = app.get(&format!("/api/rooms/{room}")).await;
    assert_eq!(detail["participants"][0]["role"], json!("finds every flaw"));

    // Bob can neither see, change, delete nor point to it.
    let bob = signed_up(&app.base, "bob@example.com").await;
    let (_, theirs) = read(bob.get(app.url("/api/definitions")).send().await.unwrap()).await;
    assert_eq!(theirs, json!([]));
    for req in [
        bob.put(app.url(&format!("/api/definitions/{id}")))
            .json(&json!({ "name": "mine", "text": "now" })),
        bob.delete(app.url(&format!("/api/definitions/{id}"))),
    ] {
        let (status, body) = read(bob.execute(req.build().unwrap()).await.unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
    let (_, bobs) = read(
        bob.post(app.url("/api/rooms"))
            .json(&json!({ "name": "b" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let bobs = bobs["room"]["id"].as_str().unwrap();
    let (status, body) = read(
        bob.post(app.url(&format!("/api/rooms/{bobs}/participants")))
            .json(&json!({ "name": "x", "model": "builtin/rules", "role_id": id }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["fields"][0]["path"], json!("role_id"));

    // Deleted, the agent keeps the text.
    let res = app
        .client
        .delete(app.url(&format!("/api/definitions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let (_, detail) = app.get(&format!("/api/rooms/{room}")).await;
    assert_eq!(detail["participants"][0]["role"], json!("finds every flaw"));
    assert_eq!(detail["participants"][0]["role_id"], Value::Null);
    let (_, left) = app.get("/api/definitions").await;
    assert_eq!(left, json!([]));
}

#[tokio::test]
async fn mcp_credentials_are_stored_sealed_and_shown_by_header_name_only() {
    let app = App::spawn().await;
    let put = |server: &str, headers: Value| {
        app.client
            .put(app.url(&format!("/api/mcp-credentials/{server}")))
            .json(&json!({ "headers": headers }))
    };
    let (status, stored) = app
        .send(put(
            "search",
            json!({ "Authorization": "Bearer s3cret-value" }),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["server"], json!("search"));
    assert_eq!(stored["headers"], json!(["authorization"]));
    let (status, listed) = app.get("/api/mcp-credentials").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains("s3cret"), "{listed}");
    // Not a provider key.
    let (_, keys) = app.get("/api/provider-keys").await;
    assert_eq!(keys, json!([]));
    // Another account sees none of them.
    let bob = signed_up(&app.base, "bob@example.com").await;
    let (_, bobs) = read(
        bob.get(app.url("/api/mcp-credentials"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bobs, json!([]));

    for (server, headers, path) in [
        ("search", json!({ "Host": "elsewhere" }), "headers"),
        ("search", json!({}), "headers"),
        ("Search!", json!({ "X-Key": "v" }), "server"),
    ] {
        let (status, refused) = app.send(put(server, headers)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(
            refused["error"]["fields"][0]["path"],
            json!(path),
            "{refused}"
        );
    }
    let (status, _) = app
        .send(app.client.delete(app.url("/api/mcp-credentials/search")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app
        .send(app.client.delete(app.url("/api/mcp-credentials/search")))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// What the fuzz run (tests/fuzz) found at this edge: every refusal is a 4xx in this API's
/// error shape, with its own status for size and format, and nothing makes the server panic.
#[tokio::test]
async fn hostile_input_gets_a_4xx_in_the_error_shape() {
    let app = App::spawn().await;
    let send = |req: reqwest::RequestBuilder| async move { read(req.send().await.unwrap()).await };

    // An expiry past the year 9999 panicked (`DateTime + TimeDelta` overflowed): the
    // connection closed without an answer.
    let keys = app.url("/api/agencies/studio/keys");
    for far in ["15000000w", "99999999999999d"] {
        let (status, body) = app
            .post_json(
                "/api/agencies/studio/keys",
                &json!({ "name": far, "expires_in": far }),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{far}: {body}");
        assert!(error_message(status, &body).contains("too far"), "{body}");
    }

    // JSON Schema's integers include `60.0`: taken; `60.5` is not a whole number.
    let (status, body) = app
        .post_json(
            "/api/agencies/studio/keys",
            &json!({ "name": "floaty", "rate_limit_per_minute": 60.0 }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["rate_limit_per_minute"], json!(60));
    let (status, body) = app
        .post_json(
            "/api/agencies/studio/keys",
            &json!({ "name": "half", "rate_limit_per_minute": 60.5 }),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        error_message(status, &body).contains("whole number"),
        "{body}"
    );

    // Too large: 413; not JSON: 415; both in this API's shape.
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(agency_server::MAX_BODY));
    let (status, body) = send(
        app.client
            .post(&keys)
            .header("content-type", "application/json")
            .body(big),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(error_message(status, &body).contains("MiB"), "{body}");
    let (status, body) = send(app.client.post(&keys).body("name=plain")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    error_message(status, &body);

    // An agency file that is not UTF-8, or too large.
    let import = app.url("/api/agencies/import");
    let (status, body) = send(app.client.post(&import).body(vec![0xff, 0xfe, 0x00])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    error_message(status, &body);
    let (status, body) = send(
        app.client
            .post(&import)
            .body(vec![b'#'; agency_server::MAX_BODY + 1]),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");

    // A query that is not of its type was axum's plain text.
    let (status, body) = send(app.client.post(
        app.url("/api/rooms/01a2139c-1a47-7381-9960-a7ea641b88c5/participants/x/retry?wait=maybe"),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_message(status, &body).contains("wait"), "{body}");

    // A new conversation's body is optional, may be `null`, and is checked when given.
    let conversations = app.url("/api/agencies/studio/conversations");
    let (status, body) = send(
        app.client
            .post(&conversations)
            .header("content-type", "application/json")
            .body("null"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = send(app.client.post(&conversations).json(&json!({ "at": 1 }))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_message(status, &body).contains("at"), "{body}");
}
