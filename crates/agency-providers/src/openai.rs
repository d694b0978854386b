//! OpenAI Chat Completions and every server that speaks it.
//!
//! One [`OpenAi`] provider serves any model name the server knows: `openai/gpt-4o` against
//! api.openai.com, `local/qwen2.5` against Ollama, vLLM, llama.cpp, LiteLLM or OpenRouter. The
//! key, when there is one, is sent as a bearer token and never shown anywhere else.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use agency_core::tool::{Tool, ToolCall, ToolPart};
use agency_core::{Role, Usage};
use async_trait::async_trait;
use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use crate::http::{Answer, Endpoint, HttpSettings, Origin, ProviderError};
use crate::tools::{ToolNames, paired};
use crate::{ChatMessage, ChatRequest, Completion, Deltas, Model, ModelError, Provider};
use agency_core::tool::ToolChoice;

/// OpenAI's own endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The name of the schema sent with structured output.
const SCHEMA_NAME: &str = "agency_reply";

/// How to reach one OpenAI-compatible server.
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    /// Up to and including the version, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1`; `/chat/completions` is added to it.
    pub base_url: String,
    /// Unset for local servers that take no key.
    pub api_key: Option<SecretString>,
    /// Ask for replies that follow the JSON protocol's schema (`response_format`), when the
    /// agency speaks that protocol. Not every compatible server supports it.
    pub structured_output: bool,
    pub http: HttpSettings,
    /// Who named the endpoint, which decides what it may reach.
    pub origin: Origin,
}

impl OpenAiConfig {
    /// `base_url` defaults to [`OPENAI_BASE_URL`]; structured output is on only for
    /// api.openai.com.
    pub fn new(base_url: Option<&str>, api_key: Option<SecretString>) -> Self {
        let base_url = base_url
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .unwrap_or(OPENAI_BASE_URL)
            .trim_end_matches('/')
            .to_string();
        Self {
            structured_output: is_openai(&base_url),
            base_url,
            api_key,
            http: HttpSettings::default(),
            origin: Origin::Operator,
        }
    }
}

/// A provider speaking OpenAI's Chat Completions.
pub struct OpenAi {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    base_url: String,
    endpoint: Endpoint,
    api_key: Option<SecretString>,
    structured_output: bool,
    /// api.openai.com itself, which wants `max_completion_tokens`.
    official: bool,
}

impl OpenAi {
    /// `name` is what errors are reported under (the provider part of `name/model`).
    pub fn new(name: &str, config: OpenAiConfig) -> Result<Self, ProviderError> {
        let base_url = config.base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ProviderError::Config(format!(
                "{name}: the base URL `{base_url}` must start with http:// or https://"
            )));
        }
        let api_key = config
            .api_key
            .filter(|k| !k.expose_secret().trim().is_empty());
        if let Some(key) = &api_key
            && !key
                .expose_secret()
                .trim()
                .bytes()
                .all(|b| b.is_ascii_graphic() || b == b' ')
        {
            // Never echo the key itself.
            return Err(ProviderError::Config(format!(
                "{name}: the API key holds characters an HTTP header cannot carry"
            )));
        }
        let endpoint = Endpoint::named_by(config.origin, &base_url, config.http)?;
        Ok(Self {
            inner: Arc::new(Inner {
                name: name.to_string(),
                official: is_openai(&base_url),
                base_url,
                endpoint,
                api_key,
                structured_output: config.structured_output,
            }),
        })
    }
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("OpenAi")
            .field("name", &i.name)
            .field("base_url", &i.base_url)
            .field(
                "api_key",
                &if i.api_key.is_some() {
                    "[REDACTED]"
                } else {
                    "none"
                },
            )
            .field("structured_output", &i.structured_output)
            .field("http", i.endpoint.settings())
            .finish()
    }
}

impl Provider for OpenAi {
    fn model(&self, name: &str) -> Option<Arc<dyn Model>> {
        (!name.trim().is_empty()).then(|| {
            Arc::new(OpenAiModel {
                provider: self.inner.clone(),
                model: name.to_string(),
            }) as Arc<dyn Model>
        })
    }
}

/// One model of an [`OpenAi`] provider.
struct OpenAiModel {
    provider: Arc<Inner>,
    model: String,
}

#[async_trait]
impl Model for OpenAiModel {
    async fn chat(&self, request: ChatRequest) -> Result<Completion, ModelError> {
        self.call(request).await.map_err(|e| ModelError::Failed {
            provider: self.provider.name.clone(),
            message: e.to_string(),
        })
    }
}

impl OpenAiModel {
    async fn call(&self, request: ChatRequest) -> Result<Completion, ProviderError> {
        let p = &self.provider;
        let names = ToolNames::of(&request);
        let body = self.body(&request, &names);
        let mut headers = Vec::new();
        if let Some(key) = &p.api_key {
            headers.push((
                "authorization",
                format!("Bearer {}", key.expose_secret().trim()),
            ));
        }
        let deltas = request.deltas.map(Deltas::new);
        let streamed = deltas.is_some();
        let names = &names;
        let read = |answer| {
            let deltas = deltas.clone();
            async move {
                match deltas {
                    None => parse_completion(&p.endpoint.body(answer).await?, names),
                    Some(deltas) => {
                        deltas.restart();
                        self.read_stream(answer, &deltas, names).await
                    }
                }
            }
        };
        p.endpoint
            .call(
                "/chat/completions",
                &headers,
                &body,
                request.on_retry.as_ref(),
                streamed,
                read,
            )
            .await
    }

    /// The request body: the chat, the tools, the sampling, the schema and the stream flags.
    fn body(&self, request: &ChatRequest, names: &ToolNames) -> Value {
        let p = &self.provider;
        let messages: Vec<Value> = paired(&request.messages)
            .iter()
            .map(|m| message(m, names))
            .collect();
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            body.insert("tools".into(), tools(&request.tools, names));
            let choice = match &request.tool_use.choice {
                ToolChoice::Auto => None,
                ToolChoice::Required => Some(json!("required")),
                ToolChoice::Named(name) => {
                    Some(json!({"type": "function", "function": {"name": names.to_wire(name)}}))
                }
            };
            if let Some(choice) = choice {
                body.insert("tool_choice".into(), choice);
            }
            if let Some(parallel) = request.tool_use.parallel {
                body.insert("parallel_tool_calls".into(), json!(parallel));
            }
        }
        let sampling = request.sampling;
        if let Some(t) = sampling.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(t) = sampling.top_p {
            body.insert("top_p".into(), json!(t));
        }
        if let Some(n) = sampling.max_tokens {
            let field = if p.official {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(field.into(), json!(n));
        }
        if p.structured_output && request.json_reply {
            body.insert(
                "response_format".into(),
                reply_format(request.answer_schema.as_deref()),
            );
        }
        if request.deltas.is_some() {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Value::Object(body)
    }

    /// Reads `chat.completion.chunk` events until `[DONE]`, passing on each piece of text and
    /// putting tool calls together from their pieces.
    async fn read_stream(
        &self,
        answer: Answer,
        deltas: &Deltas,
        names: &ToolNames,
    ) -> Result<Completion, ProviderError> {
        let mut events = self.provider.endpoint.events(answer);
        let mut streamed = Streamed::default();
        while let Some(event) = events.next().await {
            let event = event?;
            match event.data.trim() {
                "" => {}
                "[DONE]" => return streamed.finish(names),
                data => streamed.read(data, deltas)?,
            }
        }
        Err(malformed("the stream ended before `data: [DONE]`".into()))
    }
}

/// What a streamed answer has said so far.
#[derive(Default)]
struct Streamed {
    text: String,
    refusal: String,
    usage: Usage,
    calls: StreamedCalls,
    model: Option<String>,
    finish_reason: Option<String>,
}

impl Streamed {
    /// Reads one chunk (an event's data), its text passed on to `deltas` as it comes.
    fn read(&mut self, data: &str, deltas: &Deltas) -> Result<(), ProviderError> {
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            malformed(format!(
                "a stream chunk is not JSON ({e}): {}",
                snippet(data)
            ))
        })?;
        if let Some(error) = reported_error(&chunk) {
            return Err(ProviderError::Broken(error));
        }
        let Some(chunk) = chunk.as_object() else {
            return Err(malformed(format!(
                "a stream chunk is not an object: {}",
                snippet(data)
            )));
        };
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = parse_usage(u);
        }
        if self.model.is_none() {
            self.model = chunk
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::Array(c)) => c,
            Some(_) => {
                return Err(malformed(format!(
                    "a stream chunk's choices are not a list: {}",
                    snippet(data)
                )));
            }
        };
        let Some(choice) = choices.first() else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        match delta.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(piece)) => {
                if !piece.is_empty() {
                    self.text.push_str(piece);
                    deltas.push(piece);
                }
            }
            Some(_) => {
                return Err(malformed(format!(
                    "a stream chunk's content is not text: {}",
                    snippet(data)
                )));
            }
        }
        if let Some(piece) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.push_str(piece);
        }
        match delta.get("tool_calls") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(pieces)) => {
                self.calls.add(pieces);
                Ok(())
            }
            Some(_) => Err(malformed(format!(
                "a stream chunk's tool calls are not a list: {}",
                snippet(data)
            ))),
        }
    }

    /// The answer, once the stream said `[DONE]`.
    fn finish(self, names: &ToolNames) -> Result<Completion, ProviderError> {
        let tool_calls = self.calls.finish(names);
        if self.text.is_empty() && tool_calls.is_empty() && !self.refusal.is_empty() {
            return Err(ProviderError::Unusable(format!(
                "the model refused: {}",
                self.refusal
            )));
        }
        Ok(Completion {
            text: self.text,
            usage: self.usage,
            tool_calls,
            model: self.model,
            finish_reason: self.finish_reason,
        })
    }
}

/// One chat message on the wire: an assistant message carries its tool calls (its content
/// null when it has no text), a tool message the id of the call it answers.
fn message(m: &ChatMessage, names: &ToolNames) -> Value {
    match (m.role, &m.tool) {
        (Role::Assistant, Some(ToolPart::Calls(calls))) if !calls.is_empty() => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": names.to_wire(&c.name), "arguments": c.arguments}
                    })
                })
                .collect();
            let content = if m.text.is_empty() {
                Value::Null
            } else {
                json!(m.text)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        (Role::Tool, Some(ToolPart::Result(r))) => {
            json!({"role": "tool", "tool_call_id": r.call_id, "content": m.text})
        }
        (Role::User, _) if !m.images.is_empty() => {
            let mut parts = vec![json!({"type": "text", "text": m.text})];
            parts.extend(
                m.images
                    .iter()
                    .map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
            );
            json!({"role": "user", "content": parts})
        }
        (role, _) => json!({"role": role.as_str(), "content": m.text}),
    }
}

/// `tools`: each a function under its wire name, with its schema as `parameters`.
fn tools(tools: &[Tool], names: &ToolNames) -> Value {
    Value::Array(
        crate::tools::distinct(tools)
            .map(|t| {
                let mut function = Map::new();
                function.insert("name".into(), json!(names.to_wire(&t.name)));
                if !t.description.is_empty() {
                    function.insert("description".into(), json!(t.description));
                }
                function.insert("parameters".into(), crate::tools::schema(t));
                json!({"type": "function", "function": function})
            })
            .collect(),
    )
}

/// Tool calls as a stream sends them: by index, the id and name first, the arguments in
/// pieces (the calls of a parallel answer interleaved).
#[derive(Default)]
struct StreamedCalls(BTreeMap<u64, PartialCall>);

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl StreamedCalls {
    /// A chunk's `delta.tool_calls`.
    fn add(&mut self, pieces: &[Value]) {
        for (position, piece) in pieces.iter().enumerate() {
            let index = piece
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let call = self.0.entry(index).or_default();
            if call.id.is_empty()
                && let Some(id) = piece.get("id").and_then(Value::as_str)
            {
                call.id = id.to_string();
            }
            let function = piece.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                call.name.push_str(name);
            }
            if let Some(arguments) = function.and_then(|f| f.get("arguments")) {
                call.arguments.push_str(&arguments_text(arguments));
            }
        }
    }

    /// The calls in index order, named as the request named them.
    fn finish(self, names: &ToolNames) -> Vec<ToolCall> {
        self.0
            .into_values()
            .map(|c| ToolCall {
                id: c.id,
                name: names.from_wire(&c.name),
                arguments: c.arguments,
            })
            .collect()
    }
}

/// A non-streamed message's `tool_calls`.
fn parse_calls(calls: &[Value], names: &ToolNames) -> Vec<ToolCall> {
    calls
        .iter()
        .map(|call| {
            let function = call.get("function");
            let field = |f: &str| {
                function
                    .and_then(|x| x.get(f))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                name: names.from_wire(field("name")),
                arguments: function
                    .and_then(|f| f.get("arguments"))
                    .map(arguments_text)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// A call's arguments as text: the string the model wrote, as it is; a server that sends them
/// as JSON gets them written out.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `response_format` for the JSON protocol: exactly `{"to": <id>, "context": "<text>"}`.
fn reply_format(answer: Option<&Value>) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "to": {"type": "integer"},
            "context": {"type": "string"}
        },
        "required": ["to", "context"],
        "additionalProperties": false
    });
    if let Some(answer) = answer {
        // The answer may be the client's JSON itself; its definitions move to the root, where
        // its references (`#/$defs/…`) find them.
        let mut answer = answer.clone();
        for defs in ["$defs", "definitions"] {
            if let Some(found) = answer.as_object_mut().and_then(|o| o.remove(defs)) {
                schema[defs] = found;
            }
        }
        schema["properties"]["context"] = json!({"anyOf": [{"type": "string"}, answer]});
    }
    json!({
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "strict": true, "schema": schema}
    })
}

/// A non-streamed `chat.completion`.
fn parse_completion(bytes: &[u8], names: &ToolNames) -> Result<Completion, ProviderError> {
    let body: Value = serde_json::from_slice(bytes).map_err(|e| {
        malformed(format!(
            "the body is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(bytes))
        ))
    })?;
    if let Some(error) = reported_error(&body) {
        return Err(ProviderError::Broken(error));
    }
    // Indexed step by step: `Value::pointer` copies each step of its path to unescape it.
    let choice = body.get("choices").and_then(|c| c.get(0));
    let message = choice
        .and_then(|c| c.get("message"))
        .ok_or_else(|| malformed("the answer has no choices".into()))?;
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => parse_calls(calls, names),
        Some(_) => {
            return Err(malformed(
                "the answer's tool calls are not a list".to_string(),
            ));
        }
    };
    let text = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        // Content parts, as some compatible servers send them.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        // Calls without text.
        None | Some(Value::Null) if !tool_calls.is_empty() => String::new(),
        _ => {
            return Err(match message.get("refusal").and_then(Value::as_str) {
                Some(refusal) => ProviderError::Unusable(format!("the model refused: {refusal}")),
                None => malformed("the answer's message has no content".into()),
            });
        }
    };
    let usage = body.get("usage").map(parse_usage).unwrap_or_default();
    let text_of = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    Ok(Completion {
        text,
        usage,
        tool_calls,
        model: text_of(body.get("model")),
        finish_reason: text_of(choice.and_then(|c| c.get("finish_reason"))),
    })
}

fn parse_usage(usage: &Value) -> Usage {
    let tokens = |field: &str| {
        usage
            .get(field)
            .and_then(Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    Usage {
        prompt_tokens: tokens("prompt_tokens"),
        completion_tokens: tokens("completion_tokens"),
    }
}

/// The message of an `{"error": {...}}` object sent where an answer was expected.
fn reported_error(body: &Value) -> Option<String> {
    let error = body.get("error").filter(|e| !e.is_null())?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| error.as_str().map(str::to_string))
        .unwrap_or_else(|| snippet(&error.to_string()));
    Some(match error.get("code").filter(|c| !c.is_null()) {
        Some(Value::String(code)) => format!("{message} ({code})"),
        Some(code) => format!("{message} ({code})"),
        None => message,
    })
}

fn malformed(message: String) -> ProviderError {
    ProviderError::Malformed(message)
}

/// The start of a body, for an error message.
fn snippet(text: &str) -> String {
    const MAX: usize = 200;
    let mut s: String = text.chars().take(MAX).collect();
    if text.chars().nth(MAX).is_some() {
        s.push('…');
    }
    s
}

/// Whether `url` points at api.openai.com itself.
fn is_openai(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next().unwrap_or_default();
    host.eq_ignore_ascii_case("api.openai.com")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelRequest;

    #[test]
    fn only_api_openai_com_is_openai() {
        assert!(is_openai("https://api.openai.com/v1"));
        assert!(is_openai("https://API.openai.com:443/v1/"));
        assert!(!is_openai("http://localhost:11434/v1"));
        assert!(!is_openai("https://api.openai.com.example.org/v1"));
        assert!(!is_openai("https://example.org/api.openai.com/v1"));
    }

    #[test]
    fn config_defaults() {
        let c = OpenAiConfig::new(None, None);
        assert_eq!(c.base_url, OPENAI_BASE_URL);
        assert!(c.structured_output);
        let c = OpenAiConfig::new(Some("http://localhost:11434/v1/"), None);
        assert_eq!(c.base_url, "http://localhost:11434/v1");
        assert!(!c.structured_output);
    }

    fn request(max_tokens: Option<u32>) -> ModelRequest {
        use agency_core::{AgencyDraft, AgencyId, AgentDraft, AgentId};
        let agency = AgencyDraft {
            name: "t".into(),
            protocol: "json".into(),
            manager: "boss".into(),
            agents: vec![AgentDraft {
                id: Some(1),
                name: "boss".into(),
                model: "openai/gpt-4o".into(),
                max_tokens,
                ..Default::default()
            }],
            ..Default::default()
        }
        .validate(AgencyId::new(), "local", &|_| true)
        .unwrap();
        ModelRequest {
            answer_schema: None,
            roster: Arc::new(agency.roster()),
            agency: Arc::new(agency),
            agent: AgentId::new(1).unwrap(),
            context: Arc::new(Vec::new()),
            tools: Arc::default(),
            tool_use: Default::default(),
            deltas: None,
            on_retry: None,
        }
    }

    fn body(base_url: &str, request: &ModelRequest) -> Value {
        let provider = OpenAi::new("openai", OpenAiConfig::new(Some(base_url), None)).unwrap();
        OpenAiModel {
            provider: provider.inner.clone(),
            model: "gpt-4o".into(),
        }
        .body(&request.chat_request(), &ToolNames::default())
    }

    #[test]
    fn the_official_endpoint_takes_max_completion_tokens_and_a_schema() {
        let official = body(OPENAI_BASE_URL, &request(Some(100)));
        assert_eq!(official["max_completion_tokens"], 100);
        assert!(official.get("max_tokens").is_none());
        assert_eq!(
            official["response_format"]["json_schema"]["name"],
            SCHEMA_NAME
        );
        let local = body("http://localhost:8000/v1", &request(Some(100)));
        assert_eq!(local["max_tokens"], 100);
        assert!(local.get("max_completion_tokens").is_none());
        assert!(local.get("response_format").is_none());
        let unset = body(OPENAI_BASE_URL, &request(None));
        assert!(unset.get("max_completion_tokens").is_none());
    }

    #[test]
    fn calls_parse_from_compatible_servers_too() {
        let names = ToolNames::new(["files/read"]);
        // No id (some servers send none), arguments as an object, content absent.
        let done = parse_completion(
            br#"{"choices":[{"message":{"tool_calls":[
                {"type":"function","function":{"name":"files__read","arguments":{"path":"a"}}},
                {"id":"c2","type":"function","function":{"name":"nope","arguments":"{bad"}}
            ]}}]}"#,
            &names,
        )
        .unwrap();
        assert_eq!(done.text, "");
        assert_eq!(done.tool_calls.len(), 2);
        assert_eq!(done.tool_calls[0].id, "");
        assert_eq!(done.tool_calls[0].name, "files/read");
        assert_eq!(done.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(done.tool_calls[1].id, "c2");
        assert_eq!(done.tool_calls[1].name, "nope");
        assert_eq!(done.tool_calls[1].arguments, "{bad");

        // Streamed without indexes: each entry's place in its chunk.
        let mut calls = StreamedCalls::default();
        calls.add(&[
            json!({"id": "a", "function": {"name": "files__read", "arguments": ""}}),
            json!({"id": "b", "function": {"name": "x", "arguments": "["}}),
        ]);
        calls.add(&[
            json!({"function": {"arguments": "{}"}}),
            json!({"function": {"arguments": "]"}}),
        ]);
        let calls = calls.finish(&names);
        assert_eq!(calls[0].name, "files/read");
        assert_eq!(calls[0].arguments, "{}");
        assert_eq!(calls[1].arguments, "[]");
    }

    #[test]
    fn completions_parse() {
        let parse_completion = |bytes: &[u8]| parse_completion(bytes, &ToolNames::default());
        let done = parse_completion(
            br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
        );
        assert_eq!(
            done,
            Ok(Completion {
                text: "hi".into(),
                usage: Usage {
                    prompt_tokens: 3,
                    completion_tokens: 1
                },
                ..Completion::default()
            })
        );
        let no_usage = parse_completion(br#"{"choices":[{"message":{"content":"hi"}}]}"#);
        assert_eq!(no_usage.map(|c| c.usage), Ok(Usage::default()));
        assert!(
            parse_completion(br#"{"choices":[]}"#)
                .unwrap_err()
                .to_string()
                .contains("no choices")
        );
        assert!(
            parse_completion(br#"{"choices":[{"message":{"content":null}}]}"#)
                .unwrap_err()
                .to_string()
                .contains("no content")
        );
        assert!(
            parse_completion(br#"{"choices":[{"message":{"content":null,"refusal":"no"}}]}"#)
                .unwrap_err()
                .to_string()
                .contains("refused: no")
        );
        assert!(
            parse_completion(br#"{"error":{"message":"boom","code":"x"}}"#)
                .unwrap_err()
                .to_string()
                .contains("boom (x)")
        );
    }
}
