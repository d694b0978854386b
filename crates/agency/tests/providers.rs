//! The shipped mixed agency — OpenAI, Anthropic and a local OpenAI-compatible server side by
//! side — runs a routed turn through the real binary, against fakes of the three servers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use agency_fakes::{Fake, anthropic, openai};
use serde_json::Value;

fn agency(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_agency"))
        .current_dir(dir)
        .env_remove("AGENCY_DB")
        .env_remove("AGENCY_CONFIG")
        .env_remove("AGENCY_MASTER_KEY")
        .env("OPENAI_API_KEY", "sk-openai-test-0001")
        .env("ANTHROPIC_API_KEY", "sk-ant-test-0002")
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_anthropic_and_a_local_server_side_by_side() {
    let (lead, critic, coder) = (
        Fake::start().await,
        Fake::start().await,
        Fake::start().await,
    );
    lead.push(openai::completion(
        r#"{"to": 3, "context": "Write fizzbuzz in Rust."}"#,
        120,
        12,
    ))
    .push(openai::completion(
        r#"{"to": 2, "context": "Review: fn fizzbuzz() {}"}"#,
        180,
        14,
    ))
    .push(openai::completion(
        r#"{"to": 0, "context": "Here is fizzbuzz, reviewed."}"#,
        240,
        9,
    ));
    coder.push(openai::completion(
        r#"{"to": 1, "context": "fn fizzbuzz() {}"}"#,
        90,
        8,
    ));
    critic.push(anthropic::message(
        r#"{"to": 1, "context": "Correct and clear."}"#,
        150,
        7,
    ));

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The server's openai and anthropic providers point at the fakes; the example's own
    // `local` provider is rewritten to the third.
    std::fs::write(
        d.join("agency.yaml"),
        format!(
            "providers:\n  openai: {{ kind: openai, base_url: \"{}/v1\", api_key_env: OPENAI_API_KEY }}\n  anthropic: {{ kind: anthropic, base_url: \"{}\", api_key_env: ANTHROPIC_API_KEY }}\n",
            lead.url, critic.url
        ),
    )
    .unwrap();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mixed.yaml"
    ))
    .unwrap();
    assert!(example.contains("http://127.0.0.1:11434/v1"));
    std::fs::write(
        d.join("mixed.yaml"),
        example.replace("http://127.0.0.1:11434", &coder.url),
    )
    .unwrap();

    let base = ["--db", "sqlite://a.db", "--config", "agency.yaml"];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let d = d.to_path_buf();
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        tokio::task::spawn_blocking(move || {
            agency(&d, &args.iter().map(String::as_str).collect::<Vec<_>>())
        })
    };
    let out = run(&["import", "mixed.yaml"]).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[
        "chat",
        "mixed-team",
        "--message",
        "fizzbuzz please",
        "--json",
    ])
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turn: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(turn["answer"], "Here is fizzbuzz, reviewed.");
    assert_eq!(turn["stopped_by"], "answered");
    let hops: Vec<(String, String)> = turn["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_string(),
                e["to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = hops.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("user", "lead"),
            ("lead", "coder"),
            ("coder", "lead"),
            ("lead", "critic"),
            ("critic", "lead"),
            ("lead", "user")
        ]
    );

    // What reached each server.
    let lead_calls = lead.requests();
    assert_eq!(lead_calls.len(), 3);
    assert_eq!(lead_calls[0].path, "/v1/chat/completions");
    assert_eq!(
        lead_calls[0].headers["authorization"],
        "Bearer sk-openai-test-0001"
    );
    assert_eq!(lead_calls[0].body["model"], "gpt-4o-mini");
    assert_eq!(lead_calls[0].body["temperature"], 0.2);
    assert_eq!(lead_calls[0].body["messages"][0]["role"], "system");
    assert!(
        lead_calls[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("#0 (user)")
    );
    assert_eq!(
        lead_calls[0].body["messages"][1]["content"],
        r#"{"from":0,"context":"fizzbuzz please"}"#
    );
    // Its second call carries its own first reply and the coder's answer.
    let second = lead_calls[1].body["messages"].as_array().unwrap();
    assert_eq!(
        second.last().unwrap()["content"],
        r#"{"from":3,"context":"fn fizzbuzz() {}"}"#
    );
    assert_eq!(second[second.len() - 2]["role"], "assistant");

    let coder_calls = coder.requests();
    assert_eq!(coder_calls.len(), 1);
    assert!(
        !coder_calls[0].headers.contains_key("authorization"),
        "a local server gets no key"
    );
    assert_eq!(coder_calls[0].body["model"], "qwen2.5-coder");
    assert_eq!(coder_calls[0].body["temperature"], 0.0);

    let critic_calls = critic.requests();
    assert_eq!(critic_calls.len(), 1);
    assert_eq!(critic_calls[0].path, "/v1/messages");
    assert_eq!(critic_calls[0].headers["x-api-key"], "sk-ant-test-0002");
    assert_eq!(critic_calls[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(critic_calls[0].body["model"], "claude-sonnet-4-5");
    assert_eq!(critic_calls[0].body["max_tokens"], 1024);
    assert!(
        critic_calls[0].body["system"]
            .as_str()
            .unwrap()
            .contains("You are critic (#2)")
    );
    assert_eq!(critic_calls[0].body["messages"][0]["role"], "user");

    // Usage sums every model call of the turn: 3 of the lead's, the coder's and the critic's.
    assert_eq!(turn["usage"]["prompt_tokens"], 120 + 180 + 240 + 90 + 150);
    assert_eq!(turn["usage"]["completion_tokens"], 12 + 14 + 9 + 8 + 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_failure_names_the_agent_the_provider_and_the_status() {
    let lead = Fake::start().await;
    lead.push(openai::invalid_key());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    std::fs::write(
        d.join("team.yaml"),
        format!(
            "name: t\nmanager: lead\nproviders:\n  cloud: {{ kind: openai, base_url: \"{}/v1\", api_key_env: OPENAI_API_KEY }}\nagents:\n  - {{ name: lead, model: cloud/gpt-4o }}\n",
            lead.url
        ),
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let import = agency(&d, &["--db", "sqlite://a.db", "import", "team.yaml"]);
        assert!(
            import.status.success(),
            "{}",
            String::from_utf8_lossy(&import.stderr)
        );
        agency(
            &d,
            &["--db", "sqlite://a.db", "chat", "t", "--message", "hi"],
        )
    })
    .await
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lead"), "{stderr}");
    assert!(
        stderr.contains("cloud: HTTP 401: Incorrect API key provided"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("sk-openai-test-0001"),
        "the key is never shown: {stderr}"
    );
    assert_eq!(lead.requests().len(), 1, "a 401 is not retried");
}
