//! What operators see, with the real parts: spans received by Arize Phoenix (an OTLP backend,
//! from PyPI: `AGENCY_TEST_PHOENIX` names its `phoenix` program; `.ci/run` installs it), over
//! http/protobuf and gRPC, parented under the caller's `traceparent`, with an MCP server over
//! Streamable HTTP given the tool call's span as the parent, a room's answers, a webhook bot's
//! and the memory cycle's tasks (over the embedded MQTT broker) in their traces; `/metrics` read by
//! `promtool` and scraped by Debian's Prometheus, whose query API returns the token counts of
//! the turns; and a dead OTLP endpoint, which turns do not notice and the dropped-span counter
//! does, with JSON logs carrying the trace and span ids.
//!
//! Without Phoenix or Prometheus the suites that need them are skipped with a message, except
//! under `CI=true`, where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agency_fakes::{Fake, openai};
use common::mqtt::Mqtt;
use common::{Server, agency, http, signed_up, studio_answer};
use serde_json::{Value, json};

const SOLO: &str = "name: solo
protocol: json
manager: lead
agents:
  - id: 1
    name: lead
    role: answers the user
    model: openai/gpt-4o
    temperature: 0.25
    max_tokens: 300
";

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `what` is missing: skip (a laptop), or fail (CI).
fn missing(what: &str) {
    assert!(!ci(), "{what} is required under CI=true");
    eprintln!("skipped: {what} is not installed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory with the server's configuration: its `openai` provider is `fake` (with a price
/// for gpt-4o), and the `solo` agency (one agent on it) imported.
fn setup(fake: &Fake) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agency.yaml"),
        format!(
            "providers:\n  openai:\n    kind: openai\n    base_url: \"{}/v1\"\n    api_key_env: OPENAI_API_KEY\n    prices:\n      gpt-4o: {{ input: 2.5, output: 10 }}\n",
            fake.url
        ),
    )
    .unwrap();
    std::fs::write(d.join("solo.yaml"), SOLO).unwrap();
    cli(d, &["import", "solo.yaml"]);
    dir
}

/// Runs the CLI in `dir` on its database and configuration; its stdout.
fn cli(dir: &Path, args: &[&str]) -> String {
    let out = agency()
        .current_dir(dir)
        .env("OPENAI_API_KEY", "sk-test-0001")
        .args(["--db", "sqlite://a.db", "--config", "agency.yaml"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agency {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn serve(dir: &Path, env: &[(&str, String)], extra: &[&str]) -> Command {
    let mut cmd = agency();
    cmd.current_dir(dir)
        .env("OPENAI_API_KEY", "sk-test-0001")
        .args(["--db", "sqlite://a.db", "--config", "agency.yaml", "serve"])
        .args(["--listen", "127.0.0.1:0"])
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A key of `agency`, made by the CLI.
fn key(dir: &Path, agency: &str) -> String {
    let name = format!("k{}", fastrand_suffix());
    cli(dir, &["keys", "create", agency, "--name", &name])
        .trim()
        .to_string()
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        % 1_000_000_007
}

/// One Chat Completions request; its JSON (or, streamed, its events' text).
async fn chat(
    server: &Server,
    key: &str,
    model: &str,
    traceparent: Option<&str>,
    stream: bool,
) -> (u16, String) {
    let mut request = http()
        .post(format!("{}/v1/chat/completions", server.url))
        .bearer_auth(key)
        .json(&json!({"model": model, "stream": stream,
                      "messages": [{"role": "user", "content": "a todo app"}]}));
    if let Some(tp) = traceparent {
        request = request.header("traceparent", tp);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn get_text(url: &str) -> String {
    let response = http().get(url).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    response.text().await.unwrap()
}

/// The value of the sample `name{labels}` (every label given must match) in Prometheus text.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            (metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse::<f64>().ok())?
        })
        .reduce(|a, b| a + b)
}

// ---------------------------------------------------------------------------------------
// Traces

/// Phoenix, on free ports with its own working directory.
struct Phoenix {
    _child: Killed,
    http: String,
    grpc: String,
    _dir: tempfile::TempDir,
}

async fn phoenix() -> Option<Phoenix> {
    let Some(program) = std::env::var_os("AGENCY_TEST_PHOENIX").map(PathBuf::from) else {
        missing("Arize Phoenix (AGENCY_TEST_PHOENIX, see .ci/run)");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let (port, grpc) = (free_port(), free_port());
    let child = Command::new(program)
        .arg("serve")
        .env("PHOENIX_WORKING_DIR", dir.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("phoenix.log")).unwrap())
        .spawn()
        .expect("start phoenix");
    let phoenix = Phoenix {
        _child: Killed(child),
        http: format!("http://127.0.0.1:{port}"),
        grpc: format!("http://127.0.0.1:{grpc}"),
        _dir: dir,
    };
    let start = Instant::now();
    loop {
        if let Ok(r) = http().get(format!("{}/healthz", phoenix.http)).send().await
            && r.status().is_success()
        {
            return Some(phoenix);
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "Phoenix did not start"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Phoenix {
    /// The spans of `trace` Phoenix has, once `want` of them arrived.
    async fn trace(&self, trace: &str, want: usize) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let body: Value = http()
                .get(format!(
                    "{}/v1/projects/default/spans?limit=1000",
                    self.http
                ))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let spans: Vec<Value> = body["data"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|s| s["context"]["trace_id"] == trace)
                .collect();
            if spans.len() >= want {
                return spans;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{} of {want} spans of trace {trace} arrived: {spans:#?}",
                spans.len()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn id(span: &Value) -> &str {
    span["context"]["span_id"].as_str().unwrap()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_turn_arrives_as_one_trace_under_the_callers() {
    let Some(phoenix) = phoenix().await else {
        return;
    };
    let fake = Fake::start().await;
    let dir = setup(&fake);
    let d = dir.path();
    let server = Server::start(serve(
        d,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.http.clone())],
        &[],
    ));
    let studio = key(d, "studio");

    // The demo: manager, programmer and reviewer on the rules model, and a tool call.
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let caller = "b7ad6b7169203331";
    let (status, body) = chat(
        &server,
        &studio,
        "studio",
        Some(&format!("00-{trace}-{caller}-01")),
        false,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        studio_answer("a todo app")
    );

    let spans = phoenix.trace(trace, 9).await;
    let [root] = named(&spans, "POST /v1/chat/completions")[..] else {
        panic!("one server span: {spans:#?}");
    };
    assert_eq!(root["parent_id"], caller, "the caller's span is its parent");
    assert_eq!(attr(root, "http.route"), "/v1/chat/completions");
    let [turn] = named(&spans, "invoke_agent studio")[..] else {
        panic!("one turn span: {spans:#?}");
    };
    // The turn sits under the request, which has the id the response's x-request-id says.
    assert_eq!(turn["parent_id"], id(root));
    assert!(
        attr(root, "agency.request.id")
            .as_str()
            .is_some_and(|r| r.starts_with("req_")),
        "{root:#?}"
    );
    assert_eq!(attr(turn, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(turn, "gen_ai.agent.name"), "studio");
    assert!(attr(turn, "gen_ai.conversation.id").is_string());
    assert_eq!(attr(turn, "agency.turn.stopped_by"), "answered");
    let hops = attr(turn, "agency.turn.hops").as_i64().unwrap();
    assert!(hops >= 6, "{hops} hops");
    let events: Vec<&Value> = turn["events"].as_array().unwrap().iter().collect();
    assert_eq!(
        events.iter().filter(|e| e["name"] == "agency.hop").count(),
        events.len()
    );
    assert!(events.len() >= 6, "{events:#?}");
    let hop = |e: &Value| {
        (
            e["attributes"]["agency.hop.from"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            e["attributes"]["agency.hop.to"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            e["attributes"]["agency.hop.kind"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    };
    let first = hop(events[0]);
    assert_eq!(first, ("user".into(), "manager".into(), "input".into()));
    let last = hop(events.last().unwrap());
    assert_eq!(last.1, "user");
    assert_eq!(last.2, "answer");

    // Every model call is a child of the turn, tagged with its agent.
    let calls = named(&spans, "chat rules");
    assert!(calls.len() >= 5, "{calls:#?}");
    let mut agents: Vec<&str> = calls
        .iter()
        .map(|c| {
            assert_eq!(c["parent_id"], id(turn));
            assert_eq!(attr(c, "gen_ai.operation.name"), "chat");
            assert_eq!(attr(c, "gen_ai.request.model"), "rules");
            assert!(attr(c, "gen_ai.provider.name").is_string());
            attr(c, "gen_ai.agent.name").as_str().unwrap()
        })
        .collect();
    agents.sort_unstable();
    agents.dedup();
    assert_eq!(agents, ["manager", "programmer", "reviewer"]);
    let [tool] = named(&spans, "execute_tool builtin/echo")[..] else {
        panic!("one tool span: {spans:#?}");
    };
    assert_eq!(tool["parent_id"], id(turn));
    assert_eq!(attr(tool, "gen_ai.tool.name"), "builtin/echo");
    assert!(attr(tool, "gen_ai.tool.call.id").is_string());
    // Content stays out unless asked for.
    assert!(attr(turn, "gen_ai.input.messages").is_null());

    // A provider's call carries the trace on; the span has the call's usage and answer.
    fake.push(openai::completion(
        r#"{"to": 0, "context": "hello"}"#,
        42,
        7,
    ));
    let solo = key(d, "solo");
    let trace2 = "1bf7651916cd43dd8448eb211c80319c";
    let (status, body) = chat(
        &server,
        &solo,
        "solo",
        Some(&format!("00-{trace2}-{caller}-01")),
        false,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let sent = fake.requests();
    let traceparent = sent[0].headers["traceparent"].clone();
    assert!(
        traceparent.starts_with(&format!("00-{trace2}-")),
        "{traceparent}"
    );
    let spans = phoenix.trace(trace2, 3).await;
    let [call] = named(&spans, "chat gpt-4o")[..] else {
        panic!("one model call: {spans:#?}");
    };
    // The provider saw the model call's span as its parent.
    assert!(traceparent.contains(id(call)), "{traceparent} {call:#?}");
    assert_eq!(attr(call, "gen_ai.provider.name"), "openai");
    assert_eq!(attr(call, "gen_ai.agent.name"), "lead");
    assert_eq!(attr(call, "gen_ai.usage.input_tokens"), 42);
    assert_eq!(attr(call, "gen_ai.usage.output_tokens"), 7);
    assert_eq!(attr(call, "gen_ai.response.model"), openai::MODEL);
    assert_eq!(
        *attr(call, "gen_ai.response.finish_reasons"),
        json!(["stop"])
    );
    assert_eq!(attr(call, "gen_ai.request.temperature"), 0.25);
    assert_eq!(attr(call, "gen_ai.request.max_tokens"), 300);
    drop(server);

    // Over gRPC, with content captured.
    let server = Server::start(serve(
        d,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.grpc.clone()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            (
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                "true".into(),
            ),
        ],
        &[],
    ));
    let trace3 = "2cf7651916cd43dd8448eb211c80319c";
    let (status, body) = chat(
        &server,
        &studio,
        "studio",
        Some(&format!("00-{trace3}-{caller}-01")),
        false,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let spans = phoenix.trace(trace3, 9).await;
    let [turn] = named(&spans, "invoke_agent studio")[..] else {
        panic!("one turn span over gRPC: {spans:#?}");
    };
    let input = attr(turn, "gen_ai.input.messages").as_str().unwrap();
    assert!(input.contains("a todo app"), "{input}");
    let output = attr(turn, "gen_ai.output.messages").as_str().unwrap();
    assert!(output.contains("reviewed build"), "{output}");

    // Streamed answers run their turn in a task of their own: it stays under the request,
    // on both endpoints.
    let trace4 = "3df7651916cd43dd8448eb211c80319c";
    let (status, body) = chat(
        &server,
        &studio,
        "studio",
        Some(&format!("00-{trace4}-{caller}-01")),
        true,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[DONE]"), "{body}");
    let trace5 = "4ef7651916cd43dd8448eb211c80319c";
    let response = http()
        .post(format!("{}/v1/responses", server.url))
        .bearer_auth(&studio)
        .header("traceparent", format!("00-{trace5}-{caller}-01"))
        .json(&json!({"model": "studio", "input": "a todo app", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = response.text().await.unwrap();
    assert!(events.contains("response.completed"), "{events}");
    for (trace, route) in [
        (trace4, "POST /v1/chat/completions"),
        (trace5, "POST /v1/responses"),
    ] {
        // The request's span ends last (with its stream), so it may come a batch later.
        let start = Instant::now();
        let spans = loop {
            let spans = phoenix.trace(trace, 9).await;
            if !named(&spans, route).is_empty() || start.elapsed() > Duration::from_secs(30) {
                break spans;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let [root] = named(&spans, route)[..] else {
            panic!("one server span: {spans:#?}");
        };
        assert_eq!(root["parent_id"], caller);
        let [turn] = named(&spans, "invoke_agent studio")[..] else {
            panic!("one turn span, streamed: {spans:#?}");
        };
        assert_eq!(turn["parent_id"], id(root), "{route}");
        let calls = named(&spans, "chat rules");
        assert!(calls.len() >= 5, "{calls:#?}");
        assert!(
            calls.iter().all(|c| c["parent_id"] == id(turn)),
            "{calls:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Metrics

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_metrics_listener() {
    if !Path::new(PROMETHEUS).exists() || !Path::new(PROMTOOL).exists() {
        missing("Prometheus (apt-get install prometheus)");
        return;
    }
    let fake = Fake::start().await;
    fake.push(openai::completion(
        r#"{"to": 0, "context": "hello"}"#,
        42,
        7,
    ))
    .push(openai::stream(
        &["{\"to\": 0, ", "\"context\": \"hi ", "there\"}"],
        30,
        5,
    ));
    let dir = setup(&fake);
    let d = dir.path();
    let server = Server::start(serve(d, &[], &["--metrics-listen", "127.0.0.1:0"]));
    let metrics = server.printed("agency: metrics on ");
    let solo = key(d, "solo");
    let (status, body) = chat(&server, &solo, "solo", None, false).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = chat(&server, &solo, "solo", None, true).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("there"), "{body}");
    let (status, _) = chat(&server, "sk-agency-wrong", "solo", None, false).await;
    assert_eq!(status, 401);

    // Not on the public listener.
    let public = http()
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);

    let text = get_text(&metrics).await;
    // A real parser takes it.
    let mut check = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(check.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let tokens = |kind: &str| {
        sample(
            &text,
            "gen_ai_client_token_usage_sum",
            &[
                ("gen_ai_token_type", kind),
                ("gen_ai_request_model", "gpt-4o"),
                ("gen_ai_agent_name", "lead"),
                ("agency_name", "solo"),
                ("gen_ai_provider_name", "openai"),
            ],
        )
    };
    assert_eq!(tokens("input"), Some(72.0), "{text}");
    assert_eq!(tokens("output"), Some(12.0));
    assert_eq!(
        sample(
            &text,
            "gen_ai_client_operation_duration_seconds_count",
            &[("gen_ai_agent_name", "lead")]
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            "agency_turns_total",
            &[
                ("agency_name", "solo"),
                ("agency_turn_stopped_by", "answered")
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            "gen_ai_server_time_to_first_token_seconds_count",
            &[("agency_name", "solo")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "http_server_request_duration_seconds_count",
            &[
                ("http_route", "/v1/chat/completions"),
                ("http_response_status_code", "200")
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            "http_server_request_duration_seconds_count",
            &[
                ("http_route", "/v1/chat/completions"),
                ("http_response_status_code", "401")
            ]
        ),
        Some(1.0)
    );
    // 72 input tokens at $2.5 and 12 output at $10 a million.
    let cost = sample(&text, "agency_cost_usd_total", &[("agency_name", "solo")]).unwrap();
    assert!((cost - 0.0003).abs() < 1e-9, "{cost}");
    assert_eq!(sample(&text, "agency_sse_streams", &[]), Some(0.0));
    assert!(sample(&text, "agency_sessions", &[]).unwrap() >= 1.0);
    assert!(
        sample(
            &text,
            "agency_store_commit_duration_seconds_count",
            &[("agency_store_backend", "sqlite")]
        )
        .unwrap()
            >= 2.0
    );
    assert!(
        sample(
            &text,
            "agency_hops_total",
            &[("agency_name", "solo"), ("agency_hop_kind", "answer")]
        ) == Some(2.0)
    );
    // No ids as labels.
    assert!(!text.contains("conversation"), "{text}");

    // Prometheus scrapes it, and its query API has the token counts.
    let prom_dir = tempfile::tempdir().unwrap();
    let target = metrics
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    std::fs::write(
        prom_dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: agency\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let _prometheus = Killed(
        Command::new(PROMETHEUS)
            .arg(format!(
                "--config.file={}",
                prom_dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                prom_dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let query = format!(
        "http://127.0.0.1:{port}/api/v1/query?query={}",
        "sum(gen_ai_client_token_usage_sum{gen_ai_token_type=\"input\",agency_name=\"solo\"})"
    );
    let start = Instant::now();
    loop {
        if let Ok(r) = http().get(&query).send().await
            && let Ok(body) = r.json::<Value>().await
            && let Some(value) = body["data"]["result"][0]["value"][1].as_str()
        {
            assert_eq!(value, "72", "{body}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "Prometheus never had the token count"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------------------------------
// A dead OTLP endpoint, and JSON logs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_otlp_endpoint_costs_turns_nothing_and_is_counted() {
    let fake = Fake::start().await;
    // The third call fails: its warning is logged inside the turn's span.
    fake.push(openai::completion(r#"{"to": 0, "context": "one"}"#, 1, 1))
        .push(openai::completion(r#"{"to": 0, "context": "two"}"#, 1, 1))
        .push(openai::invalid_key());
    let dir = setup(&fake);
    let d = dir.path();
    // Nothing listens there.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let logs = d.join("server.log");
    let server = Server::start_logging(
        serve(
            d,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", dead),
                ("AGENCY_LOG_FORMAT", "json".into()),
            ],
            &["--metrics-listen", "127.0.0.1:0"],
        ),
        Stdio::from(std::fs::File::create(&logs).unwrap()),
    );
    let metrics = server.printed("agency: metrics on ");
    let solo = key(d, "solo");
    let studio = key(d, "studio");
    for _ in 0..5 {
        let (status, body) = chat(&server, &studio, "studio", None, false).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, _) = chat(&server, &solo, "solo", None, false).await;
    assert_eq!(status, 200);
    let (status, _) = chat(&server, &solo, "solo", None, false).await;
    assert_eq!(status, 200);
    let (status, body) = chat(&server, &solo, "solo", None, false).await;
    assert_eq!(status, 502, "{body}");

    let start = Instant::now();
    loop {
        let text = get_text(&metrics).await;
        let dropped = sample(
            &text,
            "agency_telemetry_spans_dropped_total",
            &[("agency_drop_reason", "export_failed")],
        );
        if dropped.is_some_and(|n| n >= 1.0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no dropped spans counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // JSON lines; the failure's line has the trace and span ids and the request's id.
    let text = std::fs::read_to_string(&logs).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let failed = lines
        .iter()
        .find(|l| l["fields"]["message"] == "a model call failed")
        .unwrap_or_else(|| panic!("no failure logged:\n{text}"));
    let trace = failed["trace_id"].as_str().unwrap();
    assert_eq!(trace.len(), 32, "{failed}");
    assert_ne!(trace, "00000000000000000000000000000000");
    assert_eq!(failed["span_id"].as_str().unwrap().len(), 16, "{failed}");
    let request = failed["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["request_id"].as_str())
        .unwrap_or_else(|| panic!("no request id: {failed}"));
    assert!(request.starts_with("req_"), "{request}");
}

// ---------------------------------------------------------------------------------------
// An MCP server's calls, rooms, bots and the memory cycle

/// An MCP server over Streamable HTTP (rmcp's own server, on loopback) whose one tool,
/// `whoami`, notes the trace context each call brought: the `traceparent` header, and
/// `params._meta.traceparent`.
mod recorder {
    use std::sync::{Arc, Mutex};

    use rmcp::RoleServer;
    use rmcp::handler::server::router::tool::ToolRouter;
    use rmcp::model::{ServerCapabilities, ServerConfig};
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ServerHandler, tool, tool_handler, tool_router};

    /// What a call brought: its header and its `_meta` entry.
    pub type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

    #[derive(Clone)]
    struct Recorder {
        seen: Seen,
        tool_router: ToolRouter<Self>,
    }

    #[tool_router]
    impl Recorder {
        #[tool(description = "Says who asked.")]
        async fn whoami(&self, cx: RequestContext<RoleServer>) -> String {
            let header = cx
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|p| p.headers.get("traceparent"))
                .map(|v| v.to_str().unwrap().to_string());
            let meta = cx.meta.get_traceparent().map(str::to_string);
            self.seen.lock().unwrap().push((header, meta));
            "a test".into()
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Recorder {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }
    }

    /// Serves on a free loopback port: its URL, and what its calls brought.
    pub async fn start() -> (String, Seen) {
        let seen = Seen::default();
        let recorder = Recorder {
            seen: seen.clone(),
            tool_router: Recorder::tool_router(),
        };
        let service = StreamableHttpService::new(
            move || Ok(recorder.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, seen)
    }
}

/// An agent that calls the recorder's tool.
const TOOLISH: &str = "name: toolish
protocol: json
manager: lead
agents:
  - id: 1
    name: lead
    role: answers the user
    model: openai/gpt-4o
    tools: [trace/whoami]
";

/// A team on the rules model, which rates an observation with an alert word 0.9: three of
/// them pass the memory's default threshold (2.0), so the third is reflected on and planned.
const PLANT: &str = r#"name: plant
handle: PLANT-OBS
manager: manager
agents:
  - name: manager
    handle: MGR-001
    model: builtin/rules
    rules:
      - { when: user, do: "Please check: {{message}}", send_to: monitor }
      - { when: monitor, do: "Status: {{message}}", send_to: [user] }
  - name: monitor
    handle: MON-001
    model: builtin/rules
    rules:
      - { when: manager, do: "All normal ({{message}})", send_to: manager }
"#;

/// POSTs `body` to `path` (in the trace `traceparent` names, when given): the answer's JSON.
async fn post(
    client: &reqwest::Client,
    server: &Server,
    path: &str,
    body: Value,
    traceparent: Option<&str>,
) -> Value {
    let mut request = client.post(format!("{}{path}", server.url)).json(&body);
    if let Some(tp) = traceparent {
        request = request.header("traceparent", tp);
    }
    let res = request.send().await.unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert!(status.is_success(), "POST {path}: {status} {body}");
    body
}

/// Waits until the server handles the team's messages (a chat it answers).
async fn wait_for_server(mqtt: &mut Mqtt) {
    for _ in 0..100 {
        let probe = uuid::Uuid::now_v7().to_string();
        mqtt.send(
            "CMD/chat_new/MGR-001",
            json!({"agent_id": "MGR-001", "conversation_id": probe, "content": "hello"}),
        )
        .await;
        let progress = format!("EVT/chat_progress/MGR-001/{probe}");
        if mqtt
            .next_within(&progress, Duration::from_millis(500))
            .await
            .is_some()
        {
            return;
        }
    }
    panic!("the server never answered on the broker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_rooms_bots_and_the_memory_cycle_arrive_in_their_traces() {
    let Some(phoenix) = phoenix().await else {
        return;
    };
    let fake = Fake::start().await;
    let bot = Fake::start().await;
    bot.otherwise(agency_fakes::Reply::json(json!({"message": "on it"})));
    let (mcp, seen) = recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agency.yaml"),
        format!(
            "providers:\n  openai:\n    kind: openai\n    base_url: \"{}/v1\"\n    api_key_env: OPENAI_API_KEY\nmcp_servers:\n  trace: {{ url: \"{mcp}\" }}\n",
            fake.url
        ),
    )
    .unwrap();
    std::fs::write(d.join("toolish.yaml"), TOOLISH).unwrap();
    std::fs::write(d.join("plant.yaml"), PLANT).unwrap();
    // Saving checks the agent's tool against the server's list: the recorder must answer
    // while the CLI blocks this thread.
    tokio::task::block_in_place(|| {
        cli(d, &["import", "toolish.yaml"]);
        cli(d, &["import", "plant.yaml"]);
    });
    let toolish = tokio::task::block_in_place(|| key(d, "toolish"));
    let call_tool = || {
        fake.push(openai::tool_calls(
            None,
            &[agency_fakes::Call::new("call_1", "trace__whoami", "{}")],
            10,
            2,
        ))
        .push(openai::completion(r#"{"to": 0, "context": "done"}"#, 12, 3));
    };

    // With tracing off, a tool call carries no trace context.
    {
        let server = Server::start(serve(d, &[], &[]));
        call_tool();
        let (status, body) = chat(&server, &toolish, "toolish", None, false).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(*seen.lock().unwrap(), [(None, None)]);
        seen.lock().unwrap().clear();
    }

    let mqtt_port = free_port();
    let server = Server::start(serve(
        d,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.http.clone())],
        &[
            "--allow-private-addresses",
            "--mqtt",
            &format!("embedded://127.0.0.1:{mqtt_port}"),
        ],
    ));
    let caller = "b7ad6b7169203331";
    let traceparent = |trace: &str| format!("00-{trace}-{caller}-01");

    // An MCP server over Streamable HTTP gets the tool call's span as the parent, in the
    // request's headers and in its `_meta`.
    let trace = "3af7651916cd43dd8448eb211c80319c";
    call_tool();
    let (status, body) = chat(
        &server,
        &toolish,
        "toolish",
        Some(&traceparent(trace)),
        false,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let spans = phoenix.trace(trace, 5).await;
    let [tool] = named(&spans, "execute_tool trace/whoami")[..] else {
        panic!("one tool span: {spans:#?}");
    };
    let calls = seen.lock().unwrap().clone();
    let [(Some(header), Some(meta))] = &calls[..] else {
        panic!("one call with its trace context: {calls:?}");
    };
    let expected = format!("00-{trace}-{}-", id(tool));
    assert!(header.starts_with(&expected), "{header} {tool:#?}");
    assert_eq!(header, meta);

    // A room's message answered by two agents: one trace, an `invoke_agent` per agent under
    // the request, each with its model call beneath.
    let ada = signed_up(&server.url).await;
    let created = post(
        &ada,
        &server,
        "/api/rooms",
        json!({"name": "standup"}),
        None,
    )
    .await;
    let room = created["room"]["id"].as_str().unwrap().to_string();
    for name in ["ann", "bob"] {
        post(
            &ada,
            &server,
            &format!("/api/rooms/{room}/participants"),
            json!({"name": name, "model": "builtin/rules"}),
            None,
        )
        .await;
    }
    let trace = "4af7651916cd43dd8448eb211c80319c";
    let posted = post(
        &ada,
        &server,
        &format!("/api/rooms/{room}/messages?wait=true"),
        json!({"text": "status?"}),
        Some(&traceparent(trace)),
    )
    .await;
    assert_eq!(posted["answers"].as_array().unwrap().len(), 2, "{posted}");
    let spans = phoenix.trace(trace, 5).await;
    let [root] = &spans
        .iter()
        .filter(|s| s["parent_id"] == caller)
        .collect::<Vec<_>>()[..]
    else {
        panic!("one span under the caller's: {spans:#?}");
    };
    assert_eq!(root["name"], "POST /api/rooms/{room}/messages", "{root:#?}");
    for agent in ["ann", "bob"] {
        let [answer] = named(&spans, &format!("invoke_agent {agent}"))[..] else {
            panic!("one answer of {agent}: {spans:#?}");
        };
        assert_eq!(answer["parent_id"], id(root));
        assert_eq!(attr(answer, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(attr(answer, "gen_ai.agent.name"), agent);
        assert_eq!(attr(answer, "gen_ai.conversation.id"), room.as_str());
        assert_eq!(attr(answer, "agency.room"), "standup");
        let calls: Vec<&Value> = named(&spans, "chat rules")
            .into_iter()
            .filter(|c| c["parent_id"] == id(answer))
            .collect();
        let [call] = calls[..] else {
            panic!("one model call under {agent}'s answer: {spans:#?}");
        };
        assert_eq!(attr(call, "gen_ai.agent.name"), agent);
    }

    // A webhook bot's answer is its own `invoke_agent`, and the bot's request carries it as
    // the parent.
    let registered = post(
        &ada,
        &server,
        &format!("/api/rooms/{room}/bots"),
        json!({"username": "ferm", "endpoint": format!("{}/bot", bot.url)}),
        None,
    )
    .await;
    assert_eq!(registered["bot"]["kind"], "bot");
    let trace = "5af7651916cd43dd8448eb211c80319c";
    let posted = post(
        &ada,
        &server,
        &format!("/api/rooms/{room}/messages?wait=true"),
        json!({"text": "@ferm status?"}),
        Some(&traceparent(trace)),
    )
    .await;
    assert!(
        posted["answers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["text"] == "on it"),
        "{posted}"
    );
    let spans = phoenix.trace(trace, 2).await;
    let root = spans.iter().find(|s| s["parent_id"] == caller).unwrap();
    let [answer] = named(&spans, "invoke_agent ferm")[..] else {
        panic!("one answer of the bot: {spans:#?}");
    };
    assert_eq!(answer["parent_id"], id(root));
    assert_eq!(attr(answer, "gen_ai.agent.name"), "ferm");
    let called = bot.requests();
    let sent = &called.last().unwrap().headers["traceparent"];
    assert!(
        sent.starts_with(&format!("00-{trace}-{}-", id(answer))),
        "{sent} {answer:#?}"
    );

    // The memory cycle: an observation brought over MQTT is rated, and the third alert is
    // reflected on and planned for, each task in a span with its model call beneath, under
    // the message's.
    let mut mqtt = Mqtt::connect(&format!("127.0.0.1:{mqtt_port}"), "PLANT-OBS").await;
    wait_for_server(&mut mqtt).await;
    let trace = "6af7651916cd43dd8448eb211c80319c";
    for (i, text) in [
        "Fermenter 2 temperature exceeded 40 C",
        "Fermenter 2 cooling pump failure",
        "Fermenter 2 pressure alarm",
    ]
    .into_iter()
    .enumerate()
    {
        let tp = traceparent(trace);
        mqtt.send_traced(
            "DATA/observation/MON-001",
            json!({"content": text, "agent_id": "MON-001"}),
            (i == 2).then_some(tp.as_str()),
        )
        .await;
        let result = mqtt
            .next_within("EVT/observation_result/MON-001", Duration::from_secs(60))
            .await;
        assert!(result.is_some(), "no result for observation {i}");
    }
    let spans = phoenix.trace(trace, 7).await;
    let [message] = named(&spans, "process XMAGS/PLANT-OBS/DATA/observation/MON-001")[..] else {
        panic!("one MQTT message: {spans:#?}");
    };
    assert_eq!(message["parent_id"], caller);
    for task in ["rate", "reflect", "plan"] {
        let [span] = named(&spans, &format!("memory {task}"))[..] else {
            panic!("one `memory {task}`: {spans:#?}");
        };
        assert_eq!(span["parent_id"], id(message));
        assert_eq!(attr(span, "agency.memory.task"), task);
        assert_eq!(attr(span, "agency.name"), "plant");
        assert_eq!(attr(span, "gen_ai.agent.name"), "monitor");
        let calls: Vec<&Value> = named(&spans, "chat rules")
            .into_iter()
            .filter(|c| c["parent_id"] == id(span))
            .collect();
        assert_eq!(
            calls.len(),
            1,
            "one model call under `memory {task}`: {spans:#?}"
        );
    }
}
