//! Agents that act: tool calls as hops of a turn, through the built-in tools (served in the
//! process by an MCP server, through the same client as any other), with the rules model and
//! scripted models standing in for LLMs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use agency_core::{AgentDraft, MessageKind, RuleDraft, StopReason, ToolPart};
use agency_runtime::LOCAL_OWNER;
use common::*;

fn clerk() -> AgentDraft {
    AgentDraft {
        id: Some(1),
        name: "clerk".into(),
        model: "builtin/rules".into(),
        tools: vec!["builtin/calculate".into()],
        rules: vec![RuleDraft {
            when: "user".into(),
            call: Some("builtin/calculate".into()),
            with: Some(serde_json::json!({"expression": "{{message}}"})),
            action: "= {{result}}".into(),
            send_to: vec!["user".into()],
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn the_rules_model_calls_a_tool_and_answers_with_its_result() {
    let h = Harness::sqlite().await;
    let agency = h.agency(draft("json", 16, vec![clerk()])).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "2 + 3 * 4".into()).await.unwrap();
    assert_eq!(out.answer, "= 14");
    assert_eq!(out.stopped_by, StopReason::Answered);
    let lines = lines(&out, &agency);
    assert_eq!(
        lines,
        [
            "user>clerk:input:2 + 3 * 4",
            r#"clerk>builtin/calculate:tool_call:{"expression":"2 + 3 * 4"}"#,
            "builtin/calculate>clerk:tool_result:14",
            "clerk>user:answer:= 14"
        ],
        "{lines:#?}"
    );
    // Persisted in the clerk's context, in order, the result linked to its call.
    let messages = h.store.messages(c.id).await.unwrap();
    let reply = messages
        .iter()
        .find(|m| m.kind == MessageKind::Reply && m.tool.is_some())
        .unwrap();
    let result = messages
        .iter()
        .find(|m| m.kind == MessageKind::ToolResult)
        .unwrap();
    assert_eq!(result.seq, reply.seq + 1);
    assert_eq!(result.linked, Some(reply.id));
    let Some(ToolPart::Calls(calls)) = &reply.tool else {
        panic!()
    };
    let Some(ToolPart::Result(r)) = &result.tool else {
        panic!()
    };
    assert_eq!(r.call_id, calls[0].id);
    assert!(!r.is_error);
    assert!(result.latency_ms.is_some());
    assert_eq!(out.hops, 3, "the call, its result and the answer");
}

#[tokio::test]
async fn a_tool_error_is_a_result_the_agent_reads_not_a_failed_turn() {
    let h = Harness::sqlite().await;
    let agency = h.agency(draft("json", 16, vec![clerk()])).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "1 / 0".into()).await.unwrap();
    assert!(out.answer.starts_with("= "), "{}", out.answer);
    assert!(out.answer.to_lowercase().contains("zero"), "{}", out.answer);
    let result = out
        .trace
        .iter()
        .find(|e| e.kind == MessageKind::ToolResult)
        .unwrap();
    assert!(result.tool.as_ref().unwrap().is_error);
}

#[tokio::test]
async fn parallel_calls_unknown_tools_and_malformed_arguments_each_get_their_result() {
    let h = Harness::sqlite().await;
    let model = h.script(
        "m",
        vec![
            Act::Call(vec![
                ("a", "builtin/calculate", r#"{"expression": "6*7"}"#),
                ("b", "builtin/echo", r#"{"text": "hi"}"#),
                ("c", "builtin/nosuch", "{}"),
                ("d", "files/read", "{}"),
                ("e", "builtin/calculate", r#"{"expression": "#),
            ]),
            Act::Say(r#"{"to": 0, "context": "done"}"#),
        ],
    );
    let mut agent = agent(1, "m", "script/m", &[]);
    agent.tools = vec!["builtin/*".into()];
    let agency = h.agency(draft("json", 16, vec![agent])).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "go".into()).await.unwrap();
    assert_eq!(out.answer, "done");
    // The second call saw every result, each after the reply that made the calls.
    let seen = model.seen.lock().unwrap();
    let last = seen.last().unwrap();
    let results: Vec<(&str, bool, &str)> = last
        .iter()
        .filter_map(|m| match &m.tool {
            Some(ToolPart::Result(r)) => Some((r.call_id.as_str(), r.is_error, m.text.as_str())),
            _ => None,
        })
        .collect();
    let by = |id: &str| results.iter().find(|r| r.0 == id).copied().unwrap();
    assert_eq!(results.len(), 5, "{results:?}");
    assert_eq!(by("a"), ("a", false, "42"));
    assert_eq!(by("b"), ("b", false, "hi"));
    assert!(
        by("c").1,
        "an unknown tool of a granted server: {:?}",
        by("c")
    );
    assert!(
        by("d").1 && by("d").2.contains("not one of your tools"),
        "{:?}",
        by("d")
    );
    assert!(by("e").1, "malformed arguments: {:?}", by("e"));
    let calls = last
        .iter()
        .position(|m| m.tool.as_ref().is_some_and(|t| !t.calls().is_empty()));
    let first_result = last.iter().position(|m| m.kind == MessageKind::ToolResult);
    assert_eq!(first_result, calls.map(|i| i + 1));
}

#[tokio::test]
async fn tools_are_checked_against_what_their_servers_list_when_saved() {
    let h = Harness::sqlite().await;
    let mut bad = clerk();
    bad.tools = vec![
        "builtin/calculate".into(),
        "builtin/nosuch".into(),
        "nowhere/x".into(),
    ];
    let e =
        h.rt.agencies()
            .save(&draft("json", 16, vec![bad]), LOCAL_OWNER)
            .await
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("agents[0].tools[1]") && e.contains("no tool `nosuch`"),
        "{e}"
    );
    assert!(
        e.contains("agents[0].tools[2]") && e.contains("no MCP server is named `nowhere`"),
        "{e}"
    );
}
