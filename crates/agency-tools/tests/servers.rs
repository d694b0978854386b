//! The hub against real, stock MCP servers nobody here wrote: server-everything and
//! server-filesystem (npm), mcp-server-time (PyPI), installed by `tests/mcp/install`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agency_core::tool::{McpServer, McpTransport};
use agency_tools::{Declared, ToolError, ToolHub};
use common::servers;

const OP: Declared = Declared::Operator;

fn names(tools: &[agency_core::tool::Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn server_everything_lists_its_tools_and_echoes() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.everything();
    let tools = hub.tools(&server, OP).await.unwrap();
    let names = names(&tools);
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(names.contains(&"trigger-long-running-operation"));
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");

    let out = hub
        .call(&server, OP, "echo", r#"{"message": "hello"}"#, None)
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "Echo: hello");
}

/// server-everything registers more tools once it is initialized, and says so with
/// `notifications/tools/list_changed`: the hub's list follows.
#[tokio::test]
async fn the_tool_list_follows_list_changed_notifications() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.everything();
    let start = Instant::now();
    loop {
        let tools = hub.tools(&server, OP).await.unwrap();
        if names(&tools).contains(&"simulate-research-query") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the list never showed the tools registered after initialization: {:?}",
            names(&tools)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn server_filesystem_reads_a_file_and_reports_a_missing_one() {
    let Some(s) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "line one\nline two\n").unwrap();
    let hub = ToolHub::new(false);
    let server = s.filesystem(&root);

    let path = root.join("notes.txt");
    let args = serde_json::json!({ "path": path }).to_string();
    let out = hub.call(&server, OP, "read_text_file", &args, None).await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "line one\nline two\n");

    // A tool error result: the server ran the tool, and the tool failed.
    let args = serde_json::json!({ "path": root.join("absent.txt") }).to_string();
    let out = hub.call(&server, OP, "read_text_file", &args, None).await;
    assert!(out.is_error);
    assert!(
        out.text.contains("ENOENT") || out.text.contains("no such file"),
        "{}",
        out.text
    );

    // Outside the allowed directory: refused by the server, as an error result.
    let args = serde_json::json!({ "path": "/etc/hostname" }).to_string();
    let out = hub.call(&server, OP, "read_text_file", &args, None).await;
    assert!(out.is_error, "{}", out.text);
}

#[tokio::test]
async fn a_hundred_concurrent_calls_on_one_server_all_come_back() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.everything(); // the default limit: 16 in flight at once
    let calls = (0..100).map(|i| {
        let hub = hub.clone();
        let server = server.clone();
        tokio::spawn(async move {
            let args = serde_json::json!({ "message": format!("call {i}") }).to_string();
            (i, hub.call(&server, OP, "echo", &args, None).await)
        })
    });
    for call in calls {
        let (i, out) = call.await.unwrap();
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(out.text, format!("Echo: call {i}"));
    }
}

#[tokio::test]
async fn progress_notifications_reach_the_caller() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.everything();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = hub
        .call(
            &server,
            OP,
            "trigger-long-running-operation",
            r#"{"duration": 1, "steps": 4}"#,
            Some(tx),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("completed"), "{}", out.text);
    let mut seen = Vec::new();
    while let Ok(p) = rx.try_recv() {
        seen.push((p.progress, p.total, p.percent()));
    }
    assert_eq!(
        seen,
        [
            (1.0, Some(4.0), Some(25)),
            (2.0, Some(4.0), Some(50)),
            (3.0, Some(4.0), Some(75)),
            (4.0, Some(4.0), Some(100))
        ]
    );
}

#[tokio::test]
async fn unknown_tools_and_malformed_arguments_are_error_results() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.everything();

    let out = hub.call(&server, OP, "no-such-tool", "{}", None).await;
    assert!(out.is_error);
    assert!(
        out.text.contains("has no tool `no-such-tool`"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains("echo"),
        "the message lists the tools: {}",
        out.text
    );

    let out = hub.call(&server, OP, "echo", r#"{"message": "#, None).await;
    assert!(out.is_error);
    assert!(out.text.contains("not valid JSON"), "{}", out.text);

    let out = hub.call(&server, OP, "echo", r#"["hello"]"#, None).await;
    assert!(out.is_error);
    assert!(out.text.contains("not an array"), "{}", out.text);

    // Well-formed, but not what the tool takes: the server says so.
    let out = hub.call(&server, OP, "echo", r#"{"msg": 1}"#, None).await;
    assert!(out.is_error, "{}", out.text);
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_at_once_and_is_restarted() {
    let Some(s) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let hub = ToolHub::new(false);
    let server = s.everything_with_pid(&pid_file);

    let first = hub.tools(&server, OP).await.unwrap();
    assert!(!first.is_empty());
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();

    let call = {
        let hub = hub.clone();
        let server = server.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let out = hub
                .call(
                    &server,
                    OP,
                    "trigger-long-running-operation",
                    r#"{"duration": 30, "steps": 30}"#,
                    None,
                )
                .await;
            (out, start.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let (out, _) = call.await.unwrap();
    let noticed = killed.elapsed();
    assert!(out.is_error);
    assert!(out.text.contains("closed the connection"), "{}", out.text);
    assert!(
        noticed < Duration::from_secs(3),
        "noticed after {noticed:?}"
    );

    // The next call starts the server again.
    let out = hub
        .call(&server, OP, "echo", r#"{"message": "again"}"#, None)
        .await;
    assert_eq!(out.text, "Echo: again");
    assert!(!out.is_error);
    let new_pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(pid, new_pid);
    eprintln!("a killed server's call failed {noticed:?} after the kill");
}

#[tokio::test]
async fn a_call_past_the_timeout_is_cancelled_and_the_server_keeps_serving() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let mut server = s.everything();
    server.timeout_secs = Some(1);
    // Started first, so the timeout is the call's alone (on a loaded machine Node may take
    // longer than the second to start: it is tried again).
    let mut attempts = 0;
    while hub.tools(&server, OP).await.is_err() {
        attempts += 1;
        assert!(
            attempts < 10,
            "server-everything did not start within 1 s, 10 times"
        );
    }

    let start = Instant::now();
    let out = hub
        .call(
            &server,
            OP,
            "trigger-long-running-operation",
            r#"{"duration": 20, "steps": 2}"#,
            None,
        )
        .await;
    let took = start.elapsed();
    assert!(out.is_error);
    assert!(
        out.text.contains("did not answer within 1 s"),
        "{}",
        out.text
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );

    let out = hub
        .call(&server, OP, "echo", r#"{"message": "still here"}"#, None)
        .await;
    assert_eq!(out.text, "Echo: still here");
}

#[tokio::test]
async fn a_server_that_cannot_start_is_an_error_result() {
    let hub = ToolHub::new(false);
    let server = common::stdio("/nonexistent/mcp-server", &[]);
    let out = hub.call(&server, OP, "anything", "{}", None).await;
    assert!(out.is_error);
    assert!(out.text.contains("cannot start"), "{}", out.text);
    assert!(matches!(
        hub.tools(&server, OP).await,
        Err(ToolError::Connect { .. })
    ));
}

#[tokio::test]
async fn streamable_http_with_the_initialize_handshake() {
    let Some(s) = servers() else { return };
    let http = s.everything_http();
    let hub = ToolHub::new(false);

    let mut server = common::http(&http.url());
    let tools = hub.tools(&server, OP).await.unwrap();
    assert!(names(&tools).contains(&"echo"));
    let out = hub
        .call(&server, OP, "echo", r#"{"message": "over http"}"#, None)
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "Echo: over http");

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = hub
        .call(
            &server,
            OP,
            "trigger-long-running-operation",
            r#"{"duration": 0.4, "steps": 2}"#,
            Some(tx),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(rx.recv().await.unwrap().progress, 1.0);

    // A header from a variable of the operator's (one cargo sets for tests): still served.
    server.transport = McpTransport::Http {
        url: http.url(),
        headers_env: BTreeMap::from([("Authorization".into(), "CARGO_PKG_NAME".into())]),
    };
    let out = hub
        .call(&server, OP, "echo", r#"{"message": "with a header"}"#, None)
        .await;
    assert_eq!(out.text, "Echo: with a header");
}

/// An HTTP server that dies fails the call in flight; once it is back (a new process, which
/// knows nothing of the old session), calls work again.
#[tokio::test]
async fn an_http_server_that_dies_and_comes_back_is_reconnected() {
    let Some(s) = servers() else { return };
    let http = s.everything_http();
    let port = http.port;
    let hub = ToolHub::new(false);
    let mut server = common::http(&http.url());
    server.timeout_secs = Some(10);
    let out = hub
        .call(&server, OP, "echo", r#"{"message": "one"}"#, None)
        .await;
    assert_eq!(out.text, "Echo: one");

    let call = {
        let (hub, server) = (hub.clone(), server.clone());
        tokio::spawn(async move {
            let args = r#"{"duration": 30, "steps": 30}"#;
            hub.call(&server, OP, "trigger-long-running-operation", args, None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = Instant::now();
    drop(http);
    let out = call.await.unwrap();
    assert!(out.is_error, "{}", out.text);
    eprintln!(
        "in flight: {:?} after the kill: {}",
        killed.elapsed(),
        out.text
    );
    assert!(killed.elapsed() < Duration::from_secs(5));

    let out = hub
        .call(&server, OP, "echo", r#"{"message": "down"}"#, None)
        .await;
    assert!(out.is_error);
    assert!(out.text.contains("Connection refused"), "{}", out.text);
    assert!(!out.text.contains("rmcp::"), "in our words: {}", out.text);

    let _back = s.everything_http_on(port);
    let out = hub
        .call(&server, OP, "echo", r#"{"message": "back"}"#, None)
        .await;
    assert_eq!(out.text, "Echo: back");
}

/// The operator's `headers_env`: each header's value read from its variable when connecting;
/// a variable that is not set is an error that names it.
#[tokio::test]
async fn http_headers_come_from_the_operators_variables() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        let _ = stream.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        String::from_utf8_lossy(&request).to_lowercase()
    });
    let hub = ToolHub::new(false);
    let mut server = McpServer::new(McpTransport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers_env: BTreeMap::from([("X-Agency-Test".into(), "CARGO_PKG_NAME".into())]),
    });
    server.timeout_secs = Some(5);
    assert!(hub.tools(&server, OP).await.is_err()); // the listener answers 503
    let request = received.join().unwrap();
    assert!(request.starts_with("post /mcp"), "{request}");
    assert!(request.contains("x-agency-test: agency-tools"), "{request}");

    let server = McpServer::new(McpTransport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers_env: BTreeMap::from([("X-Key".into(), "AGENCY_TOOLS_TEST_UNSET".into())]),
    });
    let err = hub.tools(&server, OP).await.unwrap_err();
    assert!(matches!(err, ToolError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("AGENCY_TOOLS_TEST_UNSET"), "{err}");
}

#[tokio::test]
async fn an_account_may_not_reach_loopback_unless_the_operator_allows_it() {
    let Some(s) = servers() else { return };
    let http = s.everything_http();
    let server = common::http(&http.url());

    let hub = ToolHub::new(false);
    let err = hub.tools(&server, Declared::Account).await.unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("loopback or private"), "{err}");
    let out = hub
        .call(
            &server,
            Declared::Account,
            "echo",
            r#"{"message": "x"}"#,
            None,
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.text.contains("--allow-private-addresses"),
        "{}",
        out.text
    );

    // A name that resolves to loopback is caught too.
    let by_name = common::http(&format!("http://localhost:{}/mcp", http.port));
    let err = hub.tools(&by_name, Declared::Account).await.unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)), "{err:?}");

    // The operator's own declaration of the same URL is trusted.
    assert!(hub.tools(&server, OP).await.is_ok());

    // An operator who allows private addresses lets accounts reach them.
    let open = ToolHub::new(true);
    let out = open
        .call(
            &server,
            Declared::Account,
            "echo",
            r#"{"message": "ok"}"#,
            None,
        )
        .await;
    assert_eq!(out.text, "Echo: ok");
}

#[tokio::test]
async fn an_account_may_not_declare_a_stdio_server_or_server_variables() {
    let hub = ToolHub::new(true);
    let server = common::stdio("sh", &["-c", "touch /tmp/should-not-exist"]);
    let err = hub.tools(&server, Declared::Account).await.unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)));
    assert!(err.to_string().contains("stdio"), "{err}");
    let out = hub.call(&server, Declared::Account, "x", "{}", None).await;
    assert!(out.is_error);
    assert!(out.text.contains("only the operator"), "{}", out.text);

    let server = McpServer::new(McpTransport::Http {
        url: "https://example.com/mcp".into(),
        headers_env: BTreeMap::from([("Authorization".into(), "HOME".into())]),
    });
    let err = hub.tools(&server, Declared::Account).await.unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)));
    assert!(err.to_string().contains("headers_env"), "{err}");
}

#[tokio::test]
async fn mcp_server_time_tells_the_time() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.time();
    let tools = hub.tools(&server, OP).await.unwrap();
    assert!(
        names(&tools).contains(&"get_current_time"),
        "{:?}",
        names(&tools)
    );
    let out = hub
        .call(
            &server,
            OP,
            "get_current_time",
            r#"{"timezone": "UTC"}"#,
            None,
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let answer: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    let datetime = answer["datetime"].as_str().unwrap();
    let parsed = chrono::DateTime::parse_from_rfc3339(datetime).unwrap();
    let skew = (chrono::Utc::now() - parsed.with_timezone(&chrono::Utc))
        .num_seconds()
        .abs();
    assert!(skew < 60, "{datetime}");

    let out = hub
        .call(
            &server,
            OP,
            "get_current_time",
            r#"{"timezone": "Nowhere/Atlantis"}"#,
            None,
        )
        .await;
    assert!(out.is_error, "{}", out.text);
}

/// A 2026-07-28 server (the Python SDK's) announces a changed tool list only on a
/// `subscriptions/listen` stream: the hub opens one, and its list follows.
#[tokio::test]
async fn the_tool_list_follows_changes_on_the_2026_protocol() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.dynamic();
    let mut before = hub.tools(&server, OP).await.unwrap();
    before.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(names(&before), ["add_tool", "echo", "header"]);

    let out = hub
        .call(&server, OP, "add_tool", r#"{"name": "late"}"#, None)
        .await;
    assert_eq!(out.text, "added late", "{}", out.text);
    let start = Instant::now();
    while !names(&hub.tools(&server, OP).await.unwrap()).contains(&"late") {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the list did not change"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = hub.call(&server, OP, "late", "{}", None).await;
    assert_eq!(out.text, "late");
}

/// A stateless Streamable HTTP server of the 2026-07-28 protocol: no initialize handshake.
#[tokio::test]
async fn streamable_http_on_the_2026_protocol() {
    let Some(s) = servers() else { return };
    let http = s.dynamic_http();
    let hub = ToolHub::new(false);
    let server = common::http(&http.url());
    let tools = hub.tools(&server, OP).await.unwrap();
    assert!(names(&tools).contains(&"echo"), "{:?}", names(&tools));
    let out = hub
        .call(&server, OP, "echo", r#"{"text": "stateless"}"#, None)
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "stateless");
}

#[tokio::test]
async fn images_and_resources_are_described_in_the_text() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let server = s.everything();
    let out = hub.call(&server, OP, "get-tiny-image", "{}", None).await;
    assert!(!out.is_error, "{}", out.text);
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines[0], "Here's the image you requested:");
    assert!(
        lines[1].starts_with("[image image/png, ") && lines[1].ends_with(" bytes]"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], "The image above is the MCP logo.");

    let out = hub
        .call(
            &server,
            OP,
            "get-resource-reference",
            r#"{"resourceType": "Text"}"#,
            None,
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("[resource "), "{}", out.text);

    let out = hub
        .call(
            &server,
            OP,
            "get-resource-reference",
            r#"{"resourceType": "Blob"}"#,
            None,
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains(" bytes]"), "{}", out.text);
}

/// A caller that stops waiting (its turn was cancelled) frees the call's place at once, and
/// the server is told.
#[tokio::test]
async fn an_abandoned_call_frees_its_place() {
    let Some(s) = servers() else { return };
    let hub = ToolHub::new(false);
    let mut server = s.everything();
    server.max_concurrency = Some(1);
    hub.tools(&server, OP).await.unwrap();
    let long = {
        let (hub, server) = (hub.clone(), server.clone());
        tokio::spawn(async move {
            let args = r#"{"duration": 30, "steps": 3}"#;
            hub.call(&server, OP, "trigger-long-running-operation", args, None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    long.abort();
    let start = Instant::now();
    let out = hub
        .call(&server, OP, "echo", r#"{"message": "next"}"#, None)
        .await;
    assert_eq!(out.text, "Echo: next");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

/// What a model reads about a server it cannot reach names the host, never the URL's path or
/// query, which may carry the operator's secret.
#[tokio::test]
async fn connection_errors_do_not_quote_the_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // closed again: nothing listens there
    let hub = ToolHub::new(false);
    let server = common::http(&format!("http://127.0.0.1:{port}/mcp?token=SECRET-123"));
    let out = hub.call(&server, OP, "echo", "{}", None).await;
    assert!(out.is_error);
    assert!(
        out.text.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.text
    );
    assert!(out.text.contains("Connection refused"), "{}", out.text);
    assert!(!out.text.contains("SECRET"), "{}", out.text);
}
