//! The built-in tools, through the hub's one client path (an rmcp server in the process).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use agency_core::tool::{McpServer, McpTransport};
use agency_tools::{Declared, ToolHub};

fn builtin() -> McpServer {
    McpServer::new(McpTransport::Builtin)
}

async fn call(hub: &ToolHub, tool: &str, args: serde_json::Value) -> (String, bool) {
    let out = hub
        .call(&builtin(), Declared::Account, tool, &args.to_string(), None)
        .await;
    (out.text, out.is_error)
}

#[tokio::test]
async fn the_builtin_server_lists_its_tools_with_schemas() {
    let hub = ToolHub::new(false);
    let tools = hub.tools(&builtin(), Declared::Account).await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["calculate", "echo", "now"]);
    let calculate = tools.iter().find(|t| t.name == "calculate").unwrap();
    assert!(calculate.description.contains("arithmetic"));
    assert_eq!(
        calculate.input_schema["properties"]["expression"]["type"],
        "string"
    );
    assert_eq!(calculate.input_schema["required"][0], "expression");
}

#[tokio::test]
async fn calculate_follows_precedence_and_reports_errors() {
    let hub = ToolHub::new(false);
    let expr = |e: &str| serde_json::json!({ "expression": e });
    assert_eq!(
        call(&hub, "calculate", expr("2 + 3 * 4 ^ 2")).await,
        ("50".into(), false)
    );
    assert_eq!(
        call(&hub, "calculate", expr("(2 + 3) * -4 % 7")).await,
        ("-6".into(), false)
    );
    assert_eq!(
        call(&hub, "calculate", expr("1 / 3")).await,
        ("0.3333333333333333".into(), false)
    );

    let (text, is_error) = call(&hub, "calculate", expr("1 / (2 - 2)")).await;
    assert!(is_error);
    assert_eq!(text, "cannot calculate `1 / (2 - 2)`: division by zero");
    let (text, is_error) = call(&hub, "calculate", expr("2 +* 3")).await;
    assert!(is_error);
    assert!(text.contains("unexpected `*` at position 4"), "{text}");
    let (text, is_error) = call(&hub, "calculate", expr(&"(".repeat(1000))).await;
    assert!(is_error);
    assert!(text.contains("nested more than"), "{text}");

    // No expression at all: the server's own argument check.
    let (_, is_error) = call(&hub, "calculate", serde_json::json!({})).await;
    assert!(is_error);
}

#[tokio::test]
async fn now_is_the_current_utc_time() {
    let hub = ToolHub::new(false);
    let (text, is_error) = call(&hub, "now", serde_json::json!({})).await;
    assert!(!is_error, "{text}");
    assert!(text.ends_with('Z'), "{text}");
    let then = chrono::DateTime::parse_from_rfc3339(&text).unwrap();
    let skew = (chrono::Utc::now() - then.with_timezone(&chrono::Utc))
        .num_seconds()
        .abs();
    assert!(skew <= 2, "{text}");
    // Empty arguments are no arguments.
    let out = hub
        .call(&builtin(), Declared::Account, "now", "", None)
        .await;
    assert!(!out.is_error, "{}", out.text);
}

#[tokio::test]
async fn echo_returns_its_text() {
    let hub = ToolHub::new(false);
    let text = "héllo\nworld {\"json\": true}";
    assert_eq!(
        call(&hub, "echo", serde_json::json!({ "text": text })).await,
        (text.into(), false)
    );
}

#[tokio::test]
async fn many_concurrent_builtin_calls_share_one_connection() {
    let hub = ToolHub::new(false);
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let hub = hub.clone();
            tokio::spawn(async move {
                let args = serde_json::json!({ "text": i.to_string() }).to_string();
                let out = hub
                    .call(&builtin(), Declared::Operator, "echo", &args, None)
                    .await;
                (i, out)
            })
        })
        .collect();
    for call in calls {
        let (i, out) = call.await.unwrap();
        assert_eq!(out.text, i.to_string());
    }
}
