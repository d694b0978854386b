//! Turns whose agents call stock MCP servers nobody here wrote (installed by
//! `tests/mcp/install`; under `CI=true` a missing server fails the suite): an LLM agent (a fake
//! OpenAI or Anthropic server answering with tool calls) reads a file through
//! server-filesystem and hands it on; a long tool's progress reaches the event stream, a
//! cancel stops it, and a timeout is an error result the agent goes on with.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;
#[path = "../../agency-tools/tests/common/mod.rs"]
mod stock;

use std::time::{Duration, Instant};

use agency_core::{AgentId, MessageKind, ProviderDraft, StopReason, ToolPart};
use agency_fakes::{Call, Fake, anthropic, openai};
use agency_runtime::Event;
use common::*;

/// A boss on the rules model that sends the user's message to the librarian and the
/// librarian's answer back; the librarian on `model`, allowed to read files.
fn library(model: &str, base_url: String, kind: &str) -> agency_core::AgencyDraft {
    let mut librarian = agent(2, "librarian", model, &[]);
    librarian.tools = vec![
        "files/read_text_file".into(),
        "builtin/echo".into(),
        "files/list_directory".into(),
    ];
    let mut d = draft(
        "json",
        16,
        vec![
            agent(
                1,
                "boss",
                "builtin/rules",
                &[
                    ("user", "Read {{message}}", &["librarian"]),
                    ("librarian", "{{message}}", &["user"]),
                ],
            ),
            librarian,
        ],
    );
    d.turn_deadline_secs = Some(60);
    d.providers = vec![ProviderDraft {
        name: "llm".into(),
        kind: kind.into(),
        base_url: Some(base_url),
        ..Default::default()
    }];
    d
}

async fn reads_a_file_and_hands_it_on(kind: &str) {
    let Some(s) = stock::servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "the quarterly number is 42\n").unwrap();
    let h = Harness::with_mcp(vec![("files".into(), s.filesystem(&root))]).await;
    let fake = Fake::start().await;
    let args = serde_json::json!({ "path": root.join("notes.txt") }).to_string();
    let call = [Call::new("call_1", "files__read_text_file", &args)];
    let answer = r#"{"to": 1, "context": "The notes say 42."}"#;
    let base = match kind {
        "openai" => {
            fake.push(openai::tool_calls(None, &call, 10, 5))
                .push(openai::completion(answer, 20, 5));
            format!("{}/v1", fake.url)
        }
        _ => {
            fake.push(anthropic::tool_use(None, &call, 10, 5))
                .push(anthropic::message(answer, 20, 5));
            fake.url.clone()
        }
    };
    let agency = h.agency(library("llm/m", base, kind)).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "notes.txt".into()).await.unwrap();
    assert_eq!(out.answer, "The notes say 42.");
    assert_eq!(out.stopped_by, StopReason::Answered);

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    // Offered only the tools it may use, each once, under names the API takes.
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert_eq!(
        offered,
        [
            "builtin__echo",
            "files__list_directory",
            "files__read_text_file"
        ]
    );
    // Its second call saw the file, as the result of its own call.
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0]
            .to_string()
            .contains("the quarterly number is 42"),
        "{results:?}"
    );
    for r in &requests {
        let problems = match kind {
            "openai" => openai::problems(&r.body),
            _ => anthropic::problems(&r.body),
        };
        assert!(
            problems.is_empty(),
            "the real API would refuse: {problems:?}"
        );
    }
    let kinds: Vec<&str> = out.trace.iter().map(|e| e.kind_name()).collect();
    assert_eq!(
        kinds,
        [
            "input",
            "delivery",
            "tool_call",
            "tool_result",
            "delivery",
            "answer"
        ]
    );
    // The boss never saw the file's text: only what the librarian passed on.
    let messages = h.store.messages(c.id).await.unwrap();
    let boss = AgentId::new(1).unwrap();
    assert!(
        messages
            .iter()
            .filter(|m| m.agent == Some(boss))
            .all(|m| !m.text.contains("quarterly")),
    );
}

#[tokio::test]
async fn an_openai_agent_reads_a_file_through_server_filesystem_and_hands_it_on() {
    reads_a_file_and_hands_it_on("openai").await;
}

#[tokio::test]
async fn an_anthropic_agent_reads_a_file_through_server_filesystem_and_hands_it_on() {
    reads_a_file_and_hands_it_on("anthropic").await;
}

/// A scripted agent that starts server-everything's long-running operation.
async fn long_operation(
    timeout_secs: Option<u64>,
    duration: u32,
) -> Option<(Harness, agency_core::Agency, std::sync::Arc<Script>)> {
    let s = stock::servers()?;
    let mut everything = s.everything();
    everything.timeout_secs = timeout_secs;
    let h = Harness::with_mcp(vec![("everything".into(), everything)]).await;
    let args: &'static str =
        Box::leak(format!(r#"{{"duration": {duration}, "steps": {duration}}}"#).into_boxed_str());
    let script = h.script(
        "w",
        vec![
            Act::Call(vec![(
                "op",
                "everything/trigger-long-running-operation",
                args,
            )]),
            Act::Say(r#"{"to": 0, "context": "went on"}"#),
        ],
    );
    let mut worker = agent(1, "worker", "script/w", &[]);
    worker.tools = vec!["everything/*".into()];
    let mut d = draft("json", 16, vec![worker]);
    d.turn_deadline_secs = Some(120);
    let agency = h.agency(d).await;
    Some((h, agency, script))
}

#[tokio::test]
async fn a_tools_progress_reaches_the_events_and_a_cancel_stops_it() {
    let Some((h, agency, _)) = long_operation(None, 30).await else {
        return;
    };
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let mut events = h.rt.subscribe();
    let (rt, id) = (h.rt.clone(), c.id);
    let turn = tokio::spawn(async move { rt.send(id, "go".into()).await });
    // The server's progress notifications arrive as events while the tool runs.
    let progress = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(Event::ToolProgress { progress, tool, .. }) = events.recv().await {
                return (progress, tool);
            }
        }
    })
    .await
    .expect("a progress event");
    assert_eq!(progress.1, "everything/trigger-long-running-operation");
    assert_eq!(progress.0.total, Some(30.0));
    let cancelled = Instant::now();
    assert!(h.rt.cancel(c.id));
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.stopped_by, StopReason::Cancelled);
    assert!(
        cancelled.elapsed() < Duration::from_secs(5),
        "at once, not after the tool"
    );
    // The call's result is written (the conversation stays whole) and says it was cancelled.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let messages = h.store.messages(c.id).await.unwrap();
        if let Some(r) = messages.iter().find(|m| m.kind == MessageKind::ToolResult) {
            assert!(matches!(&r.tool, Some(ToolPart::Result(t)) if t.is_error));
            assert!(r.text.contains("ancel"), "{}", r.text);
            break;
        }
        assert!(Instant::now() < deadline, "no result was written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_tool_past_its_timeout_is_an_error_result_and_the_turn_goes_on() {
    let Some((h, agency, script)) = long_operation(Some(2), 20).await else {
        return;
    };
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let started = Instant::now();
    let out = h.rt.send(c.id, "go".into()).await.unwrap();
    assert_eq!(out.answer, "went on");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let seen = script.seen.lock().unwrap();
    let result = seen
        .last()
        .unwrap()
        .iter()
        .find(|m| m.kind == MessageKind::ToolResult)
        .unwrap()
        .clone();
    assert!(matches!(&result.tool, Some(ToolPart::Result(t)) if t.is_error));
    assert!(
        result.text.contains("2 s") || result.text.contains("time"),
        "{}",
        result.text
    );
}

/// An account's agency whose clerk reads the header named by the user's message through the
/// account's own HTTP server `api` (tests/mcp/dynamic_server.py).
fn header_reader(url: String) -> agency_core::AgencyDraft {
    let mut clerk = agent(1, "clerk", "builtin/rules", &[]);
    clerk.tools = vec!["api/header".into()];
    clerk.rules = vec![agency_core::RuleDraft {
        when: "user".into(),
        call: Some("api/header".into()),
        with: Some(serde_json::json!({ "name": "{{message}}" })),
        action: "[{{result}}]".into(),
        send_to: vec!["user".into()],
    }];
    let mut d = draft("json", 16, vec![clerk]);
    d.mcp_servers = vec![agency_core::McpServerDraft {
        name: "api".into(),
        url: Some(url),
        ..Default::default()
    }];
    d
}

#[tokio::test]
async fn an_accounts_http_server_gets_the_credentials_it_stored_and_no_one_elses() {
    use secrecy::SecretString;
    let Some(s) = stock::servers() else { return };
    let server = s.dynamic_http();
    let h = Harness::sqlite().await;
    let put = |owner: &'static str, token: &'static str| {
        let rt = h.rt.clone();
        async move {
            rt.settings()
                .put_mcp_credentials(
                    owner,
                    "api",
                    vec![("Authorization".into(), SecretString::from(token))],
                )
                .await
        }
    };
    let stored = put("ada", "Bearer ada-token").await.unwrap();
    assert_eq!(stored.headers, ["authorization"]);
    let ada =
        h.rt.agencies()
            .save(&header_reader(server.url()), "ada")
            .await
            .unwrap();
    let bob =
        h.rt.agencies()
            .save(&header_reader(server.url()), "bob")
            .await
            .unwrap();
    let ask = |agency: agency_core::Agency| {
        let rt = h.rt.clone();
        async move {
            let c = rt.conversations().start(&agency).await.unwrap();
            rt.send(c.id, "authorization".into()).await.unwrap().answer
        }
    };
    assert_eq!(ask(ada.clone()).await, "[Bearer ada-token]");
    let bobs = ask(bob.clone()).await;
    assert!(!bobs.contains("ada-token"), "{bobs}");

    // Shown by name only, apart from provider keys, sealed at rest.
    let listed = h.rt.settings().mcp_credentials("ada").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].server.as_str(), listed[0].headers.clone()),
        ("api", vec!["authorization".to_string()])
    );
    assert!(
        h.rt.settings()
            .provider_keys("ada")
            .await
            .unwrap()
            .is_empty()
    );
    let sealed = h
        .store
        .provider_key("ada", "mcp:api")
        .await
        .unwrap()
        .unwrap();
    assert!(!String::from_utf8_lossy(&sealed.sealed).contains("ada-token"));
    assert!(!sealed.suffix.contains("oken"));

    // Replaced: the next call sends the new value; deleted: none.
    put("ada", "Bearer rotated").await.unwrap();
    assert_eq!(ask(ada.clone()).await, "[Bearer rotated]");
    assert!(
        h.rt.settings()
            .delete_mcp_credentials("ada", "api")
            .await
            .unwrap()
    );
    let after = ask(ada.clone()).await;
    assert!(!after.contains("Bearer"), "{after}");
    assert!(
        !h.rt
            .settings()
            .delete_mcp_credentials("ada", "api")
            .await
            .unwrap()
    );

    // Headers the transport sets, and bad server names, are refused at their field.
    for (server_name, header, path) in [("api", "Host", "headers"), ("API!", "X-Key", "server")] {
        match h
            .rt
            .settings()
            .put_mcp_credentials(
                "ada",
                server_name,
                vec![(header.into(), SecretString::from("v"))],
            )
            .await
        {
            Err(agency_runtime::RuntimeError::Validation(v)) => assert_eq!(v.0[0].path, path),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }
}
