//! Spec 002's tool execution progress through a real broker (Mosquitto in CI): an agent calls
//! server-everything's long-running operation (a stock MCP server, installed by
//! `tests/mcp/install`), whose progress notifications become `chat_progress` updates with
//! `"status": "processing_tool"`, `"current_operation": "tool_execution"`,
//! `progress_percentage` and `message_sequence`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "../../agency-tools/tests/common/mod.rs"]
mod stock;

use common::{Client, Server, Setup, broker};
use serde_json::Value;

fn plant_with_a_tool(name: &str, team: &str) -> String {
    format!(
        r#"
name: {name}
handle: {team}
manager: manager
agents:
  - name: manager
    handle: MGR-001
    model: builtin/rules
    rules:
      - {{ when: user, do: "Please check: {{{{message}}}}", send_to: monitor }}
      - {{ when: monitor, do: "Status: {{{{message}}}}", send_to: [user] }}
  - name: monitor
    handle: FERM-DATA-AGENT-001
    model: builtin/rules
    tools: [everything/trigger-long-running-operation]
    rules:
      - {{ when: manager, call: everything/trigger-long-running-operation,
           with: {{ duration: 1, steps: 4 }}, do: "Listened: {{{{result}}}}", send_to: manager }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_progress_is_spec_002s_tool_execution_update() {
    let Some((host, port)) = broker().await else {
        return;
    };
    let Some(servers) = stock::servers() else {
        return;
    };
    let mut server = Server::start_with(
        &host,
        port,
        Setup {
            yaml: Some(plant_with_a_tool),
            mcp_servers: vec![("everything".into(), servers.everything())],
            ..Setup::default()
        },
    )
    .await;
    let mut client = Client::connect(&host, port, &server.team).await;
    let m = server.manager.clone();
    client.wait_for_server(&m).await;
    let (cid, seen) = client.converse(&m, "pump 3").await;
    let tool: Vec<&Value> = seen
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b["status"] == "processing_tool")
        .collect();
    assert!(!tool.is_empty(), "{seen:?}");
    for u in &tool {
        assert_eq!(u["current_operation"], "tool_execution", "{u}");
        assert!(u["progress_percentage"].is_u64(), "{u}");
    }
    // The server's own notifications: counted steps, a percentage that grows to 100.
    let steps: Vec<(u64, u64)> = tool
        .iter()
        .filter_map(|u| {
            Some((
                u["message_sequence"].as_u64()?,
                u["progress_percentage"].as_u64()?,
            ))
        })
        .collect();
    assert!(steps.len() >= 2, "progress notifications: {tool:?}");
    assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0), "{steps:?}");
    assert!(
        tool.iter().any(|u| u["progress_percentage"] == 100),
        "{tool:?}"
    );
    // Other updates carry neither field.
    for (_, b) in &seen {
        if b["status"] != "processing_tool" {
            assert!(b.get("progress_percentage").is_none(), "{b}");
        }
    }
    // The answer went through the tool.
    let (_, entries) = server
        .get(&format!("/api/conversations/{cid}/entries"))
        .await;
    let entry = &entries[0];
    let response = entry["response"].as_str().unwrap();
    assert!(response.starts_with("Status: Listened: "), "{response}");
    // Every field spec 002's content query names: what the manager was sent (framed) and
    // replied, the summary, the query, the time, the usage and time taken, and the tool call
    // (who, what, with which arguments, the start of its result, how long).
    assert_eq!(entry["user_query"], "pump 3");
    assert_ne!(entry["prompt"], entry["user_query"], "{entry}");
    assert!(
        entry["prompt"].as_str().unwrap().contains("pump 3"),
        "{entry}"
    );
    assert!(entry["reply"].is_string(), "{entry}");
    assert!(
        entry["summary"].as_str().unwrap().contains("hop"),
        "{entry}"
    );
    assert!(
        entry["timestamp"].is_string() && entry["token_usage"].is_object(),
        "{entry}"
    );
    assert!(
        entry["response_time_ms"].is_u64() && entry["hops"].as_u64() >= Some(2),
        "{entry}"
    );
    let tools = entry["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{entry}");
    assert_eq!(
        tools[0]["name"],
        "everything/trigger-long-running-operation"
    );
    assert!(tools[0]["agent"].is_string(), "{entry}");
    assert!(
        tools[0]["arguments"].as_str().unwrap().contains("duration"),
        "{entry}"
    );
    assert!(tools[0]["result"].is_string(), "{entry}");
    assert_eq!(tools[0]["is_error"], false);
    assert!(tools[0]["latency_ms"].is_u64(), "{entry}");
    server.stop().await;
}
