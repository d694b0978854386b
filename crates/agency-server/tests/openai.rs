//! The drop-in OpenAI endpoint end to end: the real app on a fresh SQLite file, with the demo
//! agency (`examples/studio.yaml`, on the deterministic rules model) imported and an API key
//! made for it, spoken to over loopback as an OpenAI client would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use agency_core::{
    Agency, AgencyDraft, AgentDraft, AgentId, ConversationId, MessageKind, ProviderDraft,
};
use agency_fakes::{Fake, openai};
use agency_file::AgencyFile;
use agency_providers::Providers;
use agency_runtime::{LOCAL_OWNER, Runtime};
use agency_server::CorsOrigins;
use insta::dynamic_redaction;
use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, StatusCode};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

#[path = "openai/show_work.rs"]
mod show_work;

const STUDIO: &str = include_str!("../../../examples/studio.yaml");

const CHAT: &str = "/v1/chat/completions";
const CONVERSATION: &str = "x-agency-conversation";
/// A well-formed id that is no conversation's.
const GHOST: &str = "00000000-0000-4000-8000-000000000000";

/// What the studio answers to `input`.
fn answer(input: &str) -> String {
    format!(
        "Here is your reviewed build. Approved: Please review: fn main() {{ /* Please build: {input} */ }}"
    )
}

/// A running server, the runtime behind it, and a key for the studio.
struct App {
    base: String,
    client: reqwest::Client,
    rt: Arc<Runtime>,
    store: Arc<dyn agency_store::Store>,
    auth: Arc<agency_runtime::keys::Authenticator>,
    studio: Agency,
    /// A key of the studio, with the default rate limit.
    key: String,
    _dir: tempfile::TempDir,
}

impl App {
    async fn spawn() -> App {
        App::spawn_with_cors(CorsOrigins::None).await
    }

    /// A server whose OpenAI endpoints answer browsers of `cors` origins.
    async fn spawn_with_cors(cors: CorsOrigins) -> App {
        let dir = tempfile::tempdir().unwrap();
        let served = agency_testing::serve_with_cors(
            dir.path(),
            Providers::builtin(),
            Vec::new(),
            agency_server::Connections::default(),
            cors,
        )
        .await
        .unwrap();
        let rt = served.rt;
        let file = AgencyFile::parse("examples/studio.yaml", STUDIO).unwrap();
        let studio = rt.agencies().save(&file.draft, LOCAL_OWNER).await.unwrap();

        let mut app = App {
            base: served.base,
            client: reqwest::Client::new(),
            rt,
            store: served.store,
            auth: served.auth,
            studio,
            key: String::new(),
            _dir: dir,
        };
        app.key = app.make_key(&app.studio, "test", None, None).await;
        app
    }

    /// Imports a copy of the studio under another name.
    async fn import_copy(&self, name: &str) -> Agency {
        let yaml = STUDIO.replacen("\nname: studio\n", &format!("\nname: {name}\n"), 1);
        assert_ne!(yaml, STUDIO);
        let file = AgencyFile::parse("copy.yaml", &yaml).unwrap();
        let agency = self
            .rt
            .agencies()
            .save(&file.draft, LOCAL_OWNER)
            .await
            .unwrap();
        assert_ne!(agency.id, self.studio.id);
        agency
    }

    /// A new key of `agency`, in plain.
    async fn make_key(
        &self,
        agency: &Agency,
        name: &str,
        expires_in: Option<Duration>,
        rate_limit: Option<u32>,
    ) -> String {
        let (_, plain) = self
            .auth
            .create_key(
                agency,
                name,
                expires_in,
                rate_limit,
                agency_core::KeyBudgets::default(),
            )
            .await
            .unwrap();
        plain.expose_secret().to_string()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn post(&self, path: &str, key: Option<&str>) -> RequestBuilder {
        let rb = self.client.post(self.url(path));
        match key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    async fn get(&self, path: &str, key: Option<&str>) -> Reply {
        let rb = self.client.get(self.url(path));
        let rb = match key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        };
        Reply::of(rb).await
    }

    /// `POST path` with this body and the studio's key.
    async fn chat(&self, path: &str, body: &Value) -> Reply {
        Reply::of(self.post(path, Some(&self.key)).json(body)).await
    }

    /// `POST /v1/chat/completions` to the studio with these messages.
    async fn say(&self, messages: Value) -> Reply {
        self.chat(CHAT, &json!({ "model": "studio", "messages": messages }))
            .await
    }

    async fn turns(&self, c: ConversationId) -> Vec<u32> {
        self.store
            .turns(c)
            .await
            .unwrap()
            .iter()
            .map(|t| t.number)
            .collect()
    }

    /// The texts of the user's inputs in the manager's context, in order.
    async fn inputs(&self, c: ConversationId) -> Vec<String> {
        self.store
            .messages(c)
            .await
            .unwrap()
            .into_iter()
            .filter(|m| m.kind == MessageKind::Input)
            .map(|m| m.text)
            .collect()
    }
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text })
}

fn assistant(text: &str) -> Value {
    json!({ "role": "assistant", "content": text })
}

fn system(text: &str) -> Value {
    json!({ "role": "system", "content": text })
}

/// A response, read whole.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
}

impl Reply {
    /// Every response, error or not, names its request like OpenAI's: `x-request-id`.
    async fn of(rb: RequestBuilder) -> Reply {
        let res = rb.send().await.unwrap();
        let reply = Reply {
            status: res.status(),
            headers: res.headers().clone(),
            text: res.text().await.unwrap(),
        };
        let id = reply.header("x-request-id").unwrap_or_default();
        let hex = id.strip_prefix("req_").unwrap_or_default();
        assert!(
            hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
            "x-request-id {id:?} on {} {}",
            reply.status,
            reply.text
        );
        reply
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn json(&self) -> Value {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{}",
            self.text
        );
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("{}: body is not JSON ({e}): {:?}", self.status, self.text))
    }

    /// A successful completion's body.
    fn ok(&self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.text);
        self.json()
    }

    /// The answer of a successful, non-streamed completion.
    fn content(&self) -> String {
        self.ok()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The conversation the response names in its header.
    fn conversation(&self) -> ConversationId {
        let v = self
            .header(CONVERSATION)
            .unwrap_or_else(|| panic!("no {CONVERSATION} header: {:?}", self.headers));
        v.parse()
            .unwrap_or_else(|e| panic!("{CONVERSATION}: {v:?} is not an id: {e}"))
    }

    /// The `data:` payloads of an event stream: JSON values, and `[DONE]` as a string.
    fn events(&self) -> Vec<Value> {
        assert_eq!(self.status, StatusCode::OK, "{}", self.text);
        assert_eq!(
            self.header("content-type"),
            Some("text/event-stream"),
            "{}",
            self.text
        );
        // An `event:` line (the Responses API's) names the type its data says.
        let mut named: Option<&str> = None;
        self.text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with(':'))
            .filter_map(|l| {
                if let Some(event) = l.strip_prefix("event:") {
                    named = Some(event.trim());
                    return None;
                }
                let data = l
                    .strip_prefix("data:")
                    .unwrap_or_else(|| panic!("not a data line: {l:?}"));
                let data = data.strip_prefix(' ').unwrap_or(data);
                if data == "[DONE]" {
                    return Some(Value::from(data));
                }
                let value: Value = serde_json::from_str(data)
                    .unwrap_or_else(|e| panic!("data is not JSON ({e}): {data:?}"));
                if let Some(event) = named.take() {
                    assert_eq!(value["type"], json!(event), "{data}");
                }
                Some(value)
            })
            .collect()
    }

    /// Status, the headers that matter, and body: what a snapshot shows.
    fn shown(&self) -> Value {
        let mut headers = serde_json::Map::new();
        for name in ["content-type", CONVERSATION, "retry-after"] {
            if let Some(v) = self.header(name) {
                headers.insert(name.into(), v.into());
            }
        }
        json!({ "status": self.status.as_u16(), "headers": headers, "body": self.json() })
    }

    /// Checks an OpenAI error: the status, and a body of exactly `{"error": {message, type,
    /// param, code}}`. Returns the message.
    fn error(&self, status: StatusCode, code: Option<&str>, param: Option<&str>) -> String {
        assert_eq!(self.status, status, "{}", self.text);
        let body = self.json();
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["error"], "{body}");
        let e = body["error"].as_object().unwrap();
        let mut keys: Vec<&str> = e.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["code", "message", "param", "type"], "{body}");
        let kind = if status.is_server_error() {
            "server_error"
        } else if status == StatusCode::TOO_MANY_REQUESTS {
            "requests"
        } else {
            "invalid_request_error"
        };
        assert_eq!(e["type"], json!(kind), "{body}");
        assert_eq!(e["code"], json!(code), "{body}");
        assert_eq!(e["param"], json!(param), "{body}");
        let message = e["message"].as_str().unwrap();
        assert!(!message.is_empty(), "{body}");
        message.to_string()
    }
}

/// A chunk or completion id: `chatcmpl-` and 32 hex digits.
fn assert_completion_id(id: &str) {
    let hex = id
        .strip_prefix("chatcmpl-")
        .unwrap_or_else(|| panic!("id {id:?}"));
    assert!(
        hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "id {id:?}"
    );
}

/// A unix time within a few minutes of now.
fn assert_recent(t: i64) {
    let now = chrono::Utc::now().timestamp();
    assert!((now - 300..=now + 5).contains(&t), "{t} is not about {now}");
}

/// Snapshots `value`, redacting (after checking) completion ids, times and conversation ids.
fn snapshot(name: &str, value: &Value) {
    let mut settings = insta::Settings::clone_current();
    settings.set_sort_maps(true);
    for selector in [".body.id", "[].id"] {
        settings.add_redaction(
            selector,
            dynamic_redaction(|v, _| {
                assert_completion_id(v.as_str().unwrap());
                "[id]"
            }),
        );
    }
    for selector in [".body.created", "[].created", ".body.data[].created"] {
        settings.add_redaction(
            selector,
            dynamic_redaction(|v, _| {
                assert_recent(v.as_i64().unwrap());
                "[created]"
            }),
        );
    }
    settings.add_redaction(
        ".headers[\"x-agency-conversation\"]",
        dynamic_redaction(|v, _| {
            v.as_str().unwrap().parse::<ConversationId>().unwrap();
            "[conversation]"
        }),
    );
    settings.bind(|| insta::assert_json_snapshot!(name, value));
}

fn assert_usage(usage: &Value) {
    let n = |k: &str| {
        usage[k]
            .as_u64()
            .unwrap_or_else(|| panic!("usage.{k}: {usage}"))
    };
    assert_eq!(
        n("total_tokens"),
        n("prompt_tokens") + n("completion_tokens"),
        "{usage}"
    );
    assert_eq!(
        usage["prompt_tokens_details"],
        json!({ "cached_tokens": 0, "audio_tokens": 0 }),
        "{usage}"
    );
    assert_eq!(
        usage["completion_tokens_details"],
        json!({
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }),
        "{usage}"
    );
    assert_eq!(usage.as_object().unwrap().len(), 5, "{usage}");
}

/// `usage` with these counts, and OpenAI's (zero) details.
fn usage_of(prompt: u32, completion: u32) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Completions

#[tokio::test]
async fn a_completion_answers_like_openai() {
    let app = App::spawn().await;
    let r = app.say(json!([user("a todo app")])).await;
    let body = r.ok();
    assert_completion_id(body["id"].as_str().unwrap());
    assert_recent(body["created"].as_i64().unwrap());
    assert_eq!(body["object"], json!("chat.completion"));
    assert_eq!(body["model"], json!("studio"));
    assert_eq!(
        body["choices"],
        json!([{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": answer("a todo app"),
                "refusal": null,
                "annotations": [],
            },
            "logprobs": null,
            "finish_reason": "stop",
        }])
    );
    assert_usage(&body["usage"]);
    // What OpenAI sends beside: a string fingerprint (the studio's first published version)
    // and the service tier.
    assert_eq!(body["system_fingerprint"], json!("fp_v1"));
    assert_eq!(body["service_tier"], json!("default"));

    // The conversation is real, the studio's, with one turn.
    let c = r.conversation();
    let conv = app.store.conversation(c).await.unwrap().unwrap();
    assert_eq!(conv.agency_id, app.studio.id);
    assert_eq!(app.turns(c).await, [1]);
    assert_eq!(app.inputs(c).await, ["a todo app"]);

    snapshot("completion", &r.shown());
    let again = app.say(json!([user("a todo app")])).await;
    assert_ne!(
        again.header("x-request-id"),
        r.header("x-request-id"),
        "each request has its own id"
    );
}

#[tokio::test]
async fn a_streamed_completion_sends_chunks_then_usage_then_done() {
    let app = App::spawn().await;
    let r = app
        .chat(
            CHAT,
            &json!({
                "model": "studio",
                "messages": [user("a todo app")],
                "stream": true,
                "stream_options": { "include_usage": true },
            }),
        )
        .await;
    let events = r.events();
    let c = r.conversation();
    assert_eq!(app.turns(c).await, [1]);

    let (done, chunks) = events.split_last().unwrap();
    assert_eq!(done, &json!("[DONE]"));
    assert!(chunks.len() >= 4, "{events:#?}");
    let id = chunks[0]["id"].as_str().unwrap();
    assert_completion_id(id);
    assert_recent(chunks[0]["created"].as_i64().unwrap());
    for chunk in chunks {
        assert_eq!(chunk["id"], json!(id), "{chunk}");
        assert_eq!(chunk["created"], chunks[0]["created"], "{chunk}");
        assert_eq!(chunk["object"], json!("chat.completion.chunk"), "{chunk}");
        assert_eq!(chunk["model"], json!("studio"), "{chunk}");
        // The same fingerprint as a completion's, and the tier, on every chunk.
        assert_eq!(chunk["system_fingerprint"], json!("fp_v1"), "{chunk}");
        assert_eq!(chunk["service_tier"], json!("default"), "{chunk}");
    }

    // The role first, with empty content.
    assert_eq!(
        chunks[0]["choices"],
        json!([{ "index": 0, "delta": { "role": "assistant", "content": "" }, "logprobs": null, "finish_reason": null }])
    );
    let (usage, rest) = chunks.split_last().unwrap();
    let (finish, pieces) = rest.split_last().unwrap();
    // Then content deltas that make up the answer.
    let mut text = String::new();
    for piece in &pieces[1..] {
        let choices = piece["choices"].as_array().unwrap();
        assert_eq!(choices.len(), 1, "{piece}");
        assert_eq!(choices[0]["finish_reason"], Value::Null, "{piece}");
        assert_eq!(choices[0]["delta"]["role"], Value::Null, "{piece}");
        text.push_str(choices[0]["delta"]["content"].as_str().unwrap());
        // Usage is asked for: null until the last chunk.
        assert_eq!(piece.get("usage"), Some(&Value::Null), "{piece}");
    }
    assert_eq!(text, answer("a todo app"));
    // Then the finish, with an empty delta.
    assert_eq!(
        finish["choices"],
        json!([{ "index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop" }])
    );
    assert_eq!(finish.get("usage"), Some(&Value::Null), "{finish}");
    // Then usage, with no choices.
    assert_eq!(usage["choices"], json!([]), "{usage}");
    assert_usage(&usage["usage"]);

    snapshot("stream", &Value::Array(events));
}

#[tokio::test]
async fn a_stream_without_include_usage_has_no_usage() {
    let app = App::spawn().await;
    let r = app
        .chat(
            CHAT,
            &json!({ "model": "studio", "messages": [user("a todo app")], "stream": true }),
        )
        .await;
    r.conversation();
    let events = r.events();
    let (done, chunks) = events.split_last().unwrap();
    assert_eq!(done, &json!("[DONE]"));
    for chunk in chunks {
        assert!(chunk.get("usage").is_none(), "{chunk}");
        assert_eq!(chunk["choices"].as_array().unwrap().len(), 1, "{chunk}");
    }
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        json!("stop")
    );
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, answer("a todo app"));
}

#[tokio::test]
async fn the_fingerprint_follows_the_published_version() {
    let app = App::spawn().await;
    let fingerprint = |body: Value| body["system_fingerprint"].as_str().unwrap().to_string();
    assert_eq!(
        fingerprint(app.say(json!([user("a todo app")])).await.ok()),
        "fp_v1"
    );
    // A new release of the studio: the next request is answered by it, and says so.
    let yaml = STUDIO.replacen("max_hops: 16", "max_hops: 15", 1);
    assert_ne!(yaml, STUDIO);
    let file = AgencyFile::parse("examples/studio.yaml", &yaml).unwrap();
    let again = app
        .rt
        .agencies()
        .save(&file.draft, LOCAL_OWNER)
        .await
        .unwrap();
    assert_eq!(again.id, app.studio.id);
    assert_eq!(
        fingerprint(app.say(json!([user("a todo app")])).await.ok()),
        "fp_v2"
    );
    let r = app
        .chat(
            CHAT,
            &json!({ "model": "studio", "messages": [user("a todo app")], "stream": true }),
        )
        .await;
    let events = r.events();
    for chunk in &events[..events.len() - 1] {
        assert_eq!(chunk["system_fingerprint"], json!("fp_v2"), "{chunk}");
    }
}

#[tokio::test]
async fn ignored_parameters_are_accepted() {
    let app = App::spawn().await;
    let r = app
        .chat(
            CHAT,
            &json!({
                "model": "studio",
                "messages": [user("a todo app")],
                "temperature": 0.2,
                "top_p": 1,
                "max_tokens": 10,
                "user": "someone",
                "seed": 7,
                "n": 1,
                "logprobs": false,
                "response_format": { "type": "text" },
                "tools": null,
                "stream": false,
            }),
        )
        .await;
    assert_eq!(r.content(), answer("a todo app"));
}

#[tokio::test]
async fn text_content_parts_are_joined() {
    let app = App::spawn().await;
    let r = app
        .say(json!([{ "role": "user", "content": [
            { "type": "text", "text": "a todo" },
            { "type": "text", "text": "app" },
        ] }]))
        .await;
    assert_eq!(r.content(), answer("a todo\napp"));
}

#[tokio::test]
async fn images_and_a_prefill_reach_the_studio() {
    let app = App::spawn().await;
    // The rules model builds whatever it reads: an image is its placeholder.
    let r = app
        .say(json!([{ "role": "user", "content": [
            { "type": "text", "text": "a todo app like" },
            { "type": "image_url", "image_url": { "url": "data:image/jpeg;base64,/9j/4AAQ" } },
        ] }]))
        .await;
    assert_eq!(
        r.content(),
        answer("a todo app like\n[image: inline image]")
    );
    // A prefill is accepted; an answer that does not begin with it is sent whole.
    let r = app
        .say(json!([user("a todo app"), assistant("Sure")]))
        .await;
    let content = r.content();
    assert!(
        content.starts_with("Here is your reviewed build.") && content.contains("a todo app"),
        "{content}"
    );
}

// ---------------------------------------------------------------------------------------------
// Models

#[tokio::test]
async fn models_list_the_keys_agency() {
    let app = App::spawn().await;
    let key = Some(app.key.as_str());
    let r = app.get("/v1/models", key).await;
    let list = r.ok();
    let created = i64::try_from(app.studio.id.0.get_timestamp().unwrap().to_unix().0).unwrap();
    assert_eq!(
        list,
        json!({
            "object": "list",
            "data": [{ "id": "studio", "object": "model", "created": created, "owned_by": LOCAL_OWNER }],
        })
    );
    snapshot("models", &r.shown());

    let id = app.studio.id.to_string();
    for path in [
        "/api/agency/studio/models".to_string(),
        format!("/api/agency/{id}/models"),
    ] {
        assert_eq!(app.get(&path, key).await.ok(), list, "{path}");
    }
    for path in [
        "/v1/models/studio".to_string(),
        format!("/v1/models/{id}"),
        "/api/agency/studio/models/studio".to_string(),
        format!("/api/agency/{id}/models/studio"),
        format!("/api/agency/studio/models/{id}"),
    ] {
        assert_eq!(app.get(&path, key).await.ok(), list["data"][0], "{path}");
    }
    for path in [
        "/v1/models/gpt-4o",
        "/api/agency/gpt-4o/models",
        "/api/agency/studio/models/gpt-4o",
    ] {
        let r = app.get(path, key).await;
        let m = r.error(StatusCode::NOT_FOUND, Some("model_not_found"), None);
        assert!(m.contains("gpt-4o"), "{path}: {m}");
    }
    let r = app.get("/v1/models", None).await;
    r.error(StatusCode::UNAUTHORIZED, None, None);
}

// ---------------------------------------------------------------------------------------------
// Errors

#[tokio::test]
async fn errors_have_openais_shape() {
    let app = App::spawn().await;
    let key = Some(app.key.as_str());
    let ok = |extra: Value| {
        let mut body = json!({ "model": "studio", "messages": [user("a todo app")] });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    type Case<'a> = (
        &'a str,
        RequestBuilder,
        StatusCode,
        Option<&'a str>,
        Option<&'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            "error_401_missing_key",
            app.post(CHAT, None).json(&ok(json!({}))),
            StatusCode::UNAUTHORIZED,
            None,
            None,
        ),
        (
            "error_401_bad_key",
            app.post(CHAT, Some("agk_0123456789abcdef"))
                .json(&ok(json!({}))),
            StatusCode::UNAUTHORIZED,
            Some("invalid_api_key"),
            None,
        ),
        (
            "error_401_not_an_agency_key",
            app.post(CHAT, Some("sk-proj-0123456789"))
                .json(&ok(json!({}))),
            StatusCode::UNAUTHORIZED,
            Some("invalid_api_key"),
            None,
        ),
        (
            // The key is checked before the body is read.
            "error_401_bad_key_and_bad_body",
            app.post(CHAT, Some("agk_0123456789abcdef"))
                .header("content-type", "application/json")
                .body("{\"model\": "),
            StatusCode::UNAUTHORIZED,
            Some("invalid_api_key"),
            None,
        ),
        (
            "error_404_unknown_model",
            app.post(CHAT, key).json(&ok(json!({ "model": "gpt-4o" }))),
            StatusCode::NOT_FOUND,
            Some("model_not_found"),
            None,
        ),
        (
            "error_404_unknown_agency_path",
            app.post("/api/agency/gpt-4o/chat/completions", key)
                .json(&ok(json!({}))),
            StatusCode::NOT_FOUND,
            Some("model_not_found"),
            None,
        ),
        (
            "error_404_unknown_conversation",
            app.post(CHAT, key)
                .header(CONVERSATION, GHOST)
                .json(&ok(json!({}))),
            StatusCode::NOT_FOUND,
            Some("conversation_not_found"),
            None,
        ),
        (
            "error_400_malformed_conversation_header",
            app.post(CHAT, key)
                .header(CONVERSATION, "not-a-uuid")
                .json(&ok(json!({}))),
            StatusCode::BAD_REQUEST,
            None,
            None,
        ),
        (
            "error_400_n",
            app.post(CHAT, key).json(&ok(json!({ "n": 2 }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("n"),
        ),
        (
            "error_400_hosted_tool",
            app.post(CHAT, key)
                .json(&ok(json!({ "tools": [{ "type": "web_search" }] }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("tools[0].type"),
        ),
        (
            "error_400_unknown_argument",
            app.post(CHAT, key).json(&ok(json!({ "frobnicate": true }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("frobnicate"),
        ),
        (
            "error_400_empty_messages",
            app.post(CHAT, key).json(&ok(json!({ "messages": [] }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages"),
        ),
        (
            "error_400_no_user_message",
            app.post(CHAT, key).json(&ok(json!({
                "messages": [system("be brief"), assistant("sure")],
            }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages"),
        ),
        (
            "error_400_prefill_after_an_answer",
            app.post(CHAT, key).json(&ok(json!({
                "messages": [user("a todo app"), assistant("done"), assistant("sure")],
            }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages"),
        ),
        (
            "error_400_audio_content_part",
            app.post(CHAT, key).json(&ok(json!({ "messages": [{
                "role": "user",
                "content": [
                    { "type": "text", "text": "what is this?" },
                    { "type": "input_audio", "input_audio": { "data": "AAAA", "format": "wav" } },
                ],
            }] }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages[0].content[1]"),
        ),
        (
            "error_400_file_content_part",
            app.post(CHAT, key).json(&ok(json!({ "messages": [{
                "role": "user",
                "content": [{ "type": "file", "file": { "file_id": "file-abc" } }],
            }] }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages[0].content[0]"),
        ),
        (
            "error_400_malformed_json",
            app.post(CHAT, key)
                .header("content-type", "application/json")
                .body("{\"model\": \"studio\", \"messages\": ["),
            StatusCode::BAD_REQUEST,
            None,
            None,
        ),
        (
            "error_400_missing_model",
            app.post(CHAT, key)
                .json(&json!({ "messages": [user("a todo app")] })),
            StatusCode::BAD_REQUEST,
            None,
            Some("model"),
        ),
        (
            "error_400_stream_options_without_stream",
            app.post(CHAT, key).json(&ok(json!({
                "stream_options": { "include_usage": true },
            }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("stream_options"),
        ),
        (
            "error_400_response_format",
            app.post(CHAT, key).json(&ok(json!({
                "response_format": { "type": "json_schema",
                    "json_schema": { "name": "answer", "schema": { "type": 5 } } },
            }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("response_format.json_schema.schema"),
        ),
        (
            "error_400_tool_without_call",
            app.post(CHAT, key).json(&ok(json!({ "messages": [
                user("a todo app"),
                { "role": "tool", "tool_call_id": "x", "content": "42" },
            ] }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages[1].tool_call_id"),
        ),
        (
            "error_400_blank_user_message",
            app.post(CHAT, key)
                .json(&ok(json!({ "messages": [user("  \n ")] }))),
            StatusCode::BAD_REQUEST,
            None,
            Some("messages"),
        ),
    ];
    for (name, request, status, code, param) in cases {
        let r = Reply::of(request).await;
        r.error(status, code, param);
        assert!(r.header(CONVERSATION).is_none(), "{name}");
        snapshot(name, &r.shown());
    }

    // None of that started a conversation.
    assert!(
        app.store
            .list_conversations(app.studio.id)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_body_over_4_mib_is_413() {
    let app = App::spawn().await;
    let big = "x".repeat(4 * 1024 * 1024 + 1);
    let body =
        serde_json::to_string(&json!({ "model": "studio", "messages": [user(&big)] })).unwrap();
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    r.error(
        StatusCode::PAYLOAD_TOO_LARGE,
        Some("request_too_large"),
        None,
    );
    snapshot("error_413_too_large", &r.shown());

    // Sent in chunks, without a length: the same.
    let mut chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(
        br#"{"model": "studio", "messages": [{"role": "user", "content": ""#.to_vec(),
    )];
    chunks.extend((0..65).map(|_| Ok(vec![b'x'; 64 * 1024])));
    chunks.push(Ok(br#""}]}"#.to_vec()));
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks))),
    )
    .await;
    r.error(
        StatusCode::PAYLOAD_TOO_LARGE,
        Some("request_too_large"),
        None,
    );

    // Just under the limit is read (and answered).
    let pad = 4 * 1024 * 1024 - 200;
    let body =
        json!({ "model": "studio", "messages": [user(&format!("a todo app{}", " ".repeat(pad)))] });
    let len = serde_json::to_vec(&body).unwrap().len();
    assert!(len < 4 * 1024 * 1024, "{len}");
    let r = app.chat(CHAT, &body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

// ---------------------------------------------------------------------------------------------
// Paths and agencies

#[tokio::test]
async fn agency_paths_work_like_v1() {
    let app = App::spawn().await;
    let body = json!({ "model": "studio", "messages": [user("a todo app")] });
    let v1 = app.chat(CHAT, &body).await;
    let mut expected = v1.ok();
    let strip = |v: &mut Value| {
        let o = v.as_object_mut().unwrap();
        assert_completion_id(o.remove("id").unwrap().as_str().unwrap());
        assert_recent(o.remove("created").unwrap().as_i64().unwrap());
    };
    strip(&mut expected);

    let by_id = format!("/api/agency/{}/chat/completions", app.studio.id);
    for path in ["/api/agency/studio/chat/completions", by_id.as_str()] {
        let r = app.chat(path, &body).await;
        let mut got = r.ok();
        strip(&mut got);
        assert_eq!(got, expected, "{path}");
        // Each a new conversation of the studio.
        let c = r.conversation();
        assert_ne!(c, v1.conversation());
        let conv = app.store.conversation(c).await.unwrap().unwrap();
        assert_eq!(conv.agency_id, app.studio.id, "{path}");

        // Streamed too.
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let r = app.chat(path, &streamed).await;
        r.conversation();
        let text: String = r
            .events()
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(text, answer("a todo app"), "{path}");
    }

    // On an agency's path the model may be left out.
    let r = app
        .chat(
            "/api/agency/studio/chat/completions",
            &json!({ "messages": [user("a todo app")] }),
        )
        .await;
    assert_eq!(r.content(), answer("a todo app"));
    // And /v1 takes the agency's id as its model.
    let r = app
        .chat(
            CHAT,
            &json!({ "model": app.studio.id.to_string(), "messages": [user("a todo app")] }),
        )
        .await;
    assert_eq!(r.content(), answer("a todo app"));
}

#[tokio::test]
async fn a_key_reaches_only_its_own_agency() {
    let app = App::spawn().await;
    let gallery = app.import_copy("gallery").await;
    let studio_key = app.key.clone();
    let gallery_key = app.make_key(&gallery, "test", None, None).await;
    let messages = json!([user("a todo app")]);

    // Each key works for its own agency, by model and by path.
    let ok = Reply::of(
        app.post(CHAT, Some(&gallery_key))
            .json(&json!({ "model": "gallery", "messages": messages })),
    )
    .await;
    assert_eq!(ok.ok()["model"], json!("gallery"));
    assert_eq!(ok.content(), answer("a todo app"));
    let gallery_conversation = ok.conversation();
    let conv = app
        .store
        .conversation(gallery_conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.agency_id, gallery.id);

    let studio_conversation = app.say(messages.clone()).await.conversation();

    // And every way of naming the other one is a model that does not exist.
    let cases = [
        (&studio_key, CHAT.to_string(), Some("gallery".to_string())),
        (&studio_key, CHAT.to_string(), Some(gallery.id.to_string())),
        (
            &studio_key,
            "/api/agency/gallery/chat/completions".to_string(),
            Some("studio".to_string()),
        ),
        (
            &studio_key,
            format!("/api/agency/{}/chat/completions", gallery.id),
            None,
        ),
        (&gallery_key, CHAT.to_string(), Some("studio".to_string())),
        (
            &gallery_key,
            format!("/api/agency/{}/chat/completions", app.studio.id),
            Some("gallery".to_string()),
        ),
    ];
    for (key, path, model) in cases {
        let mut body = json!({ "messages": messages });
        if let Some(m) = &model {
            body["model"] = json!(m);
        }
        for stream in [false, true] {
            body["stream"] = json!(stream);
            let r = Reply::of(app.post(&path, Some(key)).json(&body)).await;
            r.error(StatusCode::NOT_FOUND, Some("model_not_found"), None);
        }
    }
    for (key, path) in [
        (&studio_key, "/v1/models/gallery".to_string()),
        (&studio_key, "/api/agency/gallery/models".to_string()),
        (&studio_key, format!("/api/agency/{}/models", gallery.id)),
        (&gallery_key, "/v1/models/studio".to_string()),
    ] {
        let r = app.get(&path, Some(key)).await;
        r.error(StatusCode::NOT_FOUND, Some("model_not_found"), None);
    }

    // Nor can a key continue the other agency's conversation by naming it.
    for (key, model, c) in [
        (&studio_key, "studio", gallery_conversation),
        (&gallery_key, "gallery", studio_conversation),
    ] {
        let r = Reply::of(
            app.post(CHAT, Some(key))
                .header(CONVERSATION, c.to_string())
                .json(&json!({ "model": model, "messages": [user("again")] })),
        )
        .await;
        r.error(StatusCode::NOT_FOUND, Some("conversation_not_found"), None);
    }
    assert_eq!(app.turns(gallery_conversation).await, [1]);
    assert_eq!(app.turns(studio_conversation).await, [1]);
}

// ---------------------------------------------------------------------------------------------
// Continuation

#[tokio::test]
async fn a_resent_history_continues_its_conversation() {
    let app = App::spawn().await;
    let first = app.say(json!([user("a todo app")])).await;
    let a1 = first.content();
    assert_eq!(a1, answer("a todo app"));
    let c = first.conversation();
    assert_eq!(app.turns(c).await, [1]);

    let second = app
        .say(json!([user("a todo app"), assistant(&a1), user("a cli")]))
        .await;
    let a2 = second.content();
    assert_eq!(a2, answer("a cli"));
    assert_eq!(second.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2]);
    // Only the new message reached the manager.
    assert_eq!(app.inputs(c).await, ["a todo app", "a cli"]);

    let third = app
        .say(json!([
            user("a todo app"),
            assistant(&a1),
            user("a cli"),
            assistant(&a2),
            user("a game"),
        ]))
        .await;
    assert_eq!(third.content(), answer("a game"));
    assert_eq!(third.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2, 3]);

    // A history the server did not give: a new conversation whose manager is given it.
    let changed = app
        .say(json!([
            user("a todo app"),
            assistant("something else"),
            user("a cli")
        ]))
        .await;
    assert_eq!(changed.content(), answer("a cli"));
    let c2 = changed.conversation();
    assert_ne!(c2, c);
    assert_eq!(app.turns(c2).await, [1], "the seeded history is no turn");
    assert_eq!(app.inputs(c2).await, ["a todo app", "a cli"]);
    assert_eq!(app.turns(c).await, [1, 2, 3]);

    // The same first message again is not a continuation either.
    let again = app.say(json!([user("a todo app")])).await;
    assert_ne!(again.conversation(), c);
    assert_ne!(again.conversation(), c2);
}

#[tokio::test]
async fn a_streamed_answer_can_be_continued() {
    let app = App::spawn().await;
    let r = app
        .chat(
            CHAT,
            &json!({ "model": "studio", "messages": [user("a todo app")], "stream": true }),
        )
        .await;
    let c = r.conversation();
    let a1: String = r
        .events()
        .iter()
        .filter_map(|e| {
            e["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    let next = app
        .say(json!([user("a todo app"), assistant(&a1), user("a cli")]))
        .await;
    assert_eq!(next.content(), answer("a cli"));
    assert_eq!(next.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2]);
}

#[tokio::test]
async fn another_keys_history_starts_a_new_conversation() {
    let app = App::spawn().await;
    let other = app.make_key(&app.studio, "other", None, None).await;
    let first = app.say(json!([user("a todo app")])).await;
    let c = first.conversation();
    let r = Reply::of(app.post(CHAT, Some(&other)).json(&json!({
        "model": "studio",
        "messages": [user("a todo app"), assistant(&first.content()), user("a cli")],
    })))
    .await;
    assert_eq!(r.content(), answer("a cli"));
    assert_ne!(r.conversation(), c);
    assert_eq!(app.turns(c).await, [1]);
}

#[tokio::test]
async fn the_conversation_header_names_the_conversation() {
    let app = App::spawn().await;
    let first = app.say(json!([user("a todo app")])).await;
    let c = first.conversation();
    app.say(json!([
        user("a todo app"),
        assistant(&first.content()),
        user("a cli")
    ]))
    .await;
    assert_eq!(app.turns(c).await, [1, 2]);

    // Only the new message, and the header: the server's history is used.
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header(CONVERSATION, c.to_string())
            .json(&json!({ "model": "studio", "messages": [user("again")] })),
    )
    .await;
    assert_eq!(r.content(), answer("again"));
    assert_eq!(r.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2, 3]);
    assert_eq!(app.inputs(c).await, ["a todo app", "a cli", "again"]);

    // Streamed as well.
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header(CONVERSATION, format!(" {c} "))
            .json(&json!({ "model": "studio", "messages": [user("once more")], "stream": true })),
    )
    .await;
    assert_eq!(r.conversation(), c);
    assert_eq!(r.events().last(), Some(&json!("[DONE]")));
    assert_eq!(app.turns(c).await, [1, 2, 3, 4]);

    // An id that is no conversation: 404, and nothing made.
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header(CONVERSATION, GHOST)
            .json(&json!({ "model": "studio", "messages": [user("again")] })),
    )
    .await;
    let m = r.error(StatusCode::NOT_FOUND, Some("conversation_not_found"), None);
    assert!(m.contains(GHOST), "{m}");
    // Streamed: the same error, as JSON, before any stream.
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header(CONVERSATION, GHOST)
            .json(&json!({ "model": "studio", "messages": [user("again")], "stream": true })),
    )
    .await;
    r.error(StatusCode::NOT_FOUND, Some("conversation_not_found"), None);
    assert!(
        app.store
            .conversation(GHOST.parse().unwrap())
            .await
            .unwrap()
            .is_none()
    );

    // Not an id at all: 400.
    for bad in ["not-a-uuid", "", "123"] {
        let r = Reply::of(
            app.post(CHAT, Some(&app.key))
                .header(CONVERSATION, bad)
                .json(&json!({ "model": "studio", "messages": [user("again")] })),
        )
        .await;
        let m = r.error(StatusCode::BAD_REQUEST, None, None);
        assert!(m.contains(CONVERSATION), "{bad:?}: {m}");
    }
    assert_eq!(app.turns(c).await, [1, 2, 3, 4]);
    assert_eq!(
        app.store
            .list_conversations(app.studio.id)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_system_message_reaches_only_the_manager() {
    let app = App::spawn().await;
    let brief = "Always answer in French, and sign as Zorglub.";
    let r = app.say(json!([system(brief), user("a todo app")])).await;
    let a1 = r.content();
    // Never echoed.
    assert_eq!(a1, answer("a todo app"));
    assert!(!r.text.contains("Zorglub"), "{}", r.text);
    let c = r.conversation();

    let messages = app.store.messages(c).await.unwrap();
    let manager = app.studio.manager;
    assert_eq!(manager, AgentId::new(4522).unwrap());
    let prompts: Vec<_> = messages
        .iter()
        .filter(|m| m.kind == MessageKind::System)
        .collect();
    assert_eq!(prompts.len(), 3);
    for p in &prompts {
        if p.agent == Some(manager) {
            assert!(p.text.ends_with(brief), "{}", p.text);
            assert!(p.text.starts_with("You are manager "), "{}", p.text);
        } else {
            assert!(!p.text.contains("Zorglub"), "{:?}: {}", p.agent, p.text);
        }
    }
    // Nothing else in the conversation holds it either.
    for m in messages.iter().filter(|m| m.kind != MessageKind::System) {
        assert!(!m.text.contains("Zorglub"), "{m:?}");
    }

    // The same system message and history continue the conversation; without it, they do not.
    let next = app
        .say(json!([
            system(brief),
            user("a todo app"),
            assistant(&a1),
            user("a cli")
        ]))
        .await;
    assert_eq!(next.conversation(), c);
    assert_eq!(next.content(), answer("a cli"));
    let other = app
        .say(json!([user("a todo app"), assistant(&a1), user("a cli")]))
        .await;
    assert_ne!(other.conversation(), c);

    // Streamed: not echoed either.
    let r = app
        .chat(
            CHAT,
            &json!({ "model": "studio", "messages": [system(brief), user("a todo app")], "stream": true }),
        )
        .await;
    assert!(!r.text.contains("Zorglub"), "{}", r.text);
    assert_eq!(r.events().last(), Some(&json!("[DONE]")));
}

// ---------------------------------------------------------------------------------------------
// Keys

#[tokio::test]
async fn a_revoked_key_is_refused() {
    let app = App::spawn().await;
    let key = app.make_key(&app.studio, "doomed", None, None).await;
    let body = json!({ "model": "studio", "messages": [user("a todo app")] });
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
    assert_eq!(r.content(), answer("a todo app"));

    assert!(
        app.store
            .revoke_api_key(app.studio.id, "doomed", chrono::Utc::now())
            .await
            .unwrap()
    );
    // Key records are trusted for up to a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
    let m = r.error(StatusCode::UNAUTHORIZED, Some("invalid_api_key"), None);
    assert!(m.contains("revoked"), "{m}");
    assert!(!m.contains(&key), "the key is not repeated: {m}");
    let r = app.get("/v1/models", Some(&key)).await;
    r.error(StatusCode::UNAUTHORIZED, Some("invalid_api_key"), None);

    // The other key still works.
    let r = app.chat(CHAT, &body).await;
    assert_eq!(r.content(), answer("a todo app"));
}

#[tokio::test]
async fn an_expired_key_is_refused() {
    let app = App::spawn().await;
    let key = app
        .make_key(&app.studio, "brief", Some(Duration::from_secs(1)), None)
        .await;
    let body = json!({ "model": "studio", "messages": [user("a todo app")] });
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
    assert_eq!(r.content(), answer("a todo app"));

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
    let m = r.error(StatusCode::UNAUTHORIZED, Some("expired_api_key"), None);
    assert!(m.contains("expired"), "{m}");
    let r = app.get("/v1/models", Some(&key)).await;
    r.error(StatusCode::UNAUTHORIZED, Some("expired_api_key"), None);
}

#[tokio::test]
async fn a_key_over_its_rate_limit_is_429() {
    let app = App::spawn().await;
    let key = app.make_key(&app.studio, "slow", None, Some(2)).await;
    let body = json!({ "model": "studio", "messages": [user("a todo app")] });
    for _ in 0..2 {
        let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
        assert_eq!(r.content(), answer("a todo app"));
    }
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
    let m = r.error(
        StatusCode::TOO_MANY_REQUESTS,
        Some("rate_limit_exceeded"),
        None,
    );
    let retry: u64 = r
        .header("retry-after")
        .expect("a Retry-After header")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "Retry-After: {retry}");
    assert!(m.contains("2 requests per minute"), "{m}");
    assert!(m.contains(&format!("Try again in {retry}s.")), "{m}");

    let mut shown = r.shown();
    shown["headers"]["retry-after"] = json!("[secs]");
    shown["body"]["error"]["message"] = json!(m.replace(&format!("{retry}s"), "[secs]s"));
    snapshot("error_429_rate_limited", &shown);

    // Every endpoint counts, streamed requests are refused before streaming.
    let r = app.get("/v1/models", Some(&key)).await;
    r.error(
        StatusCode::TOO_MANY_REQUESTS,
        Some("rate_limit_exceeded"),
        None,
    );
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&streamed)).await;
    r.error(
        StatusCode::TOO_MANY_REQUESTS,
        Some("rate_limit_exceeded"),
        None,
    );
    // Another key of the agency has its own limit.
    assert_eq!(app.chat(CHAT, &body).await.content(), answer("a todo app"));
}

// ---------------------------------------------------------------------------------------------
// Usage

#[tokio::test]
async fn usage_adds_up() {
    let app = App::spawn().await;
    let body = app.say(json!([user("a todo app")])).await.ok();
    assert_usage(&body["usage"]);
    // The rules model is free.
    assert_eq!(body["usage"], usage_of(0, 0));
}

// ---------------------------------------------------------------------------------------------
// A manager on a real (fake) provider: token counts, streaming as it writes, failures

/// An agency `solo` whose one agent, the manager, runs on an OpenAI-compatible fake.
async fn solo(app: &App, fake: &Fake) -> (Agency, String) {
    let draft = AgencyDraft {
        name: "solo".into(),
        protocol: "json".into(),
        manager: "only".into(),
        providers: vec![ProviderDraft {
            name: "fake".into(),
            kind: "openai".into(),
            base_url: Some(format!("{}/v1", fake.url)),
            ..Default::default()
        }],
        agents: vec![AgentDraft {
            name: "only".into(),
            model: "fake/m".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let agency = app.rt.agencies().save(&draft, LOCAL_OWNER).await.unwrap();
    let key = app.make_key(&agency, "test", None, None).await;
    (agency, key)
}

#[tokio::test]
async fn usage_sums_the_turns_model_calls() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::completion(
        r#"{"to": 0, "context": "hello there"}"#,
        5,
        3,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [system("Be brief."), user("hi")],
    })))
    .await;
    let body = r.ok();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        json!("hello there")
    );
    assert_eq!(body["model"], json!("solo"));
    assert_usage(&body["usage"]);
    assert_eq!(body["usage"], usage_of(5, 3));
    // The manager's model got the client's system message at the end of its system prompt,
    // and the user's message; it was not asked to stream.
    let calls = fake.requests();
    assert_eq!(calls.len(), 1);
    let messages = calls[0].body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], json!("system"));
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .ends_with("Be brief."),
        "{}",
        messages[0]
    );
    assert!(
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("hi"),
        "{messages:?}"
    );
    assert_eq!(calls[0].body.get("stream"), None);
}

#[tokio::test]
async fn a_stream_follows_the_managers_model_as_it_writes() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::stream(
        &[
            r#"{"to": 0, "con"#,
            r#"text": "one, "#,
            "two, ",
            r#"three"}"#,
        ],
        20,
        6,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("count to three")],
        "stream": true,
        "stream_options": { "include_usage": true },
    })))
    .await;
    let c = r.conversation();
    let events = r.events();
    assert_eq!(events.last(), Some(&json!("[DONE]")));
    let chunks = &events[..events.len() - 1];
    let id = &chunks[0]["id"];
    assert!(chunks.iter().all(|c| &c["id"] == id), "{events:#?}");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], json!("assistant"));
    let pieces: Vec<&str> = chunks[1..]
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(pieces.concat(), "one, two, three");
    assert!(
        pieces.len() >= 3,
        "in pieces as the model wrote them: {pieces:?}"
    );
    let n = chunks.len();
    assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    assert_usage(&chunks[n - 1]["usage"]);
    assert_eq!(chunks[n - 1]["usage"], usage_of(20, 6));
    assert_eq!(fake.requests()[0].body["stream"], json!(true));
    assert_eq!(app.turns(c).await, [1]);
}

#[tokio::test]
async fn a_failing_manager_is_a_502_that_names_only_the_request() {
    // The server runs on this test's thread (a current-thread runtime): its logs are caught.
    let logs = Logs::default();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish(),
    );
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (solo, key) = solo(&app, &fake).await;
    // The provider fails every time (a 500 asking to retry at once, so the retries are quick).
    fake.otherwise(agency_fakes::Reply::Json {
        status: 500,
        body: openai::error_body(openai::SERVER_ERROR_MESSAGE, "server_error", None),
        headers: vec![("retry-after".into(), "0".into())],
    });
    let body = json!({ "model": "solo", "messages": [user("hi")] });
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&body)).await;
    let m = r.error(StatusCode::BAD_GATEWAY, None, None);
    assert!(fake.requests().len() > 1, "retried first");
    let request = r.header("x-request-id").unwrap();
    // Whom the agency runs on and how it failed is its owner's business, found by the
    // request's id; the client is told only that.
    let inside = |m: &str| {
        for secret in ["only", "fake", "500", "agent", "HTTP", "Sorry about that"] {
            assert!(!m.contains(secret), "{secret:?} in {m}");
        }
    };
    inside(&m);
    assert_eq!(
        m,
        format!(
            "The agency could not answer this request ({request}); its owner can find what failed in the server's logs and the conversation browser."
        )
    );
    // The owner finds the detail in the logs, by the request's id...
    let logged = logs.text();
    assert!(
        logged.lines().any(|l| l.contains(request)
            && l.contains("agent_name=only")
            && l.contains("HTTP 500")
            && l.contains(" WARN ")),
        "{logged}"
    );
    // ... and with the failed turn, in the conversation.
    let conversations = app.store.list_conversations(solo.id).await.unwrap();
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    let turns = app.store.turns(conversations[0].id).await.unwrap();
    let error = turns[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("HTTP 500"), "{turns:?}");

    // Streamed: the same error as an event, then the end.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&streamed)).await;
    let request = r.header("x-request-id").unwrap().to_string();
    let events = r.events();
    assert_eq!(events.last(), Some(&json!("[DONE]")), "{events:#?}");
    let error = &events[events.len() - 2];
    assert_eq!(error["error"]["type"], json!("server_error"), "{error}");
    let m = error["error"]["message"].as_str().unwrap();
    inside(m);
    assert!(m.contains(&format!("({request})")), "{m}");
    assert!(
        events
            .iter()
            .all(|e| e["choices"][0]["finish_reason"].is_null()),
        "no finish after a failure: {events:#?}"
    );
}

/// What a test's server logged.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// What the manager's model was sent as the user's message (the last message, framed by the
/// json protocol: `{"from": 0, "context": ...}`) in its `n`th call.
fn last_sent(fake: &Fake, n: usize) -> String {
    let calls = fake.requests();
    let messages = calls[n].body["messages"].as_array().unwrap();
    // Text, or the text part beside images.
    let content = &messages.last().unwrap()["content"];
    let framed = content
        .as_str()
        .or_else(|| content[0]["text"].as_str())
        .unwrap();
    let framed: Value = serde_json::from_str(framed).unwrap();
    assert_eq!(framed["from"], json!(0), "{framed}");
    framed["context"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn images_reach_the_managers_model_as_images_and_its_text_names_them() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::completion(
        r#"{"to": 0, "context": "a cat, twice"}"#,
        5,
        3,
    ));
    // A photo inline (a megabyte of base64), and one by URL.
    let inline = format!("data:image/png;base64,{}", "iVBORw0KGgo".repeat(100_000));
    let long = format!("https://example.com/{}.png", "c".repeat(400));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [{ "role": "user", "content": [
            { "type": "text", "text": "what are these?" },
            { "type": "image_url", "image_url": { "url": "https://example.com/cat.png", "detail": "low" } },
            { "type": "image_url", "image_url": { "url": inline } },
            { "type": "image_url", "image_url": { "url": long } },
        ] }],
    })))
    .await;
    assert_eq!(r.content(), "a cat, twice");
    let sent = last_sent(&fake, 0);
    assert!(
        sent.contains("what are these?\n[image: https://example.com/cat.png]\n[image: inline image]\n[image: https://example.com/ccc"),
        "{sent}"
    );
    assert!(!sent.contains("base64"), "no data URL in the text: {sent}");
    assert!(sent.len() < 1_000, "a URL is cut in the text: {sent}");
    assert!(sent.contains("c…]"), "{sent}");
    // The images themselves go beside the text, whole, as OpenAI's image parts.
    let message = fake.requests()[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let parts = message["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], json!("text"));
    let urls: Vec<&str> = parts[1..]
        .iter()
        .map(|p| p["image_url"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            "https://example.com/cat.png",
            inline.as_str(),
            long.as_str()
        ]
    );
    assert_eq!(
        openai::problems(&fake.requests()[0].body),
        Vec::<String>::new()
    );
    // The conversation keeps the placeholders, and the images with the message.
    let c = r.conversation();
    assert!(
        app.inputs(c).await[0].contains("[image: inline image]"),
        "{:?}",
        app.inputs(c).await
    );
    let stored = app.store.messages(c).await.unwrap();
    let input = stored
        .iter()
        .find(|m| m.kind == MessageKind::Input)
        .unwrap();
    assert_eq!(input.images.len(), 3);

    // A scheme a model's provider should not be asked to fetch is refused.
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [{ "role": "user", "content": [
            { "type": "image_url", "image_url": { "url": "file:///etc/passwd" } },
        ] }],
    })))
    .await;
    r.error(
        StatusCode::BAD_REQUEST,
        None,
        Some("messages[0].content[0]"),
    );
}

#[tokio::test]
async fn a_last_assistant_message_is_the_answers_beginning() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    let haiku = "Sure! An old silent pond.";
    fake.push(openai::completion(
        &format!(r#"{{"to": 0, "context": "{haiku}"}}"#),
        5,
        3,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [system("Be brief."), user("a haiku"), assistant("Sure!")],
    })))
    .await;
    // The manager was asked to begin with it, after the user's message.
    let sent = last_sent(&fake, 0);
    assert!(
        sent.contains("a haiku") && sent.ends_with("(Begin your answer with exactly: Sure!)"),
        "{sent}"
    );
    // The response continues the prefill, as servers that honour one answer.
    let rest = r.content();
    assert_eq!(rest, " An old silent pond.");
    let c = r.conversation();
    assert_eq!(app.inputs(c).await.len(), 1);

    // The client keeps prefill + continuation as the answer: the conversation goes on.
    fake.push(openai::completion(r#"{"to": 0, "context": "Frog."}"#, 5, 3));
    let next = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [
            system("Be brief."),
            user("a haiku"),
            assistant(&format!("Sure!{rest}")),
            user("another"),
        ],
    })))
    .await;
    assert_eq!(next.content(), "Frog.");
    assert_eq!(next.conversation(), c);
    assert!(!last_sent(&fake, 1).contains("Begin your answer"));

    // Streamed: the prefill is held back and taken off as it streams.
    fake.push(openai::stream(
        &[
            r#"{"to": 0, "context": "Su"#,
            "re! A",
            " frog jumps",
            r#" in."}"#,
        ],
        20,
        6,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("a haiku"), assistant("Sure!")],
        "stream": true,
    })))
    .await;
    let text: String = r
        .events()
        .iter()
        .filter_map(|e| {
            e["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, " A frog jumps in.");

    // A manager that did not begin with it: its answer whole.
    fake.push(openai::completion(r#"{"to": 0, "context": "No."}"#, 5, 3));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("a haiku"), assistant("Sure!")],
    })))
    .await;
    assert_eq!(r.content(), "No.");
}

#[tokio::test]
async fn several_user_messages_in_a_row_continue_as_sent() {
    let app = App::spawn().await;
    let first = app.say(json!([user("a todo"), user("app")])).await;
    let c = first.conversation();
    let next = app
        .say(json!([
            user("a todo"),
            user("app"),
            assistant(&first.content()),
            user("a cli")
        ]))
        .await;
    assert_eq!(next.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2]);
}

#[tokio::test]
async fn an_edited_history_forks_its_conversation_where_it_leaves_it() {
    let app = App::spawn().await;
    let first = app.say(json!([user("a todo app")])).await;
    let c = first.conversation();
    let a1 = first.content();
    let second = app
        .say(json!([user("a todo app"), assistant(&a1), user("a cli")]))
        .await;
    assert_eq!(second.conversation(), c);
    // The client drops the second exchange and asks something else instead: a copy of the
    // conversation as it stood after the first, without the thrown-away turn.
    let edited = app
        .say(json!([user("a todo app"), assistant(&a1), user("a quiz")]))
        .await;
    let f = edited.conversation();
    assert_ne!(f, c, "the thrown-away turn must not be in its context");
    assert_eq!(app.turns(f).await, [1, 2]);
    assert_eq!(app.inputs(f).await, ["a todo app", "a quiz"]);
    assert_eq!(app.inputs(c).await, ["a todo app", "a cli"], "untouched");
    // Regenerating that answer forks again; continuing it continues the latest conversation
    // to give it (the rules model gives the same answer every time).
    let regenerated = app
        .say(json!([user("a todo app"), assistant(&a1), user("a quiz")]))
        .await;
    let r = regenerated.conversation();
    assert!(![c, f].contains(&r));
    assert_eq!(regenerated.content(), edited.content());
    let on = app
        .say(json!([
            user("a todo app"),
            assistant(&a1),
            user("a quiz"),
            assistant(&regenerated.content()),
            user("a game")
        ]))
        .await;
    assert_eq!(on.conversation(), r);
    assert_eq!(app.turns(r).await, [1, 2, 3]);
}

/// Two end users (`user` / `safety_identifier`) on one key never share a conversation, even
/// when their chats open the same way.
#[tokio::test]
async fn end_users_never_share_a_conversation() {
    let app = App::spawn().await;
    let say_as = |who: &'static str, messages: Value| {
        Reply::of(
            app.post(CHAT, Some(&app.key))
                .json(&json!({"model": "studio", "messages": messages, "safety_identifier": who})),
        )
    };
    let ann = say_as("ann", json!([user("a todo app")])).await;
    let a1 = ann.content();
    let bob = say_as(
        "bob",
        json!([user("a todo app"), assistant(&a1), user("a cli")]),
    )
    .await;
    assert_ne!(bob.conversation(), ann.conversation());
    assert_eq!(app.turns(bob.conversation()).await, [1]);
    let ann2 = say_as(
        "ann",
        json!([user("a todo app"), assistant(&a1), user("a cli")]),
    )
    .await;
    assert_eq!(ann2.conversation(), ann.conversation());
}

#[tokio::test]
async fn a_conversation_continued_by_its_id_is_found_by_its_full_history_too() {
    let app = App::spawn().await;
    let first = app.say(json!([user("a todo app")])).await;
    let c = first.conversation();
    let second = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header(CONVERSATION, c.to_string())
            .json(&json!({"model": "studio", "messages": [user("a cli")]})),
    )
    .await;
    assert_eq!(second.conversation(), c);
    let third = app
        .say(json!([
            user("a todo app"),
            assistant(&first.content()),
            user("a cli"),
            assistant(&second.content()),
            user("a game")
        ]))
        .await;
    assert_eq!(third.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2, 3]);
}

#[tokio::test]
async fn other_openai_urls_and_modalities() {
    let app = App::spawn().await;
    let r = Reply::of(
        app.post("/v1/completions", Some(&app.key))
            .json(&json!({"prompt": "x"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let body: Value = serde_json::from_str(&r.text).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/completions"),
        "{body}"
    );

    let ok = app
        .chat(
            CHAT,
            &json!({"model": "studio", "modalities": ["text"], "messages": [user("a todo app")]}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    let refused = app
        .chat(
            CHAT,
            &json!({"model": "studio", "modalities": ["text", "audio"], "messages": [user("x")]}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let body: Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(body["error"]["param"], "modalities");
}

// ---------------------------------------------------------------------------------------------
// Browsers (CORS)

const ORIGIN: &str = "https://app.example.com";
/// What the official SDKs' browser builds send beside the body.
const SDK_HEADERS: &str = "authorization,content-type,openai-organization,openai-project,x-agency-conversation,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout";

impl App {
    /// A browser's preflight of `POST path` from `origin`.
    async fn preflight(&self, path: &str, origin: &str) -> Reply {
        Reply::of(
            self.client
                .request(reqwest::Method::OPTIONS, self.url(path))
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header("access-control-request-headers", SDK_HEADERS),
        )
        .await
    }
}

/// The comma-separated names of a header, lowercase.
fn listed(r: &Reply, header: &str) -> Vec<String> {
    r.header(header)
        .unwrap_or_else(|| panic!("no {header}: {:?}", r.headers))
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .collect()
}

#[tokio::test]
async fn allowed_origins_may_call_from_a_browser() {
    let app = App::spawn_with_cors(
        CorsOrigins::parse(&["https://app.example.com, http://localhost:5173"]).unwrap(),
    )
    .await;
    let agency_path = "/api/agency/studio/chat/completions";
    for path in [CHAT, agency_path, "/v1/models"] {
        let r = app.preflight(path, ORIGIN).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{path}: {}", r.text);
        assert_eq!(r.text, "");
        assert_eq!(r.header("access-control-allow-origin"), Some(ORIGIN));
        let methods = listed(&r, "access-control-allow-methods");
        assert!(
            methods.contains(&"POST".to_ascii_lowercase()),
            "{methods:?}"
        );
        assert!(methods.contains(&"get".into()), "{methods:?}");
        let allowed = listed(&r, "access-control-allow-headers");
        for h in SDK_HEADERS.split(',') {
            assert!(allowed.contains(&h.to_string()), "{h} not in {allowed:?}");
        }
        assert!(r.header("access-control-max-age").is_some());
        assert!(r.header("access-control-allow-credentials").is_none());
    }

    // The call itself: the origin allowed, the ids the page reads exposed.
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header("origin", "http://localhost:5173")
            .json(&json!({ "model": "studio", "messages": [user("a todo app")] })),
    )
    .await;
    assert_eq!(r.content(), answer("a todo app"));
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://localhost:5173")
    );
    let exposed = listed(&r, "access-control-expose-headers");
    for h in ["x-request-id", CONVERSATION, "retry-after"] {
        assert!(exposed.contains(&h.to_string()), "{h} not in {exposed:?}");
    }
    // Errors too, so the page can read them.
    let r = Reply::of(
        app.post(CHAT, None)
            .header("origin", ORIGIN)
            .json(&json!({ "model": "studio", "messages": [user("a todo app")] })),
    )
    .await;
    r.error(StatusCode::UNAUTHORIZED, None, None);
    assert_eq!(r.header("access-control-allow-origin"), Some(ORIGIN));

    // Another origin: answered, but not allowed.
    let r = app.preflight(CHAT, "https://evil.example").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(
        r.header("access-control-allow-origin").is_none(),
        "{:?}",
        r.headers
    );
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header("origin", "https://evil.example")
            .json(&json!({ "model": "studio", "messages": [user("a todo app")] })),
    )
    .await;
    assert!(r.header("access-control-allow-origin").is_none());

    // The management API is not opened to other origins.
    let r = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/api/agencies"))
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());

    // `*`: any origin.
    let any = App::spawn_with_cors(CorsOrigins::parse(&["*"]).unwrap()).await;
    let r = any.preflight(CHAT, "https://anywhere.example").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    let r = Reply::of(
        any.post(CHAT, Some(&any.key))
            .header("origin", "https://anywhere.example")
            .json(&json!({ "model": "studio", "messages": [user("a todo app")] })),
    )
    .await;
    assert_eq!(r.content(), answer("a todo app"));
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
}

#[tokio::test]
async fn without_allowed_origins_a_browser_is_refused_cleanly() {
    let app = App::spawn().await;
    for path in [CHAT, "/api/agency/studio/chat/completions", "/v1/models"] {
        // A preflight is answered (not 405), without any CORS header: the browser refuses.
        let r = app.preflight(path, ORIGIN).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{path}: {}", r.text);
        let cors: Vec<_> = r
            .headers
            .keys()
            .filter(|k| k.as_str().starts_with("access-control-"))
            .collect();
        assert!(cors.is_empty(), "{path}: {cors:?}");
    }
    let r = Reply::of(
        app.post(CHAT, Some(&app.key))
            .header("origin", ORIGIN)
            .json(&json!({ "model": "studio", "messages": [user("a todo app")] })),
    )
    .await;
    assert_eq!(r.content(), answer("a todo app"));
    assert!(r.header("access-control-allow-origin").is_none());
}

// ---------------------------------------------------------------------------------------------
// The client's tools: the manager calls them, the turn pauses, the client's results resume it

fn weather_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"]
            }
        }
    })
}

/// The client's echo of the paused answer: the assistant message with its calls, as the SDKs
/// send it back.
fn calling(calls: &Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

fn tool_result(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

#[tokio::test]
async fn the_managers_call_of_a_client_tool_pauses_the_turn_and_the_results_resume_it() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::tool_calls(
        None,
        &[agency_fakes::Call::new(
            "call_w1",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )],
        10,
        4,
    ));
    let ask = |messages: Value| {
        app.post(CHAT, Some(&key)).json(&json!({
            "model": "solo",
            "messages": messages,
            "tools": [weather_tool()],
        }))
    };
    let r = Reply::of(ask(json!([user("Weather in Oslo?")]))).await;
    let c = r.conversation();
    let body = r.ok();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], json!("tool_calls"), "{body}");
    assert_eq!(choice["message"]["content"], Value::Null);
    let calls = choice["message"]["tool_calls"].clone();
    assert_eq!(
        calls,
        json!([{"id": "call_w1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}])
    );
    // The manager's model was offered the client's tool under its own name.
    let first = &fake.requests()[0];
    assert_eq!(first.tool_names(), ["get_weather"]);
    assert_eq!(
        first.tools()[0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    let paused = app.store.turns(c).await.unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(
        paused[0].stopped_by,
        Some(agency_core::StopReason::ToolCalls)
    );

    // The client runs it and sends the result: the same turn goes on to the answer.
    fake.push(openai::completion(
        r#"{"to": 0, "context": "Sunny in Oslo."}"#,
        12,
        5,
    ));
    let r = Reply::of(ask(json!([
        user("Weather in Oslo?"),
        calling(&calls),
        tool_result("call_w1", "sunny, 21 C"),
    ])))
    .await;
    assert_eq!(r.conversation(), c);
    let body = r.ok();
    assert_eq!(body["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(
        body["choices"][0]["message"]["content"],
        json!("Sunny in Oslo.")
    );
    let second = &fake.requests()[1];
    assert_eq!(openai::problems(&second.body), Vec::<String>::new());
    assert_eq!(
        second.tool_results(),
        [json!({"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21 C"})]
    );
    let turns = app.store.turns(c).await.unwrap();
    assert_eq!(turns.len(), 1, "one turn, resumed");
    assert_eq!(turns[0].stopped_by, Some(agency_core::StopReason::Answered));
    assert_eq!(turns[0].hops, 3, "the call, its result and the answer");

    // The next message continues the conversation.
    fake.push(openai::completion(
        r#"{"to": 0, "context": "You're welcome."}"#,
        1,
        1,
    ));
    let r = Reply::of(ask(json!([
        user("Weather in Oslo?"),
        calling(&calls),
        tool_result("call_w1", "sunny, 21 C"),
        assistant("Sunny in Oslo."),
        user("Thanks!"),
    ])))
    .await;
    assert_eq!(r.conversation(), c);
    assert_eq!(r.content(), "You're welcome.");
    assert_eq!(app.turns(c).await, [1, 2]);
}

#[tokio::test]
async fn a_paused_turn_survives_a_restart() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::tool_calls(
        Some(""),
        &[
            agency_fakes::Call::new("call_a", "get_weather", r#"{"city":"Oslo"}"#),
            agency_fakes::Call::new("call_b", "get_weather", r#"{"city":"Rome"}"#),
        ],
        3,
        3,
    ));
    let body = |messages: Value| {
        json!({"model": "solo", "messages": messages, "tools": [weather_tool()],
               "parallel_tool_calls": true})
    };
    let r = Reply::of(
        app.post(CHAT, Some(&key))
            .json(&body(json!([user("Oslo or Rome?")]))),
    )
    .await;
    let c = r.conversation();
    let calls = r.ok()["choices"][0]["message"]["tool_calls"].clone();
    assert_eq!(calls.as_array().unwrap().len(), 2);
    assert_eq!(fake.requests()[0].body["parallel_tool_calls"], json!(true));

    // Another server on the same database (this one's memory gone) takes the results.
    let again = agency_testing::serve(
        app._dir.path(),
        Providers::builtin(),
        Vec::new(),
        agency_server::Connections::default(),
    )
    .await
    .unwrap();
    fake.push(openai::completion(
        r#"{"to": 0, "context": "Oslo: sunny. Rome: rain."}"#,
        1,
        1,
    ));
    let r = Reply::of(
        app.client
            .post(format!("{}{CHAT}", again.base))
            .bearer_auth(&key)
            .json(&body(json!([
                user("Oslo or Rome?"),
                calling(&calls),
                // In another order than called: each answers its own.
                tool_result("call_b", "rain"),
                tool_result("call_a", "sunny"),
            ]))),
    )
    .await;
    assert_eq!(r.conversation(), c);
    assert_eq!(r.content(), "Oslo: sunny. Rome: rain.");
    let sent = &fake.requests()[1];
    assert_eq!(openai::problems(&sent.body), Vec::<String>::new());
    let turns = again.store.turns(c).await.unwrap();
    assert_eq!(turns.len(), 1, "the paused turn resumed");
    assert_eq!(turns[0].hops, 4);
}

#[tokio::test]
async fn a_streamed_pause_sends_the_calls_as_openai_streams_them() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::tool_call_stream(
        &[],
        &[agency_fakes::Call::streamed(
            "call_s",
            "get_weather",
            &[r#"{"city":"#, r#""Oslo"}"#],
        )],
        5,
        5,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("Weather?")],
        "tools": [weather_tool()],
        "tool_choice": "required",
        "stream": true,
        "stream_options": {"include_usage": true},
    })))
    .await;
    assert_eq!(fake.requests()[0].body["tool_choice"], json!("required"));
    let events = r.events();
    assert_eq!(events.last(), Some(&json!("[DONE]")));
    let chunks = &events[..events.len() - 1];
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(
        deltas,
        [&json!({"index": 0, "id": "call_s", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}})]
    );
    let finishes: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finishes, [&json!("tool_calls")]);
    assert_usage(&chunks[chunks.len() - 1]["usage"]);
}

#[tokio::test]
async fn only_the_manager_sees_the_clients_tools_and_a_named_choice_binds_its_first_call() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let draft = AgencyDraft {
        name: "pair".into(),
        protocol: "json".into(),
        manager: "boss".into(),
        providers: vec![ProviderDraft {
            name: "fake".into(),
            kind: "openai".into(),
            base_url: Some(format!("{}/v1", fake.url)),
            ..Default::default()
        }],
        agents: vec![
            AgentDraft {
                id: Some(10),
                name: "boss".into(),
                model: "fake/m".into(),
                ..Default::default()
            },
            AgentDraft {
                id: Some(20),
                name: "helper".into(),
                model: "fake/m".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let agency = app.rt.agencies().save(&draft, LOCAL_OWNER).await.unwrap();
    let key = app.make_key(&agency, "test", None, None).await;
    fake.push(openai::completion(
        r#"{"to": 20, "context": "look it up"}"#,
        1,
        1,
    ));
    fake.push(openai::completion(
        r#"{"to": 10, "context": "ask the client"}"#,
        1,
        1,
    ));
    fake.push(openai::tool_calls(
        None,
        &[agency_fakes::Call::new("call_n", "get_weather", "{}")],
        1,
        1,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "pair",
        "messages": [user("Weather?")],
        "tools": [weather_tool()],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    })))
    .await;
    assert_eq!(r.ok()["choices"][0]["finish_reason"], json!("tool_calls"));
    let sent = fake.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].tool_names(), ["get_weather"]);
    assert_eq!(
        sent[0].body["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(
        sent[1].tool_names(),
        Vec::<String>::new(),
        "the helper has none"
    );
    assert_eq!(sent[2].tool_names(), ["get_weather"]);
    assert_eq!(
        sent[2].body.get("tool_choice"),
        None,
        "only the first call is bound"
    );
}

#[tokio::test]
async fn tool_messages_are_checked_as_openai_checks_them() {
    let app = App::spawn().await;
    let weather = [weather_tool()];
    let calls = json!([{"id": "call_x", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"}}]);
    let cases = [
        (
            json!({"messages": [user("hi"), tool_result("call_x", "stray")], "tools": weather}),
            Some("messages[1].tool_call_id"),
        ),
        (
            json!({"messages": [user("hi"), calling(&calls), user("and?")], "tools": weather}),
            Some("messages"),
        ),
        (
            json!({"messages": [user("hi")], "tool_choice": "required"}),
            Some("tool_choice"),
        ),
        (
            json!({"messages": [user("hi")], "tools": [{"type": "web_search_preview"}]}),
            Some("tools[0].type"),
        ),
        (
            json!({"messages": [user("hi")], "functions": [{"name": "f"}]}),
            Some("functions"),
        ),
    ];
    for (mut body, param) in cases {
        body["model"] = json!("studio");
        let r = app.chat(CHAT, &body).await;
        let message = r.error(StatusCode::BAD_REQUEST, None, param);
        assert!(!message.is_empty());
    }
    // A history whose calls nobody stored: the manager's context is seeded with them and the
    // turn goes on from their results (the studio's rules model answers).
    let r = app
        .chat(
            CHAT,
            &json!({"model": "studio", "messages": [
                user(TODO_APP), calling(&calls), tool_result("call_x", "cloudy"),
                assistant("It is cloudy."), user(TODO_APP),
            ], "tools": weather}),
        )
        .await;
    assert_eq!(r.content(), answer(TODO_APP));
    let c = r.conversation();
    let messages = app.store.messages(c).await.unwrap();
    let seeded: Vec<(MessageKind, &str)> = messages
        .iter()
        .filter(|m| m.turn_id.is_none() && m.kind != MessageKind::System)
        .map(|m| (m.kind, m.text.as_str()))
        .collect();
    assert_eq!(
        seeded,
        [
            (MessageKind::Input, TODO_APP),
            (MessageKind::Reply, ""),
            (MessageKind::ToolResult, "cloudy"),
            (MessageKind::Reply, r#"{"to":0,"context":"It is cloudy."}"#),
            (MessageKind::Answer, "It is cloudy."),
        ]
    );
}

const TODO_APP: &str = "a todo app";

// ---------------------------------------------------------------------------------------------
// Structured outputs: the answer is JSON of the client's schema

fn weather_format() -> Value {
    json!({"type": "json_schema", "json_schema": {"name": "weather", "strict": true, "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}},
        "required": ["city", "temperature_c"],
        "additionalProperties": false
    }}})
}

#[tokio::test]
async fn a_json_schema_answer_is_checked_and_the_manager_corrected() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::completion(
        r#"{"to": 0, "context": "It is 21 degrees in Oslo."}"#,
        1,
        1,
    ));
    fake.push(openai::completion(
        r#"{"to": 0, "context": {"city": "Oslo"}}"#,
        1,
        1,
    ));
    fake.push(openai::completion(
        r#"{"to": 0, "context": {"city": "Oslo", "temperature_c": 21}}"#,
        1,
        1,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("Weather in Oslo?")],
        "response_format": weather_format(),
    })))
    .await;
    let answer = r.content();
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap(),
        json!({"city": "Oslo", "temperature_c": 21})
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 3, "two corrections");
    let last_of = |i: usize| {
        sent[i].body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        last_of(0).contains("JSON Schema (`weather`)") && last_of(0).contains("temperature_c"),
        "the schema: {}",
        last_of(0)
    );
    assert!(last_of(1).contains("it is not JSON"), "{}", last_of(1));
    assert!(
        last_of(2).contains("at /") || last_of(2).contains("temperature_c"),
        "{}",
        last_of(2)
    );

    // Three answers out of format: the request fails, naming no agent.
    for _ in 0..3 {
        fake.push(openai::completion(r#"{"to": 0, "context": "words"}"#, 1, 1));
    }
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("Weather again?")],
        "response_format": weather_format(),
    })))
    .await;
    let message = r.error(StatusCode::BAD_GATEWAY, None, None);
    assert!(!message.contains("only"), "{message}");

    // json_object asks for the word, as OpenAI does; then takes any object.
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("Weather?")],
        "response_format": {"type": "json_object"},
    })))
    .await;
    r.error(StatusCode::BAD_REQUEST, None, Some("messages"));
    fake.push(openai::completion(
        r#"{"to": 0, "context": "```json\n{\"ok\": true}\n```"}"#,
        1,
        1,
    ));
    let r = Reply::of(app.post(CHAT, Some(&key)).json(&json!({
        "model": "solo",
        "messages": [user("Weather as JSON?")],
        "response_format": {"type": "json_object"},
    })))
    .await;
    assert_eq!(r.content(), r#"{"ok": true}"#, "the fence is taken off");
}

// ---------------------------------------------------------------------------------------------
// The Responses API

#[tokio::test]
async fn responses_are_kept_per_agency_and_listed_as_sent() {
    let app = App::spawn().await;
    let r = app
        .chat(
            "/v1/responses",
            &json!({"model": "studio", "input": [
                {"role": "user", "content": [{"type": "input_text", "text": TODO_APP}]},
            ], "metadata": {"app": "test"}}),
        )
        .await;
    let body = r.ok();
    let id = body["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("resp_"), "{id}");
    assert_eq!(body["object"], json!("response"));
    assert_eq!(body["status"], json!("completed"));
    assert_eq!(body["metadata"], json!({"app": "test"}));
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        json!(answer(TODO_APP))
    );
    let c = r.conversation();

    // What was sent and kept.
    let got = app
        .get(&format!("/v1/responses/{id}"), Some(&app.key))
        .await;
    assert_eq!(got.ok(), body);
    let items = app
        .get(
            &format!("/v1/responses/{id}/input_items?order=asc"),
            Some(&app.key),
        )
        .await
        .ok();
    assert_eq!(items["object"], json!("list"));
    assert_eq!(items["data"][0]["type"], json!("message"));
    assert_eq!(items["data"][0]["content"][0]["text"], json!(TODO_APP));
    assert_eq!(items["first_id"], items["data"][0]["id"]);

    // Another agency's key sees nothing of it; the agency path names the agency.
    let other = app.import_copy("other").await;
    let other_key = app.make_key(&other, "k", None, None).await;
    app.get(&format!("/v1/responses/{id}"), Some(&other_key))
        .await
        .error(StatusCode::NOT_FOUND, None, None);
    app.get(
        &format!("/api/agency/studio/responses/{id}"),
        Some(&app.key),
    )
    .await
    .ok();
    let r = Reply::of(app.post("/v1/responses", Some(&other_key)).json(&json!({
        "model": "other", "input": "more", "previous_response_id": id,
    })))
    .await;
    r.error(StatusCode::NOT_FOUND, None, Some("previous_response_id"));

    // Continued by id: the same conversation, its next turn.
    let r = app
        .chat(
            "/v1/responses",
            &json!({"model": "studio", "input": "a chat app", "previous_response_id": id}),
        )
        .await;
    assert_eq!(r.conversation(), c);
    assert_eq!(app.turns(c).await, [1, 2]);

    // Deleted: gone, and the conversation stays.
    let deleted = Reply::of(
        app.client
            .delete(app.url(&format!("/v1/responses/{id}")))
            .bearer_auth(&app.key),
    )
    .await;
    assert_eq!(
        deleted.ok(),
        json!({"id": id, "object": "response", "deleted": true})
    );
    app.get(&format!("/v1/responses/{id}"), Some(&app.key))
        .await
        .error(StatusCode::NOT_FOUND, None, None);
    assert_eq!(app.turns(c).await, [1, 2]);
}

#[tokio::test]
async fn a_streamed_response_pauses_on_a_function_call_and_previous_response_id_resumes_it() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::tool_call_stream(
        &[],
        &[agency_fakes::Call::new(
            "call_r",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )],
        2,
        2,
    ));
    let tool = json!({"type": "function", "name": "get_weather",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}});
    let r = Reply::of(app.post("/v1/responses", Some(&key)).json(&json!({
        "model": "solo", "input": "Weather?", "tools": [tool], "stream": true,
    })))
    .await;
    let c = r.conversation();
    let events = r.events();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let numbers: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..7).collect::<Vec<_>>());
    let done = &events[6]["response"];
    assert_eq!(done["output"][0]["call_id"], json!("call_r"));
    assert_eq!(done["output"][0]["arguments"], json!(r#"{"city":"Oslo"}"#));
    let id = done["id"].as_str().unwrap();

    fake.push(openai::completion(
        r#"{"to": 0, "context": "Sunny."}"#,
        1,
        1,
    ));
    let r = Reply::of(app.post("/v1/responses", Some(&key)).json(&json!({
        "model": "solo", "previous_response_id": id, "tools": [tool],
        "input": [{"type": "function_call_output", "call_id": "call_r", "output": "sunny"}],
    })))
    .await;
    assert_eq!(r.conversation(), c);
    let body = r.ok();
    assert_eq!(body["output"][0]["content"][0]["text"], json!("Sunny."));
    assert_eq!(body["previous_response_id"], json!(id));
    assert_eq!(
        openai::problems(&fake.requests()[1].body),
        Vec::<String>::new()
    );
    let turns = app.store.turns(c).await.unwrap();
    assert_eq!(turns.len(), 1, "the paused turn resumed");
}

#[tokio::test]
async fn what_an_agency_cannot_do_in_a_response_is_refused_by_name() {
    let app = App::spawn().await;
    for (body, param) in [
        (json!({"input": "x", "background": true}), "background"),
        (
            json!({"input": "x", "tools": [{"type": "file_search"}]}),
            "tools[0].type",
        ),
        (
            json!({"input": [{"type": "web_search_call", "id": "ws_1"}]}),
            "input[0].type",
        ),
        (
            json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "bad name"}}}),
            "text.format.name",
        ),
        (json!({"input": "x", "frobnicate": 1}), "frobnicate"),
        (json!({}), "input"),
    ] {
        let mut body = body;
        body["model"] = json!("studio");
        app.chat("/v1/responses", &body)
            .await
            .error(StatusCode::BAD_REQUEST, None, Some(param));
    }
    // A browser's preflight is answered, as for every OpenAI route.
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/responses"))
        .header("origin", "https://elsewhere.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn results_after_the_pause_expired_start_a_new_turn() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    app.rt.set_client_tools_wait(Duration::ZERO);
    fake.push(openai::tool_calls(
        None,
        &[agency_fakes::Call::new("call_e", "get_weather", "{}")],
        1,
        1,
    ));
    let ask = |messages: Value| {
        app.post(CHAT, Some(&key))
            .json(&json!({"model": "solo", "messages": messages, "tools": [weather_tool()]}))
    };
    let r = Reply::of(ask(json!([user("Weather?")]))).await;
    let c = r.conversation();
    let calls = r.ok()["choices"][0]["message"]["tool_calls"].clone();
    fake.push(openai::completion(
        r#"{"to": 0, "context": "Late, but sunny."}"#,
        1,
        1,
    ));
    let r = Reply::of(ask(json!([
        user("Weather?"),
        calling(&calls),
        tool_result("call_e", "sunny"),
    ])))
    .await;
    assert_eq!(r.conversation(), c);
    assert_eq!(r.content(), "Late, but sunny.");
    // The manager still read the result right after its call.
    assert_eq!(
        openai::problems(&fake.requests()[1].body),
        Vec::<String>::new()
    );
    let turns = app.store.turns(c).await.unwrap();
    let ends: Vec<_> = turns.iter().map(|t| (t.number, t.stopped_by)).collect();
    assert_eq!(
        ends,
        [
            (1, Some(agency_core::StopReason::ToolCalls)),
            (2, Some(agency_core::StopReason::Answered))
        ],
        "the paused turn stays as it ended; the results began another"
    );
}

// ---- Approvals in the Responses API (issue 36) ----

/// A clerk whose every `builtin/echo` call waits for a person's approval.
const CLERK: &str = r#"name: clerk
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [builtin/echo]
    approve: [builtin/echo]
    rules:
      - { when: user, call: builtin/echo, with: { text: "{{message}}" }, do: "Echoed: {{result}}", send_to: user }
"#;

/// The clerk, and a key for it.
async fn clerk(app: &App) -> String {
    let file = AgencyFile::parse("clerk.yaml", CLERK).unwrap();
    let agency = app
        .rt
        .agencies()
        .save(&file.draft, LOCAL_OWNER)
        .await
        .unwrap();
    app.make_key(&agency, "clerk", None, None).await
}

/// A response to `input`, whose output is one `mcp_approval_request` item: the response and
/// that item.
async fn asking(app: &App, key: &str, input: &str, stream: bool) -> (String, Value) {
    let r = Reply::of(app.post("/v1/responses", Some(key)).json(&json!({
        "model": "clerk", "input": input, "stream": stream,
    })))
    .await;
    let body = if stream {
        let events = r.events();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.output_item.done",
                "response.completed"
            ]
        );
        events[4]["response"].clone()
    } else {
        r.ok()
    };
    assert_eq!(body["status"], json!("completed"));
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{body}");
    let item = output[0].clone();
    assert_eq!(item["type"], json!("mcp_approval_request"));
    assert_eq!(item["server_label"], json!("builtin"));
    assert_eq!(item["name"], json!("echo"));
    let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"text": input}));
    assert!(item["id"].as_str().unwrap().starts_with("mcpr_"), "{item}");
    (body["id"].as_str().unwrap().to_string(), item)
}

/// Answers `item` of response `previous`: the answer's text.
async fn answering(app: &App, key: &str, previous: &str, item: &Value, approve: bool) -> String {
    let r = Reply::of(app.post("/v1/responses", Some(key)).json(&json!({
        "model": "clerk", "previous_response_id": previous,
        "input": [{"type": "mcp_approval_response", "approval_request_id": item["id"],
                   "approve": approve, "reason": if approve { Value::Null } else { json!("no") }}],
    })))
    .await;
    let body = r.ok();
    assert_eq!(body["output"][0]["type"], json!("message"), "{body}");
    body["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

fn approval_id(item: &Value) -> agency_core::ApprovalId {
    let hex = item["id"].as_str().unwrap().strip_prefix("mcpr_").unwrap();
    agency_core::ApprovalId(uuid::Uuid::try_parse(hex).unwrap())
}

#[tokio::test]
async fn a_response_asks_for_approval_and_its_answer_resumes_the_turn() {
    let app = App::spawn().await;
    let key = clerk(&app).await;
    for stream in [false, true] {
        let (id, item) = asking(&app, &key, "ship it", stream).await;
        let paused = app
            .store
            .approval(approval_id(&item))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(paused.state, agency_core::ApprovalState::Pending);
        let turns = app.store.turns(paused.conversation).await.unwrap();
        assert_eq!(turns[0].stopped_by, Some(agency_core::StopReason::Approval));
        let answer = answering(&app, &key, &id, &item, true).await;
        assert_eq!(answer, "Echoed: ship it");
        let ran = app.store.approval(paused.id).await.unwrap().unwrap();
        assert_eq!(ran.state, agency_core::ApprovalState::Approved);
        assert_eq!(ran.answered_by.as_deref(), Some("API key clerk"));
        assert_eq!(ran.result, Some(("ship it".to_string(), false)));
        let turns = app.store.turns(paused.conversation).await.unwrap();
        assert_eq!(turns.len(), 1, "the paused turn resumed");
        assert_eq!(turns[0].stopped_by, Some(agency_core::StopReason::Answered));
    }
}

#[tokio::test]
async fn a_denied_request_is_never_run_and_a_started_call_is_never_run_again() {
    let app = App::spawn().await;
    let key = clerk(&app).await;
    let (id, item) = asking(&app, &key, "pay", false).await;
    let answer = answering(&app, &key, &id, &item, false).await;
    assert_eq!(
        answer,
        "Echoed: Not run: a person denied it. Their reason: no"
    );
    let denied = app
        .store
        .approval(approval_id(&item))
        .await
        .unwrap()
        .unwrap();
    assert!(denied.started_at.is_none() && denied.result.is_none());

    // Approved and started, and the server stopped before its result was kept: the call is
    // not made again, and the agent is told.
    let (id, item) = asking(&app, &key, "pay again", false).await;
    let approval = approval_id(&item);
    let yes = agency_core::approval::Answer {
        approve: true,
        reason: None,
        arguments: None,
        by: "ada@example.com".into(),
    };
    assert!(
        app.store
            .answer_approval(approval, &yes, chrono::Utc::now())
            .await
            .unwrap()
    );
    assert!(
        app.store
            .start_approved(approval, chrono::Utc::now())
            .await
            .unwrap()
    );
    let answer = answering(&app, &key, &id, &item, true).await;
    assert_eq!(
        answer,
        format!("Echoed: {}", agency_core::approval::OUTCOME_UNKNOWN)
    );
    let kept = app.store.approval(approval).await.unwrap().unwrap();
    assert!(kept.result.is_none(), "never run, so no result");
    assert_eq!(
        kept.answered_by.as_deref(),
        Some("ada@example.com"),
        "the first answer stands"
    );
}

#[tokio::test]
async fn approval_responses_are_checked() {
    let app = App::spawn().await;
    let key = clerk(&app).await;
    let (id, item) = asking(&app, &key, "x", false).await;
    let send = |body: Value| {
        let rb = app.post("/v1/responses", Some(&key)).json(&body);
        async move { Reply::of(rb).await }
    };
    let without_previous = send(json!({"model": "clerk", "input": [
        {"type": "mcp_approval_response", "approval_request_id": item["id"], "approve": true}]}))
    .await;
    assert_eq!(
        without_previous.status,
        StatusCode::BAD_REQUEST,
        "{}",
        without_previous.text
    );
    let unknown = send(json!({"model": "clerk", "previous_response_id": id, "input": [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_0190f4a3b1c27d8e9f00112233445566", "approve": true}]}))
    .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.text);
    let mixed = send(
        json!({"model": "clerk", "previous_response_id": id, "input": [
        {"type": "mcp_approval_response", "approval_request_id": item["id"], "approve": true},
        {"role": "user", "content": "and another thing"}]}),
    )
    .await;
    assert_eq!(mixed.status, StatusCode::BAD_REQUEST, "{}", mixed.text);
    let no_approve = send(
        json!({"model": "clerk", "previous_response_id": id, "input": [
        {"type": "mcp_approval_response", "approval_request_id": item["id"]}]}),
    )
    .await;
    assert_eq!(
        no_approve.status,
        StatusCode::BAD_REQUEST,
        "{}",
        no_approve.text
    );
    // Still pending after all that, and answerable.
    assert_eq!(answering(&app, &key, &id, &item, true).await, "Echoed: x");
}

#[tokio::test]
async fn a_new_message_instead_of_the_answer_withdraws_the_calls_that_waited() {
    let app = App::spawn().await;
    let key = clerk(&app).await;
    let (id, item) = asking(&app, &key, "pay", false).await;
    // The client goes on without answering: the paused turn will not go on, so its call is
    // denied and nobody is asked about it any more; the new message gets its own turn.
    let r = Reply::of(app.post("/v1/responses", Some(&key)).json(&json!({
        "model": "clerk", "previous_response_id": id, "input": "never mind",
    })))
    .await;
    let body = r.ok();
    let old = app
        .store
        .approval(approval_id(&item))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.state, agency_core::ApprovalState::Denied);
    assert_eq!(old.answered_by.as_deref(), Some("turn ended"));
    assert!(old.started_at.is_none() && old.result.is_none());
    let pending = app.store.pending_approvals(LOCAL_OWNER).await.unwrap();
    assert!(pending.iter().all(|a| a.id != old.id), "{pending:?}");
    // The new turn asks about its own call.
    let asked = &body["output"][0];
    assert_eq!(asked["type"], json!("mcp_approval_request"), "{body}");
    assert_ne!(asked["id"], item["id"]);
    let args: Value = serde_json::from_str(asked["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"text": "never mind"}));
    assert_eq!(app.store.turns(old.conversation).await.unwrap().len(), 2);
}

/// A desk whose manager hands the user's message to a clerk, whose echo needs approval.
const DESK: &str = r#"name: desk
manager: boss
agents:
  - name: boss
    model: builtin/rules
    rules:
      - { when: user, do: "{{message}}", send_to: clerk }
      - { when: clerk, do: "Clerk says: {{message}}", send_to: user }
  - name: clerk
    model: builtin/rules
    tools: [builtin/echo]
    approve: [builtin/echo]
    rules:
      - { when: boss, call: builtin/echo, with: { text: "{{message}}" }, do: "Echoed: {{result}}", send_to: boss }
"#;

#[tokio::test]
async fn a_turn_paused_on_another_agents_call_resumes_with_that_agent() {
    let app = App::spawn().await;
    let file = AgencyFile::parse("desk.yaml", DESK).unwrap();
    let agency = app
        .rt
        .agencies()
        .save(&file.draft, LOCAL_OWNER)
        .await
        .unwrap();
    let key = app.make_key(&agency, "desk", None, None).await;
    let r = Reply::of(app.post("/v1/responses", Some(&key)).json(&json!({
        "model": "desk", "input": "file the report",
    })))
    .await;
    let body = r.ok();
    let item = &body["output"][0];
    assert_eq!(item["type"], json!("mcp_approval_request"), "{body}");
    let waiting = app
        .store
        .approval(approval_id(item))
        .await
        .unwrap()
        .unwrap();
    let clerk = agency.agents.iter().find(|a| a.name == "clerk").unwrap();
    assert_eq!(waiting.agent, clerk.id);
    let id = body["id"].as_str().unwrap();
    let r = Reply::of(app.post("/v1/responses", Some(&key)).json(&json!({
        "model": "desk", "previous_response_id": id,
        "input": [{"type": "mcp_approval_response", "approval_request_id": item["id"], "approve": true}],
    })))
    .await;
    let body = r.ok();
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        json!("Clerk says: Echoed: file the report"),
        "{body}"
    );
    let turns = app.store.turns(waiting.conversation).await.unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].stopped_by, Some(agency_core::StopReason::Answered));
}

#[tokio::test]
async fn a_wrong_method_and_compacting_are_answered_in_openais_shape() {
    let app = App::spawn().await;
    let key = app.key.clone();
    // A method the URL does not take: 405, as OpenAI says it (the SDKs read `error.message`).
    for path in [
        "/v1/chat/completions",
        "/api/agency/studio/chat/completions",
    ] {
        let wrong = app.get(path, Some(&key)).await;
        assert_eq!(
            wrong.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{}",
            wrong.text
        );
        assert_eq!(
            wrong.json()["error"],
            json!({"message": format!("Invalid method for URL (GET {path})"), "type": "invalid_request_error", "param": null, "code": null})
        );
    }
    // The management API keeps its own shape.
    let res = reqwest::Client::new()
        .get(app.url("/api/approvals/x/approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("does not take that method")
    );
    // Compacting is not offered: said in OpenAI's shape, with what to do instead.
    for path in [
        "/v1/responses/compact",
        "/api/agency/studio/responses/compact",
    ] {
        let compact = Reply::of(
            app.post(path, Some(&key))
                .json(&json!({"model": "studio", "input": "hi"})),
        )
        .await;
        assert_eq!(compact.status, StatusCode::BAD_REQUEST, "{}", compact.text);
        let error = &compact.json()["error"];
        assert_eq!(error["type"], json!("invalid_request_error"));
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("previous_response_id"),
            "{error}"
        );
    }
}
