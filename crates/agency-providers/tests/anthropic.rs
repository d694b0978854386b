#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The Anthropic provider against the fake Anthropic server.

use std::sync::Arc;
use std::time::Duration;

use agency_core::{
    AgencyDraft, AgencyId, AgentDraft, AgentId, ConversationId, Message, MessageId, MessageKind,
    Usage,
};
use agency_fakes::{Call, Fake, Recorded, anthropic as fake};
use agency_providers::anthropic::{
    ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, Anthropic, AnthropicConfig, DEFAULT_MAX_TOKENS,
    EMPTY_RESULT, UNPARSED_ARGUMENTS,
};
use agency_providers::http::HttpSettings;
use agency_providers::tools::MISSING_RESULT;
use agency_providers::{Completion, Model, ModelError, ModelRequest, Provider};
use serde_json::{Value, json};

mod common;
use common::{answered_calls, call, calls, result, tools, unanswered_call, with_context};

const KEY: &str = "sk-ant-test-7f3a9c1e5b";
const MODEL: &str = "claude-sonnet-4-5";

/// Generous timeouts: a test that expects an answer must not fail on a busy machine. The tests
/// of timeouts shorten the one they test.
fn settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(10),
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

fn provider(fake: &Fake, key: Option<&str>) -> Anthropic {
    let mut config = AnthropicConfig::new(Some(&fake.url), key.map(Into::into));
    config.http = settings();
    Anthropic::new("claude", config).unwrap()
}

fn model(fake: &Fake) -> Arc<dyn Model> {
    provider(fake, Some(KEY)).model(MODEL).unwrap()
}

/// The agent's sampling: temperature, top_p, max_tokens.
type Sampling = (Option<f64>, Option<f64>, Option<u32>);

/// A request for agent 2 (`dev`) of a two-agent agency using the directives protocol, with
/// `context` as (kind, sender, text).
fn request_with(sampling: Sampling, context: &[(MessageKind, Option<u32>, &str)]) -> ModelRequest {
    let (temperature, top_p, max_tokens) = sampling;
    let agency = AgencyDraft {
        name: "t".into(),
        protocol: "directives".into(),
        manager: "boss".into(),
        agents: vec![
            AgentDraft {
                id: Some(1),
                name: "boss".into(),
                model: "builtin/rules".into(),
                ..Default::default()
            },
            AgentDraft {
                id: Some(2),
                name: "dev".into(),
                model: format!("anthropic/{MODEL}"),
                temperature,
                top_p,
                max_tokens,
                ..Default::default()
            },
        ],
        ..Default::default()
    }
    .validate(AgencyId::new(), "local", &|_| true)
    .unwrap();
    let conversation = ConversationId::new();
    let context = context
        .iter()
        .enumerate()
        .map(|(seq, (kind, from, text))| Message {
            images: Vec::new(),
            id: MessageId::new(),
            conversation_id: conversation,
            turn_id: None,
            seq: seq as i64,
            agent: AgentId::new(2),
            kind: *kind,
            linked: None,
            from: from.and_then(AgentId::new),
            to: AgentId::new(2),
            text: (*text).into(),
            tool: None,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: chrono::DateTime::UNIX_EPOCH,
        })
        .collect();
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

/// A system prompt, two deliveries in a row, the agent's reply, and a correction.
fn request(sampling: Sampling) -> ModelRequest {
    request_with(
        sampling,
        &[
            (MessageKind::System, None, "You are dev."),
            (MessageKind::Delivery, Some(1), "build it"),
            (MessageKind::Delivery, Some(1), "and test it"),
            (MessageKind::Reply, Some(2), "TO boss: done"),
            (
                MessageKind::Correction,
                None,
                "Your reply could not be delivered",
            ),
        ],
    )
}

/// What [`request`]'s context becomes.
fn folded_messages() -> Value {
    json!([
        {"role": "user", "content": "FROM boss: build it\n\nFROM boss: and test it"},
        {"role": "assistant", "content": "TO boss: done"},
        {"role": "user", "content": "Your reply could not be delivered"},
    ])
}

fn streaming(
    mut request: ModelRequest,
) -> (ModelRequest, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    request.deltas = Some(tx);
    (request, rx)
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut pieces = Vec::new();
    while let Ok(piece) = rx.try_recv() {
        pieces.push(piece);
    }
    pieces
}

fn failure(result: Result<Completion, ModelError>) -> String {
    match result {
        Ok(done) => panic!("expected an error, got {done:?}"),
        Err(ModelError::Failed { provider, message }) => {
            assert_eq!(provider, "claude");
            message
        }
        Err(other) => panic!("expected a provider failure, got {other:?}"),
    }
}

/// The request's strict alternation, starting with the user.
fn assert_alternates(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    assert!(!messages.is_empty());
    for (i, m) in messages.iter().enumerate() {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(m["role"], want, "message {i} of {messages:?}");
        assert!(m["content"].as_str().is_some_and(|c| !c.is_empty()));
    }
}

fn assert_well_formed(r: &Recorded) {
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.headers["anthropic-version"], ANTHROPIC_VERSION);
    assert!(r.headers["content-type"].starts_with("application/json"));
    assert_eq!(r.body["model"], MODEL);
    assert_alternates(&r.body);
}

#[tokio::test]
async fn a_message_is_asked_for_in_the_api_shape_and_read_whole() {
    let fake = Fake::start().await;
    fake.push(fake::message("TO boss: built and tested", 42, 7));

    let done = model(&fake)
        .complete(request((Some(0.3), None, Some(256))))
        .await
        .unwrap();
    assert_eq!(done.text, "TO boss: built and tested");
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 42,
            completion_tokens: 7
        }
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_well_formed(r);
    assert_eq!(r.headers["x-api-key"], KEY);
    assert_eq!(r.body["system"], "You are dev.");
    assert_eq!(r.body["messages"], folded_messages());
    assert_eq!(r.body["max_tokens"], 256);
    assert_eq!(r.body["temperature"], 0.3);
    let body = r.body.as_object().unwrap();
    assert!(!body.contains_key("top_p"));
    assert!(!body.contains_key("stream"));
}

#[tokio::test]
async fn max_tokens_is_always_sent_and_the_user_speaks_first() {
    let fake = Fake::start().await;
    fake.push(fake::message("ok", 1, 1));
    // No key (a proxy adds its own), no sampling, and a context that opens with the agent.
    let model = provider(&fake, None).model(MODEL).unwrap();
    let req = request_with(
        (None, Some(0.9), None),
        &[
            (MessageKind::Reply, Some(2), "TO boss: ready"),
            (MessageKind::Delivery, Some(1), "go"),
        ],
    );
    assert_eq!(model.complete(req).await.unwrap().text, "ok");

    let r = &fake.requests()[0];
    assert_well_formed(r);
    assert!(!r.headers.contains_key("x-api-key"));
    assert_eq!(r.body["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(r.body["top_p"], 0.9);
    let body = r.body.as_object().unwrap();
    assert!(!body.contains_key("temperature"));
    assert!(!body.contains_key("system"));
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "user", "content": "(conversation start)"},
            {"role": "assistant", "content": "TO boss: ready"},
            {"role": "user", "content": "FROM boss: go"},
        ])
    );
}

#[tokio::test]
async fn a_streamed_message_sends_its_pieces_in_order() {
    let fake = Fake::start().await;
    fake.push(fake::stream(&["TO boss: ", "built", " and tested"], 30, 9));

    let (req, mut rx) = streaming(request((None, None, None)));
    let done = model(&fake).complete(req).await.unwrap();
    assert_eq!(drain(&mut rx), ["TO boss: ", "built", " and tested"]);
    assert_eq!(done.text, "TO boss: built and tested");
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 30,
            completion_tokens: 9
        }
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_well_formed(r);
    assert_eq!(r.headers["x-api-key"], KEY);
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["system"], "You are dev.");
    assert_eq!(r.body["messages"], folded_messages());
    assert_eq!(r.body["max_tokens"], DEFAULT_MAX_TOKENS);
}

#[tokio::test]
async fn a_stream_whose_listener_left_still_completes() {
    let fake = Fake::start().await;
    fake.push(fake::stream(&["a", "b"], 3, 2));
    let (req, rx) = streaming(request((None, None, None)));
    drop(rx);
    assert_eq!(model(&fake).complete(req).await.unwrap().text, "ab");
}

#[tokio::test]
async fn a_wrong_key_fails_at_once_with_anthropics_message() {
    let fake = Fake::start().await;
    fake.otherwise(fake::invalid_key());
    let message = failure(model(&fake).complete(request((None, None, None))).await);
    assert_eq!(message, "HTTP 401: invalid x-api-key");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_rate_limit_is_waited_out() {
    let fake = Fake::start().await;
    fake.push(fake::rate_limited(0));
    fake.push(fake::message("ok", 5, 1));
    let done = model(&fake)
        .complete(request((None, None, None)))
        .await
        .unwrap();
    assert_eq!(done.text, "ok");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);
}

#[tokio::test]
async fn an_overloaded_answer_is_retried() {
    let fake = Fake::start().await;
    fake.push(fake::overloaded());
    fake.push(fake::stream(&["ok"], 5, 1));
    let (req, mut rx) = streaming(request((None, None, None)));
    assert_eq!(model(&fake).complete(req).await.unwrap().text, "ok");
    assert_eq!(drain(&mut rx), ["ok"]);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn overloaded_for_good_fails_after_the_retries() {
    let fake = Fake::start().await;
    fake.otherwise(fake::overloaded());
    let message = failure(model(&fake).complete(request((None, None, None))).await);
    assert_eq!(message, "HTTP 529: Overloaded");
    assert_eq!(fake.requests().len(), settings().max_retries as usize + 1);
}

/// A stream that breaks off, stalls or ends early is asked for once more; whoever listens sees
/// only what goes past what the first attempt already streamed.
#[tokio::test]
async fn a_broken_stream_is_asked_for_once_more_and_streams_on() {
    for broken in [
        fake::stream_error(&["TO boss: ", "half"]),
        fake::stalled_stream(&["TO boss: ", "half"]),
        fake::unfinished_stream(&["TO boss: ", "half"]),
    ] {
        let fake = Fake::start().await;
        fake.push(broken);
        fake.push(fake::stream(&["TO boss: ", "half", " and whole"], 3, 4));
        let (req, mut rx) = streaming(request((None, None, None)));
        let done = impatient(&fake).complete(req).await.unwrap();
        assert_eq!(done.text, "TO boss: half and whole");
        assert_eq!(drain(&mut rx), ["TO boss: ", "half", " and whole"]);
        assert_eq!(fake.requests().len(), 2);
    }
    // A second attempt that writes something else streams nothing more: the call's text is
    // its own, and the caller sends it whole (see the endpoint's "replaced" answer).
    let fake = Fake::start().await;
    fake.push(fake::stream_error(&["TO boss: ", "half"]));
    fake.push(fake::stream(&["TO boss: ", "other"], 3, 4));
    let (req, mut rx) = streaming(request((None, None, None)));
    let done = impatient(&fake).complete(req).await.unwrap();
    assert_eq!(done.text, "TO boss: other");
    assert_eq!(drain(&mut rx), ["TO boss: ", "half"]);
}

/// Once, then the error named: a stream that breaks twice, a stall twice, an early end twice.
#[tokio::test]
async fn a_stream_broken_twice_fails_with_its_error() {
    for (broken, says) in [
        (fake::stream_error(&["TO boss: ", "half"]), "Overloaded"),
        (fake::stalled_stream(&["TO boss: "]), "timed out"),
        (
            fake::unfinished_stream(&["TO boss: ", "done"]),
            "message_stop",
        ),
    ] {
        let fake = Fake::start().await;
        fake.push(broken.clone());
        fake.push(broken);
        let (req, mut rx) = streaming(request((None, None, None)));
        let message = failure(impatient(&fake).complete(req).await);
        assert!(message.contains(says), "{message}");
        assert_eq!(fake.requests().len(), 2);
        assert_eq!(drain(&mut rx).concat().matches("TO boss: ").count(), 1);
    }
    let fake = Fake::start().await;
    fake.push(fake::stream_error(&["TO boss: ", "half"]));
    fake.push(fake::stream_error(&["TO boss: ", "half"]));
    let message = failure(
        model(&fake)
            .complete(streaming(request((None, None, None))).0)
            .await,
    );
    assert!(message.contains("overloaded_error"), "{message}");
}

/// A model whose streams stall soon.
fn impatient(fake: &Fake) -> Arc<dyn Model> {
    let mut config = AnthropicConfig::new(Some(&fake.url), Some(KEY.into()));
    config.http = HttpSettings {
        idle_timeout: Duration::from_millis(300),
        ..settings()
    };
    Anthropic::new("claude", config)
        .unwrap()
        .model(MODEL)
        .unwrap()
}

#[tokio::test]
async fn a_malformed_answer_is_asked_for_once_more_then_is_a_clear_error() {
    let fake = Fake::start().await;
    fake.push(fake::malformed());
    fake.push(fake::message("TO boss: fine", 3, 2));
    let done = model(&fake).complete(request((None, None, None))).await;
    assert_eq!(done.unwrap().text, "TO boss: fine");

    let fake = Fake::start().await;
    fake.push(fake::malformed());
    fake.push(fake::malformed());
    let message = failure(model(&fake).complete(request((None, None, None))).await);
    assert!(message.starts_with("malformed answer"), "{message}");
    assert!(message.contains("not JSON"), "{message}");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn an_answer_without_text_is_an_error() {
    let fake = Fake::start().await;
    fake.push(agency_fakes::Reply::json(json!({
        "id": "msg_01Fake", "type": "message", "role": "assistant", "model": MODEL,
        "content": [], "stop_reason": "refusal", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 0}
    })));
    let message = failure(model(&fake).complete(request((None, None, None))).await);
    assert!(message.contains("no text"), "{message}");
    assert!(message.contains("refusal"), "{message}");
}

#[tokio::test]
async fn the_key_never_shows() {
    let fake = Fake::start().await;
    fake.push(fake::invalid_key());
    // A proxy that echoes what it was sent.
    fake.push(fake::error(
        400,
        "invalid_request_error",
        &format!("bad header x-api-key: {KEY}"),
    ));
    let anthropic = provider(&fake, Some(KEY));
    let model = anthropic.model(MODEL).unwrap();
    for _ in 0..2 {
        let message = failure(model.complete(request((None, None, None))).await);
        assert!(!message.contains(KEY), "{message}");
    }
    assert_eq!(fake.requests()[0].headers["x-api-key"], KEY);

    let debug = format!("{anthropic:?}");
    assert!(!debug.contains(KEY), "{debug}");
    assert!(debug.contains("REDACTED"), "{debug}");
    let config = AnthropicConfig::new(None, Some(KEY.into()));
    let debug = format!("{config:?}");
    assert!(!debug.contains(KEY), "{debug}");
    assert_eq!(config.base_url, ANTHROPIC_BASE_URL);
}

#[test]
fn any_named_model_is_served_and_bad_urls_are_refused() {
    let anthropic = Anthropic::new("claude", AnthropicConfig::new(None, None)).unwrap();
    assert!(anthropic.model("claude-opus-4-1").is_some());
    assert!(anthropic.model("").is_none());
    assert!(Anthropic::new("claude", AnthropicConfig::new(Some("not a url"), None)).is_err());
    assert!(Anthropic::new("claude", AnthropicConfig::new(Some("ftp://x"), None)).is_err());
}

/// The request must be one the Messages API takes.
fn assert_acceptable(r: &Recorded) {
    assert_eq!(r.path, "/v1/messages");
    let problems = fake::problems(&r.body);
    assert!(problems.is_empty(), "{problems:#?}\n{:#}", r.body);
}

/// The name the request sent for the tool named `qualified` in [`tools`].
fn wire(r: &Recorded, qualified: &str) -> String {
    let i = tools().iter().position(|t| t.name == qualified).unwrap();
    r.tool_names()[i].clone()
}

fn asked() -> ModelRequest {
    with_context(
        request((None, None, None)),
        answered_calls()[..2].to_vec(),
        tools(),
    )
}

#[tokio::test]
async fn tools_go_under_names_the_api_takes_and_tool_use_comes_back_under_theirs() {
    let fake = Fake::start().await;
    fake.push(fake::message("TO boss: nothing to call", 1, 1));
    let m = model(&fake);
    m.complete(asked()).await.unwrap();
    let sent = fake.requests()[0].clone();
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
        assert_eq!(sent["description"], tool.description.as_str());
        assert_eq!(sent["input_schema"], tool.input_schema);
    }

    // The model calls each tool by the name it was sent, and one it made up; no text.
    let mut script: Vec<Call> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Call::new(&format!("toolu_{i}"), n, &format!(r#"{{"path":"{i}"}}"#)))
        .collect();
    script.push(Call::new("toolu_x", "files__delete", r#"{"path":"x"}"#));
    fake.push(fake::tool_use(None, &script, 5, 6));
    let done = m.complete(asked()).await.unwrap();
    assert_eq!(done.text, "");
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 5,
            completion_tokens: 6
        }
    );
    let mut want: Vec<(String, String, Value)> = tools()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                format!("toolu_{i}"),
                t.name.clone(),
                json!({"path": i.to_string()}),
            )
        })
        .collect();
    want.push((
        "toolu_x".into(),
        "files__delete".into(),
        json!({"path": "x"}),
    ));
    let got: Vec<(String, String, Value)> = done
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.id.clone(),
                c.name.clone(),
                serde_json::from_str(&c.arguments).unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(fake.requests()[1].tool_names(), names);

    // Text and a call together.
    fake.push(fake::tool_use(
        Some("Let me look."),
        &[Call::new("toolu_y", "a__b", "{}")],
        1,
        1,
    ));
    let done = m.complete(asked()).await.unwrap();
    assert_eq!(done.text, "Let me look.");
    assert_eq!(done.tool_calls, [call("toolu_y", "a/b", "{}")]);
}

#[tokio::test]
async fn a_streamed_tool_use_streams_only_its_text_and_keeps_the_input_as_it_came() {
    let fake = Fake::start().await;
    let script = [
        Call::streamed(
            "toolu_a",
            "files__read_text_file",
            &[r#"{"pa"#, r#"th": "#, r#""a.txt"}"#],
        ),
        // Cut off (the answer ran out of tokens): passed on as it came.
        Call::streamed("toolu_b", "files__delete", &[r#"{"path": "#, r#""b"#]),
        // No input at all.
        Call::streamed("toolu_c", "a__b", &[]),
    ];
    fake.push(fake::tool_use_stream(&["Reading ", "both."], &script, 7, 8));
    let (req, mut rx) = streaming(asked());
    let done = model(&fake).complete(req).await.unwrap();
    assert_eq!(drain(&mut rx), ["Reading ", "both."]);
    assert_eq!(done.text, "Reading both.");
    assert_eq!(
        done.tool_calls,
        [
            call("toolu_a", "files/read_text_file", r#"{"path": "a.txt"}"#),
            call("toolu_b", "files__delete", r#"{"path": "b"#),
            call("toolu_c", "a/b", "{}"),
        ]
    );
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 7,
            completion_tokens: 8
        }
    );
    let r = fake.requests()[0].clone();
    assert_acceptable(&r);
    assert_eq!(r.body["stream"], true);

    // Calls alone.
    fake.push(fake::tool_use_stream(
        &[],
        &[Call::streamed("toolu_d", "a__b", &["{}"])],
        1,
        1,
    ));
    let (req, mut rx) = streaming(asked());
    let done = model(&fake).complete(req).await.unwrap();
    assert_eq!(done.text, "");
    assert_eq!(done.tool_calls, [call("toolu_d", "a/b", "{}")]);
    assert!(drain(&mut rx).is_empty());
}

#[tokio::test]
async fn calls_and_results_in_the_context_are_sent_as_blocks_in_alternating_turns() {
    let fake = Fake::start().await;
    fake.push(fake::message("TO boss: done", 1, 1));
    let req = with_context(request((None, None, None)), answered_calls(), tools());
    model(&fake).complete(req).await.unwrap();
    let r = fake.requests()[0].clone();
    assert_acceptable(&r);
    assert_eq!(r.body["system"], "You are dev.");
    let tool_use = |id: &str, qualified: &str, input: Value| json!({"type": "tool_use", "id": id, "name": wire(&r, qualified), "input": input});
    let tool_result = |id: &str, content: &str, is_error: bool| json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error});
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "user", "content": "FROM boss: read a.txt"},
            {"role": "assistant", "content": [
                tool_use("call_1", "files/read_text_file", json!({"path": "a.txt"})),
                // Not JSON: the API takes only an object, so the text goes inside one.
                tool_use("call_2", "a.b", json!({UNPARSED_ARGUMENTS: r#"{"path": "b.txt"#})),
            ]},
            // Both results in one turn.
            {"role": "user", "content": [
                tool_result("call_1", "contents of a", false),
                tool_result("call_2", "The arguments are not JSON.", true),
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "One more."},
                tool_use("call_3", "files.v2/read", json!({"path": "c"})),
            ]},
            // The result first, then what came after it, in the same turn.
            {"role": "user", "content": [
                tool_result("call_3", "no such file", true),
                {"type": "text", "text": "FROM boss: and?"},
            ]},
        ])
    );
}

#[tokio::test]
async fn a_call_without_a_result_is_answered_with_an_error_before_anything_else() {
    let fake = Fake::start().await;
    fake.otherwise(fake::message("TO boss: ok", 1, 1));
    let m = model(&fake);
    m.complete(with_context(
        request((None, None, None)),
        unanswered_call(),
        tools(),
    ))
    .await
    .unwrap();
    let r = fake.requests()[0].clone();
    assert_acceptable(&r);
    let messages = r.messages();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(
        messages[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "call_2", "content": "contents of b",
             "is_error": false},
            {"type": "tool_result", "tool_use_id": "call_1", "content": MISSING_RESULT,
             "is_error": true},
            {"type": "text", "text": "FROM boss: well?"},
        ])
    );

    // A context that ends with a call, and a result with no text.
    let mut context = unanswered_call();
    context.truncate(3);
    context.push((
        MessageKind::ToolResult,
        None,
        "",
        result("call_1", "files/read_text_file", false),
    ));
    m.complete(with_context(request((None, None, None)), context, tools()))
        .await
        .unwrap();
    let r = fake.requests()[1].clone();
    assert_acceptable(&r);
    let results = r.tool_results();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["content"], EMPTY_RESULT);
    assert_eq!(results[1]["content"], MISSING_RESULT);
    assert_eq!(results[1]["is_error"], true);
}

/// The API refuses tool blocks in a request without tools: an agent whose tools were taken
/// away still has its calls and their results in its context, told as text.
#[tokio::test]
async fn without_tools_calls_and_results_are_told_as_text() {
    let fake = Fake::start().await;
    fake.push(fake::message("TO boss: ok", 1, 1));
    model(&fake)
        .complete(with_context(
            request((None, None, None)),
            answered_calls(),
            Vec::new(),
        ))
        .await
        .unwrap();
    let r = fake.requests()[0].clone();
    assert_acceptable(&r);
    assert_well_formed(&r);
    assert!(r.body.get("tools").is_none());
    assert!(r.tool_calls().is_empty() && r.tool_results().is_empty());
    let messages = r.messages();
    let all: String = messages
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    for said in [
        "files/read_text_file",
        r#"{"path": "b.txt"#,
        "contents of a",
        "The arguments are not JSON.",
        "One more.",
        "no such file",
        "FROM boss: and?",
    ] {
        assert!(all.contains(said), "{said} in {all}");
    }
}

#[tokio::test]
async fn plain_turns_stay_text_when_tools_are_offered() {
    let fake = Fake::start().await;
    fake.push(fake::message("TO boss: ok", 1, 1));
    let context = vec![
        (MessageKind::System, None, "You are dev.", None),
        (MessageKind::Delivery, Some(1), "hi", None),
        (MessageKind::Reply, Some(2), "TO boss: hi", calls(&[])),
        (MessageKind::Delivery, Some(1), "again", None),
    ];
    model(&fake)
        .complete(with_context(request((None, None, None)), context, tools()))
        .await
        .unwrap();
    let r = fake.requests()[0].clone();
    assert_acceptable(&r);
    assert_well_formed(&r);
    assert_eq!(r.tools().len(), tools().len());
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "user", "content": "FROM boss: hi"},
            {"role": "assistant", "content": "TO boss: hi"},
            {"role": "user", "content": "FROM boss: again"},
        ])
    );
}
