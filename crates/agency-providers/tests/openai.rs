#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The OpenAI provider against the fake OpenAI server.

use std::sync::Arc;
use std::time::Duration;

use agency_core::tool::ToolCall;
use agency_core::{
    AgencyDraft, AgencyId, AgentDraft, AgentId, ConversationId, Message, MessageId, MessageKind,
    Usage,
};
use agency_fakes::{Call, Fake, Recorded, Reply, openai};
use agency_providers::http::HttpSettings;
use agency_providers::openai::{OPENAI_BASE_URL, OpenAi, OpenAiConfig};
use agency_providers::tools::MISSING_RESULT;
use agency_providers::{Completion, Model, ModelError, ModelRequest, Provider};
use secrecy::SecretString;
use serde_json::{Value, json};

mod common;
use common::{answered_calls, call, calls, tools, unanswered_call, with_context};

const KEY: &str = "sk-test-0123456789abcdefSECRET";

/// Patient timeouts (nothing here should time out unless a test means it to), quick retries.
fn settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(5),
        first_byte_timeout: Duration::from_secs(10),
        stream_first_byte_timeout: Duration::from_secs(10),
        total_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(10),
        max_retries: 2,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(20),
        max_concurrency: 4,
        requests_per_minute: None,
        max_answer_bytes: 1 << 20,
    }
}

fn config(fake: &Fake, key: Option<&str>) -> OpenAiConfig {
    let mut c = OpenAiConfig::new(
        Some(&format!("{}/v1", fake.url)),
        key.map(|k| SecretString::from(k.to_string())),
    );
    c.http = settings();
    c
}

fn model(config: OpenAiConfig) -> Arc<dyn Model> {
    OpenAi::new("openai", config)
        .unwrap()
        .model("gpt-4o")
        .unwrap()
}

#[derive(Default)]
struct Sampling {
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u32>,
}

/// Agent 2 (`dev`) of a two-agent agency, asked after the boss wrote to it.
fn request(protocol: &str, sampling: Sampling) -> ModelRequest {
    let agency = AgencyDraft {
        name: "t".into(),
        protocol: protocol.into(),
        manager: "boss".into(),
        agents: vec![
            AgentDraft {
                id: Some(1),
                name: "boss".into(),
                model: "openai/gpt-4o".into(),
                ..Default::default()
            },
            AgentDraft {
                id: Some(2),
                name: "dev".into(),
                model: "openai/gpt-4o".into(),
                temperature: sampling.temperature,
                top_p: sampling.top_p,
                max_tokens: sampling.max_tokens,
                ..Default::default()
            },
        ],
        ..Default::default()
    }
    .validate(AgencyId::new(), "local", &|_| true)
    .unwrap();
    let conversation = ConversationId::new();
    let msg = |seq, kind, from: Option<u32>, text: &str| Message {
        images: Vec::new(),
        id: MessageId::new(),
        conversation_id: conversation,
        turn_id: None,
        seq,
        agent: AgentId::new(2),
        kind,
        linked: None,
        from: from.and_then(AgentId::new),
        to: AgentId::new(2),
        text: text.into(),
        tool: None,
        usage: None,
        latency_ms: None,
        included: true,
        created_at: chrono::DateTime::UNIX_EPOCH,
    };
    let context = vec![
        msg(0, MessageKind::System, None, "You are dev."),
        msg(1, MessageKind::Delivery, Some(1), "build \"it\""),
    ];
    ModelRequest {
        answer_schema: None,
        roster: Arc::new(agency.roster()),
        agency: Arc::new(agency),
        agent: AgentId::new(2).unwrap(),
        context: Arc::new(context),
        tools: Arc::default(),
        tool_use: Default::default(),
        deltas: None,
        on_retry: None,
    }
}

fn plain() -> ModelRequest {
    request("json", Sampling::default())
}

fn streaming(
    mut req: ModelRequest,
) -> (ModelRequest, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    req.deltas = Some(tx);
    (req, rx)
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(piece) = rx.try_recv() {
        out.push(piece);
    }
    out
}

fn failure(result: Result<Completion, ModelError>) -> String {
    match result {
        Err(ModelError::Failed { provider, message }) => {
            assert_eq!(provider, "openai");
            message
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn only_request(fake: &Fake) -> Recorded {
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    requests.into_iter().next().unwrap()
}

#[tokio::test]
async fn a_completion_sends_the_chat_and_returns_text_and_usage() {
    let fake = Fake::start().await;
    fake.push(openai::completion(r#"{"to":1,"context":"done"}"#, 42, 7));
    let done = model(config(&fake, Some(KEY)))
        .complete(plain())
        .await
        .unwrap();
    assert_eq!(
        done,
        Completion {
            text: r#"{"to":1,"context":"done"}"#.into(),
            usage: Usage {
                prompt_tokens: 42,
                completion_tokens: 7
            },
            tool_calls: Vec::new(),
            model: Some(openai::MODEL.into()),
            finish_reason: Some("stop".into()),
        }
    );

    let r = only_request(&fake);
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.headers["authorization"], format!("Bearer {KEY}"));
    assert!(r.headers["content-type"].starts_with("application/json"));
    assert_eq!(
        r.body,
        json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are dev."},
                {"role": "user", "content": r#"{"from":1,"context":"build \"it\""}"#}
            ]
        })
    );
}

#[tokio::test]
async fn no_key_no_authorization_header() {
    let fake = Fake::start().await;
    fake.push(openai::completion("hi", 1, 1));
    let done = model(config(&fake, None)).complete(plain()).await.unwrap();
    assert_eq!(done.text, "hi");
    let r = only_request(&fake);
    assert!(!r.headers.contains_key("authorization"), "{r:#?}");
}

#[tokio::test]
async fn directives_are_framed_and_sampling_is_sent_when_set() {
    let fake = Fake::start().await;
    fake.push(openai::completion("TO boss: done", 1, 1));
    let req = request(
        "directives",
        Sampling {
            temperature: Some(0.25),
            top_p: Some(0.5),
            max_tokens: Some(300),
        },
    );
    model(config(&fake, None)).complete(req).await.unwrap();
    let body = only_request(&fake).body;
    assert_eq!(body["messages"][1]["content"], "FROM boss: build \"it\"");
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["top_p"], 0.5);
    // Not api.openai.com: the older field every compatible server knows.
    assert_eq!(body["max_tokens"], 300);
    assert!(body.get("max_completion_tokens").is_none());
    assert!(body.get("stream").is_none());

    // Only what is set.
    fake.push(openai::completion("TO boss: done", 1, 1));
    let req = request(
        "directives",
        Sampling {
            temperature: Some(0.0),
            ..Default::default()
        },
    );
    model(config(&fake, None)).complete(req).await.unwrap();
    let body = fake.requests()[1].body.clone();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 3, "{body}");
    assert_eq!(body["temperature"], 0.0);
}

fn reply_format() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": "agency_reply",
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {"to": {"type": "integer"}, "context": {"type": "string"}},
                "required": ["to", "context"],
                "additionalProperties": false
            }
        }
    })
}

#[tokio::test]
async fn structured_output_only_for_the_json_protocol_when_enabled() {
    assert!(OpenAiConfig::new(None, None).structured_output);
    assert_eq!(OpenAiConfig::new(None, None).base_url, OPENAI_BASE_URL);
    assert!(!OpenAiConfig::new(Some("http://localhost:11434/v1"), None).structured_output);

    let fake = Fake::start().await;
    fake.otherwise(openai::completion(r#"{"to":1,"context":"ok"}"#, 1, 1));

    // As api.openai.com would be configured.
    let mut on = config(&fake, Some(KEY));
    on.structured_output = true;
    let on = model(on);
    on.complete(plain()).await.unwrap();
    on.complete(request("directives", Sampling::default()))
        .await
        .unwrap();
    // A local server's default.
    let off = config(&fake, None);
    assert!(!off.structured_output);
    model(off).complete(plain()).await.unwrap();

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["response_format"], reply_format());
    assert!(requests[1].body.get("response_format").is_none());
    assert!(requests[2].body.get("response_format").is_none());
}

#[tokio::test]
async fn a_clients_strict_schema_is_asked_for_as_the_answers_context() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion(
        r#"{"to":0,"context":{"city":"Oslo","at":{"day":"mon"}}}"#,
        1,
        1,
    ));
    let mut on = config(&fake, Some(KEY));
    on.structured_output = true;
    // As Pydantic writes a nested model: definitions at the root, referenced from inside.
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "at": {"$ref": "#/$defs/When"}},
        "required": ["city", "at"],
        "additionalProperties": false,
        "$defs": {"When": {"type": "object", "properties": {"day": {"type": "string"}},
                           "required": ["day"], "additionalProperties": false}}
    });
    let mut request = plain();
    request.answer_schema = Some(std::sync::Arc::new(schema));
    model(on).complete(request).await.unwrap();
    let sent = &fake.requests()[0].body["response_format"]["json_schema"];
    assert_eq!(sent["strict"], json!(true));
    let root = &sent["schema"];
    assert_eq!(
        root["$defs"]["When"]["required"],
        json!(["day"]),
        "definitions at the root, where #/$defs/When finds them"
    );
    let context = &root["properties"]["context"]["anyOf"];
    assert_eq!(context[0], json!({"type": "string"}));
    assert_eq!(
        context[1]["properties"]["at"],
        json!({"$ref": "#/$defs/When"})
    );
    assert!(context[1].get("$defs").is_none());
    assert_eq!(root["required"], json!(["to", "context"]));
}

#[tokio::test]
async fn a_stream_sends_each_piece_and_returns_the_whole() {
    let fake = Fake::start().await;
    let pieces = ["{\"to\":1,", "\"context\":", "\"done\"}"];
    fake.push(openai::stream(&pieces, 30, 5));
    let (req, mut rx) = streaming(plain());
    let done = model(config(&fake, Some(KEY))).complete(req).await.unwrap();
    assert_eq!(
        done,
        Completion {
            text: pieces.concat(),
            usage: Usage {
                prompt_tokens: 30,
                completion_tokens: 5
            },
            tool_calls: Vec::new(),
            model: Some(openai::MODEL.into()),
            finish_reason: Some("stop".into()),
        }
    );
    assert_eq!(drain(&mut rx), pieces);

    let r = only_request(&fake);
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(r.body["model"], "gpt-4o");
    assert_eq!(r.body["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_stream_with_a_closed_receiver_still_completes() {
    let fake = Fake::start().await;
    fake.push(openai::stream(&["a", "b"], 1, 2));
    let (req, rx) = streaming(plain());
    drop(rx);
    let done = model(config(&fake, None)).complete(req).await.unwrap();
    assert_eq!(done.text, "ab");
}

#[tokio::test]
async fn a_stream_without_usage_counts_zero() {
    let fake = Fake::start().await;
    let mut events = openai::stream_events(&["hi"], 9, 9);
    // Drop the usage chunk (a server that ignores include_usage).
    events.retain(|e| !e.contains("\"choices\":[]"));
    assert_eq!(events.len(), 4);
    fake.push(Reply::Sse {
        events,
        stall_after: None,
    });
    let (req, _rx) = streaming(plain());
    let done = model(config(&fake, None)).complete(req).await.unwrap();
    assert_eq!(done.text, "hi");
    assert_eq!(done.usage, Usage::default());
}

/// A stream that ends early, reports an error or sends something not JSON is asked for once
/// more (the first attempt's text is not streamed twice); a second such stream is the error.
#[tokio::test]
async fn a_stream_that_breaks_off_or_reports_an_error_is_asked_for_once_more() {
    let broken = || {
        [
            (openai::truncated_stream(&["a", "b"]), "[DONE]"),
            (
                openai::stream_error(&["a"], "The model is overloaded."),
                "The model is overloaded.",
            ),
            (
                Reply::Sse {
                    events: vec!["data: {not json".into(), "data: [DONE]".into()],
                    stall_after: None,
                },
                "malformed answer:",
            ),
        ]
    };
    for (reply, _) in broken() {
        let fake = Fake::start().await;
        fake.push(reply);
        fake.push(openai::stream(&["a", "b", "c"], 1, 3));
        let (req, mut rx) = streaming(plain());
        let done = model(config(&fake, None)).complete(req).await.unwrap();
        assert_eq!(done.text, "abc");
        assert_eq!(drain(&mut rx).concat(), "abc");
        assert_eq!(fake.requests().len(), 2);
    }
    for (reply, says) in broken() {
        let fake = Fake::start().await;
        fake.push(reply.clone());
        fake.push(reply);
        let (req, _rx) = streaming(plain());
        let message = failure(model(config(&fake, None)).complete(req).await);
        assert!(message.contains(says), "{message}");
        assert_eq!(fake.requests().len(), 2);
    }
}

#[tokio::test]
async fn a_wrong_key_fails_at_once_with_the_providers_message() {
    let fake = Fake::start().await;
    fake.otherwise(openai::invalid_key());
    let result = model(config(&fake, Some(KEY))).complete(plain()).await;
    let message = failure(result);
    assert_eq!(
        message,
        format!("HTTP 401: {}", openai::INVALID_KEY_MESSAGE)
    );
    only_request(&fake);
}

#[tokio::test]
async fn rate_limits_are_retried_after_retry_after() {
    let fake = Fake::start().await;
    fake.push(openai::rate_limited(0));
    fake.push(openai::completion("hi", 1, 1));
    let done = model(config(&fake, Some(KEY)))
        .complete(plain())
        .await
        .unwrap();
    assert_eq!(done.text, "hi");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);
    assert_eq!(
        requests[1].headers["authorization"],
        format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let fake = Fake::start().await;
    fake.push(openai::server_error());
    fake.push(openai::completion("hi", 1, 1));
    let m = model(config(&fake, None));
    assert_eq!(m.complete(plain()).await.unwrap().text, "hi");
    assert_eq!(fake.requests().len(), 2);

    let fake = Fake::start().await;
    fake.otherwise(openai::server_error());
    let message = failure(model(config(&fake, None)).complete(plain()).await);
    assert_eq!(
        message,
        format!("HTTP 500: {}", openai::SERVER_ERROR_MESSAGE)
    );
    assert_eq!(fake.requests().len(), settings().max_retries as usize + 1);
}

#[tokio::test]
async fn each_retry_is_told_to_the_caller_without_the_providers_text() {
    let fake = Fake::start().await;
    fake.push(openai::rate_limited(0));
    fake.push(openai::server_error());
    fake.push(openai::completion("hi", 1, 1));
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut request = plain();
    let sink = told.clone();
    request.on_retry = Some(agency_providers::http::RetryHook::new(move |r| {
        sink.lock().unwrap().push(r)
    }));
    let m = model(config(&fake, None));
    assert_eq!(m.complete(request).await.unwrap().text, "hi");
    let told = told.lock().unwrap();
    let seen: Vec<(u32, &str)> = told
        .iter()
        .map(|r| (r.attempt, r.reason.as_str()))
        .collect();
    assert_eq!(seen, [(2, "HTTP 429"), (3, "HTTP 500")]);
    assert_eq!(told[0].wait, Duration::ZERO, "Retry-After: 0 is honoured");
}

#[tokio::test]
async fn a_streamed_call_is_retried_before_the_stream_starts() {
    let fake = Fake::start().await;
    fake.push(openai::server_error());
    fake.push(openai::stream(&["hi"], 1, 1));
    let (req, mut rx) = streaming(plain());
    let done = model(config(&fake, None)).complete(req).await.unwrap();
    assert_eq!(done.text, "hi");
    assert_eq!(drain(&mut rx), ["hi"]);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_malformed_answer_is_asked_for_once_more_then_is_a_clear_error() {
    let fake = Fake::start().await;
    fake.push(openai::malformed());
    fake.push(openai::completion("hi", 1, 1));
    assert_eq!(
        model(config(&fake, None))
            .complete(plain())
            .await
            .unwrap()
            .text,
        "hi"
    );

    let fake = Fake::start().await;
    fake.otherwise(openai::malformed());
    let message = failure(model(config(&fake, None)).complete(plain()).await);
    assert!(message.starts_with("malformed answer:"), "{message}");
    assert!(message.contains("not JSON"), "{message}");
    assert!(message.contains("upstream connect error"), "{message}");
    assert_eq!(fake.requests().len(), 2);

    for (body, says) in [
        (json!({"id": "x", "choices": []}), "no choices"),
        (
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null}}]}),
            "no content",
        ),
    ] {
        let fake = Fake::start().await;
        fake.otherwise(Reply::json(body));
        let message = failure(model(config(&fake, None)).complete(plain()).await);
        assert!(message.contains(says), "{message}");
    }
    // A refusal is an answer: asking again would be asking to be refused again.
    let fake = Fake::start().await;
    fake.otherwise(Reply::json(json!({"choices": [{"index": 0, "message":
        {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]})));
    let message = failure(model(config(&fake, None)).complete(plain()).await);
    assert!(message.contains("refused"), "{message}");
    only_request(&fake);

    // An answer past the size limit is an error, not a process out of memory.
    let fake = Fake::start().await;
    fake.otherwise(openai::completion(&"x".repeat(2 << 20), 1, 1));
    let message = failure(model(config(&fake, None)).complete(plain()).await);
    assert!(message.contains("larger than 1 MiB"), "{message}");
    only_request(&fake);
}

#[tokio::test]
async fn a_completion_without_usage_counts_zero() {
    let fake = Fake::start().await;
    fake.push(Reply::json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]
    })));
    let done = model(config(&fake, None)).complete(plain()).await.unwrap();
    assert_eq!(done.text, "hi");
    assert_eq!(done.usage, Usage::default());
}

#[tokio::test]
async fn a_stalled_stream_is_asked_for_once_more_then_times_out() {
    let fake = Fake::start().await;
    fake.push(openai::stalled_stream(&["a", "b"]));
    fake.push(openai::stream(&["a", "b", "c"], 1, 3));
    let mut c = config(&fake, None);
    c.http.idle_timeout = Duration::from_millis(300);
    let (req, mut rx) = streaming(plain());
    assert_eq!(model(c.clone()).complete(req).await.unwrap().text, "abc");
    assert_eq!(drain(&mut rx), ["a", "b", "c"]);

    let fake = Fake::start().await;
    fake.otherwise(openai::stalled_stream(&["a", "b"]));
    let mut c = config(&fake, None);
    c.http.idle_timeout = Duration::from_millis(300);
    let (req, mut rx) = streaming(plain());
    let message = failure(model(c).complete(req).await);
    assert!(message.contains("timed out"), "{message}");
    assert!(message.contains("stream"), "{message}");
    assert_eq!(drain(&mut rx), ["a", "b"]);
    assert_eq!(fake.requests().len(), 2);
}

/// A server that takes a streamed call and sends nothing is given up on after the streamed
/// first-byte timeout (30 s by default), not the 120 s a call answered whole may take.
#[tokio::test]
async fn a_silent_server_is_given_up_on_sooner_when_the_call_streams() {
    assert_eq!(
        HttpSettings::default().stream_first_byte_timeout,
        Duration::from_secs(30)
    );
    let fake = Fake::start().await;
    fake.otherwise(Reply::Hang);
    let mut c = config(&fake, None);
    c.http.stream_first_byte_timeout = Duration::from_millis(200);
    c.http.max_retries = 1;
    let (req, _rx) = streaming(plain());
    let message = failure(model(c).complete(req).await);
    assert!(message.contains("first byte"), "{message}");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_silent_server_times_out_before_the_first_byte() {
    let fake = Fake::start().await;
    fake.otherwise(Reply::Hang);
    let mut c = config(&fake, None);
    c.http.first_byte_timeout = Duration::from_millis(300);
    c.http.max_retries = 0;
    let message = failure(model(c).complete(plain()).await);
    assert!(message.contains("timed out"), "{message}");
    assert!(message.contains("first byte"), "{message}");
    only_request(&fake);

    let fake = Fake::start().await;
    fake.otherwise(Reply::Hang);
    let mut c = config(&fake, None);
    c.http.first_byte_timeout = Duration::from_millis(200);
    c.http.max_retries = 1;
    let message = failure(model(c).complete(plain()).await);
    assert!(message.contains("first byte"), "{message}");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn the_key_never_shows() {
    let fake = Fake::start().await;
    let provider = OpenAi::new("openai", config(&fake, Some(KEY))).unwrap();
    let debug = format!("{provider:?}");
    assert!(!debug.contains(KEY), "{debug}");
    assert!(!debug.contains("SECRET"), "{debug}");
    let config_debug = format!("{:?}", config(&fake, Some(KEY)));
    assert!(!config_debug.contains("SECRET"), "{config_debug}");

    let m = provider.model("gpt-4o").unwrap();
    for reply in [
        openai::invalid_key(),
        openai::server_error(),
        openai::malformed(),
    ] {
        fake.otherwise(reply);
        let message = failure(m.complete(plain()).await);
        assert!(!message.contains("SECRET"), "{message}");
        let whole = format!("{:?}", m.complete(plain()).await);
        assert!(!whole.contains("SECRET"), "{whole}");
    }
    // An unreachable server: the connection error names the URL, not the key.
    let mut c = OpenAiConfig::new(
        Some("http://127.0.0.1:9/v1"),
        Some(SecretString::from(KEY.to_string())),
    );
    c.http = settings();
    c.http.max_retries = 0;
    let message = failure(model(c).complete(plain()).await);
    assert!(message.contains("could not reach"), "{message}");
    assert!(!message.contains("SECRET"), "{message}");
}

#[tokio::test]
async fn any_model_name_but_an_empty_one() {
    let fake = Fake::start().await;
    let provider = OpenAi::new("local", config(&fake, None)).unwrap();
    assert!(provider.model("qwen2.5:7b").is_some());
    assert!(provider.model("").is_none());
    assert!(
        OpenAi::new("x", OpenAiConfig::new(Some("localhost:11434"), None)).is_err(),
        "a base URL needs a scheme"
    );

    fake.push(openai::completion("hi", 1, 1));
    let done = provider
        .model("qwen2.5:7b")
        .unwrap()
        .complete(plain())
        .await
        .unwrap();
    assert_eq!(done.text, "hi");
    let r = only_request(&fake);
    assert_eq!(r.body["model"], "qwen2.5:7b");
}

/// The request's tools must have been accepted as the API takes them.
fn assert_acceptable(r: &Recorded) {
    let problems = openai::problems(&r.body);
    assert!(problems.is_empty(), "{problems:#?}\n{:#}", r.body);
}

/// The name the request sent for the tool named `qualified` in [`tools`].
fn wire(r: &Recorded, qualified: &str) -> String {
    let i = tools().iter().position(|t| t.name == qualified).unwrap();
    r.tool_names()[i].clone()
}

fn asked() -> ModelRequest {
    with_context(plain(), answered_calls()[..2].to_vec(), tools())
}

#[tokio::test]
async fn tools_go_under_names_the_api_takes_and_calls_come_back_under_theirs() {
    let fake = Fake::start().await;
    fake.push(openai::completion("nothing to call", 1, 1));
    let m = model(config(&fake, None));
    m.complete(asked()).await.unwrap();
    let sent = only_request(&fake);
    assert_acceptable(&sent);
    let names = sent.tool_names();
    assert_eq!(names.len(), tools().len());
    assert!(
        names.iter().all(|n| agency_fakes::is_tool_name(n)),
        "{names:?}"
    );
    let distinct: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(distinct.len(), names.len(), "{names:?}");
    for (tool, sent) in tools().iter().zip(sent.tools()) {
        assert_eq!(sent["type"], "function");
        assert_eq!(sent["function"]["description"], tool.description.as_str());
        assert_eq!(sent["function"]["parameters"], tool.input_schema);
    }

    // The model calls each tool by the name it was sent, and one it made up; no text.
    let mut script: Vec<Call> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Call::new(&format!("call_{i}"), n, &format!(r#"{{"path":"{i}"}}"#)))
        .collect();
    script.push(Call::new("call_x", "files__delete", "{}"));
    fake.push(openai::tool_calls(None, &script, 5, 6));
    let done = m.complete(asked()).await.unwrap();
    assert_eq!(done.text, "");
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 5,
            completion_tokens: 6
        }
    );
    let mut want: Vec<ToolCall> = tools()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            call(
                &format!("call_{i}"),
                &t.name,
                &format!(r#"{{"path":"{i}"}}"#),
            )
        })
        .collect();
    want.push(call("call_x", "files__delete", "{}"));
    assert_eq!(done.tool_calls, want);
    // The same tools go under the same names every time.
    assert_eq!(fake.requests()[1].tool_names(), names);
}

#[tokio::test]
async fn a_streamed_answer_puts_parallel_calls_together_and_streams_only_its_text() {
    let fake = Fake::start().await;
    let script = [
        Call::streamed(
            "call_a",
            "files__read_text_file",
            &[r#"{"pa"#, r#"th": "#, r#""a.txt"}"#],
        ),
        // Cut off: passed on as written.
        Call::streamed("call_b", "files__delete", &[r#"{"path": "#, r#""b"#]),
    ];
    fake.push(openai::tool_call_stream(
        &["Reading ", "both."],
        &script,
        7,
        8,
    ));
    let (req, mut rx) = streaming(asked());
    let done = model(config(&fake, None)).complete(req).await.unwrap();
    assert_eq!(drain(&mut rx), ["Reading ", "both."]);
    assert_eq!(done.text, "Reading both.");
    assert_eq!(
        done.tool_calls,
        [
            call("call_a", "files/read_text_file", r#"{"path": "a.txt"}"#),
            call("call_b", "files__delete", r#"{"path": "b"#),
        ]
    );
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 7,
            completion_tokens: 8
        }
    );
    let r = only_request(&fake);
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.tools().len(), tools().len());

    // Calls alone, no text.
    fake.push(openai::tool_call_stream(
        &[],
        &[Call::new("call_c", "a__b", "{}")],
        1,
        1,
    ));
    let (req, mut rx) = streaming(asked());
    let done = model(config(&fake, None)).complete(req).await.unwrap();
    assert_eq!(done.text, "");
    assert_eq!(done.tool_calls, [call("call_c", "a/b", "{}")]);
    assert!(drain(&mut rx).is_empty());
}

#[tokio::test]
async fn a_stream_broken_off_mid_call_is_asked_for_again_and_its_calls_count_once() {
    let fake = Fake::start().await;
    let script = [Call::streamed(
        "call_a",
        "files__read_text_file",
        &[r#"{"path": "#, r#""a.txt"}"#],
    )];
    let mut broken = openai::tool_call_stream_events(&["Reading."], &script, 1, 1);
    broken.truncate(broken.len() - 4);
    fake.push(Reply::Sse {
        events: broken,
        stall_after: None,
    });
    fake.push(openai::tool_call_stream(&["Reading."], &script, 1, 1));
    let (req, mut rx) = streaming(asked());
    let done = model(config(&fake, None)).complete(req).await.unwrap();
    assert_eq!(
        done.tool_calls,
        [call(
            "call_a",
            "files/read_text_file",
            r#"{"path": "a.txt"}"#
        )]
    );
    assert_eq!(drain(&mut rx), ["Reading."]);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn calls_and_results_in_the_context_are_sent_in_the_apis_shape() {
    let fake = Fake::start().await;
    fake.push(openai::completion(r#"{"to":1,"context":"done"}"#, 1, 1));
    let req = with_context(plain(), answered_calls(), tools());
    model(config(&fake, None)).complete(req).await.unwrap();
    let r = only_request(&fake);
    assert_acceptable(&r);
    let function = |id: &str, qualified: &str, arguments: &str| {
        json!({
            "id": id,
            "type": "function",
            "function": {"name": wire(&r, qualified), "arguments": arguments}
        })
    };
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "system", "content": "You are dev."},
            {"role": "user", "content": r#"{"from":1,"context":"read a.txt"}"#},
            {"role": "assistant", "content": null, "tool_calls": [
                function("call_1", "files/read_text_file", r#"{"path": "a.txt"}"#),
                // Not JSON, and sent back as the model wrote it.
                function("call_2", "a.b", r#"{"path": "b.txt"#),
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "contents of a"},
            {"role": "tool", "tool_call_id": "call_2", "content": "The arguments are not JSON."},
            {"role": "assistant", "content": "One more.", "tool_calls": [
                function("call_3", "files.v2/read", r#"{"path":"c"}"#),
            ]},
            {"role": "tool", "tool_call_id": "call_3", "content": "no such file"},
            {"role": "user", "content": r#"{"from":1,"context":"and?"}"#},
        ])
    );
}

#[tokio::test]
async fn a_call_without_a_result_is_answered_with_an_error_before_anything_else() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion("ok", 1, 1));
    let m = model(config(&fake, None));
    m.complete(with_context(plain(), unanswered_call(), tools()))
        .await
        .unwrap();
    let r = only_request(&fake);
    assert_acceptable(&r);
    let messages = r.messages();
    assert_eq!(messages.len(), 6, "{messages:#?}");
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_2", "content": "contents of b"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_1", "content": MISSING_RESULT})
    );
    assert_eq!(messages[5]["role"], "user");

    // A context that ends with a call (the agent is asked again before its result is in), and
    // an agent that may no longer call any tool: the call is still answered, and its name is
    // still one the API takes.
    let mut context = unanswered_call();
    context.truncate(3);
    m.complete(with_context(plain(), context, Vec::new()))
        .await
        .unwrap();
    let r = fake.requests()[1].clone();
    assert_acceptable(&r);
    assert!(r.body.get("tools").is_none());
    let results = r.tool_results();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|t| t["content"] == MISSING_RESULT));
    assert_eq!(r.tool_calls()[1]["function"]["name"], "a__b");
}

#[tokio::test]
async fn results_whose_calls_are_not_in_the_context_are_told_as_user_messages() {
    let fake = Fake::start().await;
    fake.push(openai::completion("ok", 1, 1));
    let mut context = answered_calls();
    // The reply that made the first two calls was left out.
    context.remove(2);
    model(config(&fake, None))
        .complete(with_context(plain(), context, tools()))
        .await
        .unwrap();
    let r = only_request(&fake);
    assert_acceptable(&r);
    let messages = r.messages();
    assert_eq!(messages[2]["role"], "user");
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap()
            .ends_with("contents of a")
    );
    assert_eq!(r.tool_results().len(), 1);
}

#[tokio::test]
async fn a_context_without_tools_is_sent_as_before() {
    let fake = Fake::start().await;
    fake.push(openai::completion("ok", 1, 1));
    let context = vec![
        (MessageKind::System, None, "You are dev.", None),
        (MessageKind::Delivery, Some(1), "hi", None),
        // An empty list of calls is no call.
        (MessageKind::Reply, Some(2), "TO boss: hi", calls(&[])),
    ];
    model(config(&fake, None))
        .complete(with_context(plain(), context, Vec::new()))
        .await
        .unwrap();
    let r = only_request(&fake);
    assert_eq!(
        r.body,
        json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are dev."},
                {"role": "user", "content": r#"{"from":1,"context":"hi"}"#},
                {"role": "assistant", "content": "TO boss: hi"},
            ]
        })
    );
}
