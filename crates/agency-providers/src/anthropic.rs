//! Anthropic Messages API.
//!
//! `POST {base_url}/v1/messages`, API version `2023-06-01`. The agent's context becomes a
//! top-level `system` prompt and `messages` that alternate strictly between `user` and
//! `assistant`, starting with `user`, as the API requires. Tool calls are `tool_use` blocks of
//! the assistant's turn and their results `tool_result` blocks at the start of the next user
//! turn. Answers are read whole, or as server-sent events when the caller streams.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use agency_core::tool::{ToolCall, ToolPart};
use agency_core::{Role, Usage};
use async_trait::async_trait;
use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use crate::http::{Answer, Endpoint, HttpSettings, Origin, ProviderError, SseEvent};
use crate::tools::{ToolNames, distinct, paired, schema};
use crate::{ChatMessage, ChatRequest, Completion, Deltas, Model, ModelError, Provider};
use agency_core::tool::ToolChoice;

pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when the agent sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// What the first user message says when a context opens with the assistant.
pub const CONVERSATION_START: &str = "(conversation start)";
/// What a `tool_result` says for a tool that answered with no text (the API refuses empty text).
pub const EMPTY_RESULT: &str = "(no output)";
/// The key under which a call's arguments go when they are not a JSON object (`tool_use`
/// takes only an object): `{"unparsed_arguments": "<the arguments as written>"}`, so the model
/// reads what it wrote.
pub const UNPARSED_ARGUMENTS: &str = "unparsed_arguments";

const MESSAGES_PATH: &str = "/v1/messages";

/// How to reach an Anthropic endpoint (or a proxy that speaks its API).
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    /// Without `/v1`: the provider appends `/v1/messages`.
    pub base_url: String,
    /// Sent as `x-api-key`; none for proxies that add their own.
    pub api_key: Option<SecretString>,
    pub http: HttpSettings,
    /// Who named the endpoint, which decides what it may reach.
    pub origin: Origin,
}

impl AnthropicConfig {
    /// [`ANTHROPIC_BASE_URL`] unless `base_url` is given, and the default HTTP settings.
    pub fn new(base_url: Option<&str>, api_key: Option<SecretString>) -> Self {
        Self {
            base_url: base_url.unwrap_or(ANTHROPIC_BASE_URL).to_string(),
            api_key,
            http: HttpSettings::default(),
            origin: Origin::Operator,
        }
    }
}

/// An Anthropic provider: serves any model name it is asked for.
pub struct Anthropic {
    shared: Arc<Shared>,
}

/// What every model of one provider shares.
struct Shared {
    /// The provider's name in the agency (`anthropic`, `claude`, ...), for errors and logs.
    name: String,
    base_url: String,
    endpoint: Endpoint,
    api_key: Option<SecretString>,
}

impl Anthropic {
    pub fn new(name: &str, config: AnthropicConfig) -> Result<Self, ProviderError> {
        let base_url = config.base_url.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base_url).map_err(|e| {
            ProviderError::Config(format!("`{base_url}` is not a base URL for {name}: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ProviderError::Config(format!(
                "`{base_url}` is not a base URL for {name}: it must start with http:// or https://"
            )));
        }
        let endpoint = Endpoint::named_by(config.origin, &base_url, config.http)?;
        Ok(Self {
            shared: Arc::new(Shared {
                name: name.to_string(),
                base_url,
                endpoint,
                api_key: config.api_key,
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("name", &self.shared.name)
            .field("base_url", &self.shared.base_url)
            .field(
                "api_key",
                &self.shared.api_key.as_ref().map(|_| "[REDACTED]"),
            )
            .field("http", self.shared.endpoint.settings())
            .finish()
    }
}

impl Provider for Anthropic {
    fn model(&self, name: &str) -> Option<Arc<dyn Model>> {
        (!name.trim().is_empty()).then(|| {
            Arc::new(AnthropicModel {
                shared: self.shared.clone(),
                model: name.to_string(),
            }) as Arc<dyn Model>
        })
    }
}

/// One model of an Anthropic provider.
struct AnthropicModel {
    shared: Arc<Shared>,
    model: String,
}

#[async_trait]
impl Model for AnthropicModel {
    async fn chat(&self, request: ChatRequest) -> Result<Completion, ModelError> {
        self.call(request).await.map_err(|e| self.fail(e))
    }
}

impl AnthropicModel {
    async fn call(&self, request: ChatRequest) -> Result<Completion, ProviderError> {
        let deltas = request.deltas.clone().map(Deltas::new);
        let streamed = deltas.is_some();
        let names = ToolNames::of(&request);
        let body = self.body(&request, streamed, &names);
        let names = &names;
        let read = |answer| {
            let deltas = deltas.clone();
            async move {
                match deltas {
                    None => self.read_message(answer, names).await,
                    Some(deltas) => {
                        deltas.restart();
                        self.read_stream(answer, &deltas, names).await
                    }
                }
            }
        };
        self.shared
            .endpoint
            .call(
                MESSAGES_PATH,
                &self.headers(),
                &body,
                request.on_retry.as_ref(),
                streamed,
                read,
            )
            .await
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
        if let Some(key) = &self.shared.api_key {
            headers.push(("x-api-key", key.expose_secret().to_string()));
        }
        headers
    }

    /// The request body: the model, the folded context, the tools, and the agent's sampling.
    fn body(&self, request: &ChatRequest, stream: bool, names: &ToolNames) -> Value {
        // The API refuses tool blocks in a request without tools: without tools, calls and
        // results are told as text.
        let blocks = (!request.tools.is_empty()).then_some(names);
        let (system, turns) = fold(&request.messages, blocks);
        let sampling = request.sampling;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        if let Some(system) = system {
            body.insert("system".into(), json!(system));
        }
        body.insert(
            "messages".into(),
            Value::Array(turns.into_iter().map(Turn::into_json).collect()),
        );
        if !request.tools.is_empty() {
            let tools = distinct(&request.tools)
                .map(|t| {
                    let mut tool = Map::new();
                    tool.insert("name".into(), json!(names.to_wire(&t.name)));
                    if !t.description.is_empty() {
                        tool.insert("description".into(), json!(t.description));
                    }
                    tool.insert("input_schema".into(), schema(t));
                    Value::Object(tool)
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let mut choice = match &request.tool_use.choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Named(name) => json!({"type": "tool", "name": names.to_wire(name)}),
            };
            if request.tool_use.parallel == Some(false) {
                choice["disable_parallel_tool_use"] = json!(true);
            }
            if choice != json!({"type": "auto"}) {
                body.insert("tool_choice".into(), choice);
            }
        }
        body.insert(
            "max_tokens".into(),
            json!(sampling.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        if let Some(t) = sampling.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = sampling.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if stream {
            body.insert("stream".into(), json!(true));
        }
        Value::Object(body)
    }

    /// A whole `message` object.
    async fn read_message(
        &self,
        answer: Answer,
        names: &ToolNames,
    ) -> Result<Completion, ProviderError> {
        let bytes = self.shared.endpoint.body(answer).await?;
        let text = String::from_utf8_lossy(&bytes);
        let message: Value = serde_json::from_str(&text).map_err(|e| {
            let start: String = text.chars().take(200).collect();
            ProviderError::Malformed(format!("the answer is not JSON ({e}): {start}"))
        })?;
        let Some(content) = message.get("content").and_then(Value::as_array) else {
            return Err(ProviderError::Malformed(
                "the answer has no `content` list".into(),
            ));
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(piece) = block.get("text").and_then(Value::as_str) {
                        text.push_str(piece);
                    }
                }
                Some("tool_use") => calls.push(ToolUse::start(block).finish(names)),
                _ => {}
            }
        }
        let stop_reason = message.get("stop_reason").and_then(Value::as_str);
        let mut usage = Usage::default();
        if let Some(u) = message.get("usage") {
            usage.prompt_tokens = input_tokens(u).unwrap_or(0);
            usage.completion_tokens = tokens(u, "output_tokens").unwrap_or(0);
        }
        let model = message.get("model").and_then(Value::as_str);
        self.finish(text, usage, stop_reason, calls, model)
    }

    /// A streamed message: text deltas go to `deltas` as they arrive; a tool call's input
    /// arrives in pieces (`input_json_delta`) between its block's start and stop.
    async fn read_stream(
        &self,
        answer: Answer,
        deltas: &Deltas,
        names: &ToolNames,
    ) -> Result<Completion, ProviderError> {
        let mut events = self.shared.endpoint.events(answer);
        let mut text = String::new();
        let mut calls: BTreeMap<u64, ToolUse> = BTreeMap::new();
        let mut usage = Usage::default();
        let mut stop_reason: Option<String> = None;
        let mut model: Option<String> = None;
        while let Some(event) = events.next().await {
            let SseEvent { event, data } = event?;
            let data: Value = if data.trim().is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&data).map_err(|e| {
                    ProviderError::Malformed(format!("the `{event}` event is not JSON: {e}"))
                })?
            };
            let kind = data.get("type").and_then(Value::as_str).unwrap_or(&event);
            match kind {
                "message_start" => {
                    model = data
                        .pointer("/message/model")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    if let Some(u) = data.pointer("/message/usage") {
                        if let Some(n) = input_tokens(u) {
                            usage.prompt_tokens = n;
                        }
                        if let Some(n) = tokens(u, "output_tokens") {
                            usage.completion_tokens = n;
                        }
                    }
                }
                "content_block_start" => {
                    if let Some(block) = data.get("content_block")
                        && block.get("type").and_then(Value::as_str) == Some("tool_use")
                    {
                        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                        calls.insert(index, ToolUse::start(block));
                    }
                }
                "content_block_delta" => content_delta(&data, &mut text, &mut calls, deltas),
                "message_delta" => {
                    if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str)
                    {
                        stop_reason = Some(reason.to_string());
                    }
                    if let Some(u) = data.get("usage") {
                        // Counts here are cumulative; newer API versions repeat the input.
                        if let Some(n) = input_tokens(u).filter(|n| *n > 0) {
                            usage.prompt_tokens = n;
                        }
                        if let Some(n) = tokens(u, "output_tokens") {
                            usage.completion_tokens = n;
                        }
                    }
                }
                "message_stop" => {
                    let calls = std::mem::take(&mut calls)
                        .into_values()
                        .map(|c| c.finish(names))
                        .collect();
                    return self.finish(
                        text,
                        usage,
                        stop_reason.as_deref(),
                        calls,
                        model.as_deref(),
                    );
                }
                "error" => {
                    let message = data
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("no message");
                    let kind = data
                        .pointer("/error/type")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    return Err(ProviderError::Broken(format!("{message} ({kind})")));
                }
                // `ping`, `content_block_stop`, and event types added after this was written
                // (the API may add them at any time).
                _ => {}
            }
        }
        Err(ProviderError::Malformed(
            "the stream ended before `message_stop`".into(),
        ))
    }

    /// The completion, or an error if the model wrote no text and called no tool.
    fn finish(
        &self,
        text: String,
        usage: Usage,
        stop_reason: Option<&str>,
        tool_calls: Vec<ToolCall>,
        model: Option<&str>,
    ) -> Result<Completion, ProviderError> {
        if stop_reason == Some("max_tokens") {
            tracing::warn!(
                provider = %self.shared.name,
                model = %self.model,
                "the answer was cut off at max_tokens"
            );
        }
        if text.is_empty() && tool_calls.is_empty() {
            return Err(ProviderError::Unusable(format!(
                "the answer has no text (stop reason: {})",
                stop_reason.unwrap_or("none")
            )));
        }
        Ok(Completion {
            text,
            usage,
            tool_calls,
            model: model.map(str::to_string),
            finish_reason: stop_reason.map(str::to_string),
        })
    }

    /// A failure of this provider. The key is scrubbed, in case an error body echoed it.
    fn fail(&self, error: impl fmt::Display) -> ModelError {
        let mut message = error.to_string();
        if let Some(key) = &self.shared.api_key {
            let key = key.expose_secret();
            if !key.is_empty() && message.contains(key) {
                message = message.replace(key, "[REDACTED]");
            }
        }
        ModelError::Failed {
            provider: self.shared.name.clone(),
            message,
        }
    }
}

/// A token count in a `usage` object.
fn tokens(usage: &Value, field: &str) -> Option<u32> {
    usage
        .get(field)
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The prompt's tokens: `input_tokens` plus any read from or written to the prompt cache,
/// which Anthropic counts apart.
fn input_tokens(usage: &Value) -> Option<u32> {
    let base = tokens(usage, "input_tokens")?;
    let cached = ["cache_creation_input_tokens", "cache_read_input_tokens"]
        .iter()
        .filter_map(|f| tokens(usage, f))
        .fold(0u32, u32::saturating_add);
    Some(base.saturating_add(cached))
}

/// A `tool_use` block as it was read: the call's id and name, the input it started with, and
/// the pieces of input that followed (streamed).
struct ToolUse {
    id: String,
    name: String,
    input: Value,
    json: String,
}

impl ToolUse {
    fn start(block: &Value) -> Self {
        let field = |f: &str| {
            block
                .get(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Self {
            id: field("id"),
            name: field("name"),
            input: block.get("input").cloned().unwrap_or_else(|| json!({})),
            json: String::new(),
        }
    }

    /// The call: its arguments the input's JSON text (the streamed pieces as they came, or the
    /// whole input when none came).
    fn finish(self, names: &ToolNames) -> ToolCall {
        let arguments = if self.json.trim().is_empty() {
            self.input.to_string()
        } else {
            self.json
        };
        ToolCall {
            id: self.id,
            name: names.from_wire(&self.name),
            arguments,
        }
    }
}

/// What a call's arguments are sent as: `tool_use` takes a JSON object. Arguments that are one
/// go as they are, empty arguments as `{}`, anything else (not JSON, or JSON that is not an
/// object) under [`UNPARSED_ARGUMENTS`] as the text it is.
fn input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({ UNPARSED_ARGUMENTS: arguments }),
    }
}

/// A call's id as the API takes it (`^[a-zA-Z0-9_-]+$`): ids another provider or a model
/// made may hold other characters, which become `_` (the same in the call and its result).
fn wire_id(id: &str) -> String {
    if id.is_empty() {
        return "call".to_string();
    }
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One content block of a turn.
#[derive(Clone, Debug, PartialEq)]
enum Block {
    Text(String),
    /// An image: its URL, or the media type and data of a base64 `data:` URL.
    Image(Value),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        id: String,
        content: String,
        is_error: bool,
    },
}

impl Block {
    fn into_json(self) -> Value {
        match self {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Image(source) => json!({"type": "image", "source": source}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            Block::ToolResult {
                id,
                content,
                is_error,
            } => json!({
                "type": "tool_result",
                "tool_use_id": id,
                "content": content,
                "is_error": is_error
            }),
        }
    }
}

/// One message of the Messages API: a role and its blocks.
#[derive(Clone, Debug, PartialEq)]
struct Turn {
    role: Role,
    blocks: Vec<Block>,
}

impl Turn {
    /// Text alone is sent as a string; anything else as content blocks.
    fn into_json(self) -> Value {
        let role = self.role.as_str();
        match <[Block; 1]>::try_from(self.blocks) {
            Ok([Block::Text(text)]) => json!({"role": role, "content": text}),
            Ok([block]) => json!({"role": role, "content": [block.into_json()]}),
            Err(blocks) => json!({
                "role": role,
                "content": blocks.into_iter().map(Block::into_json).collect::<Vec<_>>()
            }),
        }
    }
}

/// The blocks one chat message becomes. With `names` (tools are sent), calls are `tool_use`
/// blocks under their wire names and results `tool_result` blocks; without, both are told as
/// text.
fn blocks(m: &ChatMessage, names: Option<&ToolNames>) -> Vec<Block> {
    let mut out = Vec::new();
    let text = (!m.text.trim().is_empty()).then(|| m.text.clone());
    match (m.role, &m.tool, names) {
        (Role::Assistant, Some(ToolPart::Calls(calls)), Some(names)) => {
            out.extend(text.map(Block::Text));
            out.extend(calls.iter().map(|c| Block::ToolUse {
                id: wire_id(&c.id),
                name: names.to_wire(&c.name),
                input: input(&c.arguments),
            }));
        }
        (Role::Tool, Some(ToolPart::Result(r)), Some(_)) => out.push(Block::ToolResult {
            id: wire_id(&r.call_id),
            content: text.unwrap_or_else(|| EMPTY_RESULT.to_string()),
            is_error: r.is_error,
        }),
        (Role::Assistant, Some(ToolPart::Calls(calls)), None) if !calls.is_empty() => {
            let told: Vec<String> = text
                .into_iter()
                .chain(
                    calls
                        .iter()
                        .map(|c| format!("[called {} with {}]", c.name, c.arguments)),
                )
                .collect();
            out.push(Block::Text(told.join("\n")));
        }
        (Role::Tool, Some(ToolPart::Result(r)), None) => out.push(Block::Text(format!(
            "[result of {}{}]\n{}",
            r.name,
            if r.is_error { ", an error" } else { "" },
            text.as_deref().unwrap_or(EMPTY_RESULT)
        ))),
        _ => {
            out.extend(text.map(Block::Text));
            if m.role == Role::User {
                out.extend(
                    m.images
                        .iter()
                        .filter_map(|url| image_source(url))
                        .map(Block::Image),
                );
            }
        }
    }
    out
}

/// An image's `source`: a URL, or a base64 `data:` URL as its media type and data. Other
/// `data:` URLs are left out (the text names the image).
fn image_source(url: &str) -> Option<Value> {
    match url.strip_prefix("data:") {
        None => Some(json!({"type": "url", "url": url})),
        Some(rest) => {
            let (meta, data) = rest.split_once(',')?;
            let media_type = meta.strip_suffix(";base64")?;
            Some(json!({"type": "base64", "media_type": media_type, "data": data}))
        }
    }
}

/// The chat as the Messages API wants it: the system entries joined into one prompt, and the
/// rest merged into strictly alternating turns that start with the user; tool results are
/// the user's, right after the turn that made the calls (see [`paired`]). Empty text is
/// dropped (the API refuses empty content).
fn fold(chat: &[ChatMessage], names: Option<&ToolNames>) -> (Option<String>, Vec<Turn>) {
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    for m in paired(chat).iter() {
        if m.role == Role::System {
            if !m.text.trim().is_empty() {
                system.push(m.text.clone());
            }
            continue;
        }
        let role = if m.role == Role::Tool {
            Role::User
        } else {
            m.role
        };
        let blocks = blocks(m, names);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => {
                for block in blocks {
                    match (last.blocks.last_mut(), block) {
                        (Some(Block::Text(joined)), Block::Text(text)) => {
                            joined.push_str("\n\n");
                            joined.push_str(&text);
                        }
                        (_, block) => last.blocks.push(block),
                    }
                }
            }
            _ => turns.push(Turn { role, blocks }),
        }
    }
    if turns.first().is_none_or(|t| t.role != Role::User) {
        turns.insert(
            0,
            Turn {
                role: Role::User,
                blocks: vec![Block::Text(CONVERSATION_START.to_string())],
            },
        );
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, turns)
}

/// A `content_block_delta` event: a piece of the text (passed on to `deltas`), or of a tool
/// call's arguments.
fn content_delta(
    data: &Value,
    text: &mut String,
    calls: &mut BTreeMap<u64, ToolUse>,
    deltas: &Deltas,
) {
    let delta = data.get("delta");
    match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
        Some("text_delta") => {
            if let Some(piece) = delta.and_then(|d| d.get("text")).and_then(Value::as_str)
                && !piece.is_empty()
            {
                text.push_str(piece);
                deltas.push(piece);
            }
        }
        Some("input_json_delta") => {
            let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
            if let Some(call) = calls.get_mut(&index)
                && let Some(piece) = delta
                    .and_then(|d| d.get("partial_json"))
                    .and_then(Value::as_str)
            {
                call.json.push_str(piece);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(entries: &[(Role, &str)]) -> Vec<ChatMessage> {
        entries
            .iter()
            .map(|(r, t)| ChatMessage::new(*r, *t))
            .collect()
    }

    fn texts(entries: &[(Role, &str)]) -> Vec<Turn> {
        entries
            .iter()
            .map(|(role, t)| Turn {
                role: *role,
                blocks: vec![Block::Text(t.to_string())],
            })
            .collect()
    }

    #[test]
    fn folding_merges_same_role_runs_and_lifts_the_system_prompt() {
        let (system, turns) = fold(
            &chat(&[
                (Role::System, "You are dev."),
                (Role::System, "Be brief."),
                (Role::User, "a"),
                (Role::User, "b"),
                (Role::Assistant, "c"),
                (Role::User, " "),
                (Role::Assistant, "d"),
                (Role::User, "e"),
            ]),
            None,
        );
        assert_eq!(system.as_deref(), Some("You are dev.\n\nBe brief."));
        assert_eq!(
            turns,
            texts(&[
                (Role::User, "a\n\nb"),
                (Role::Assistant, "c\n\nd"),
                (Role::User, "e"),
            ])
        );
    }

    #[test]
    fn a_users_images_are_image_blocks_after_its_text() {
        let m = ChatMessage {
            images: vec![
                "https://example.com/cat.png".into(),
                "data:image/png;base64,iVBORw0KGgo=".into(),
                "data:text/plain,not-base64".into(),
            ],
            ..ChatMessage::new(Role::User, "what is this?")
        };
        let content = Turn {
            role: Role::User,
            blocks: blocks(&m, None),
        }
        .into_json()["content"]
            .clone();
        assert_eq!(
            content,
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "iVBORw0KGgo="}},
            ])
        );
        // Another role's images are not the user's: none are sent.
        let a = ChatMessage {
            role: Role::Assistant,
            ..m
        };
        assert_eq!(blocks(&a, None).len(), 1);
    }

    #[test]
    fn folding_always_starts_with_the_user() {
        let (system, turns) = fold(&chat(&[(Role::Assistant, "hi"), (Role::User, "yo")]), None);
        assert_eq!(system, None);
        assert_eq!(
            turns,
            texts(&[
                (Role::User, CONVERSATION_START),
                (Role::Assistant, "hi"),
                (Role::User, "yo"),
            ])
        );
        let (system, turns) = fold(&chat(&[(Role::System, "only a prompt")]), None);
        assert_eq!(system.as_deref(), Some("only a prompt"));
        assert_eq!(turns, texts(&[(Role::User, CONVERSATION_START)]));
    }

    #[test]
    fn call_ids_become_ones_the_api_takes_in_calls_and_results_alike() {
        use agency_core::tool::ToolResult;
        let chat = vec![
            ChatMessage::new(Role::User, "go"),
            ChatMessage {
                images: Vec::new(),
                role: Role::Assistant,
                text: String::new(),
                tool: Some(ToolPart::Calls(vec![ToolCall {
                    id: "call:1/x".into(),
                    name: "a/b".into(),
                    arguments: "{}".into(),
                }])),
            },
            ChatMessage {
                images: Vec::new(),
                role: Role::Tool,
                text: "ok".into(),
                tool: Some(ToolPart::Result(ToolResult {
                    call_id: "call:1/x".into(),
                    name: "a/b".into(),
                    is_error: false,
                })),
            },
        ];
        let names = ToolNames::new(["a/b"]);
        let (_, turns) = fold(&chat, Some(&names));
        assert_eq!(
            turns[1].blocks,
            [Block::ToolUse {
                id: "call_1_x".into(),
                name: "a__b".into(),
                input: json!({}),
            }]
        );
        assert_eq!(
            turns[2].blocks,
            [Block::ToolResult {
                id: "call_1_x".into(),
                content: "ok".into(),
                is_error: false,
            }]
        );
        assert_eq!(wire_id(""), "call");
    }

    #[test]
    fn arguments_go_as_an_object() {
        assert_eq!(input(r#"{"a": [1, 2]}"#), json!({"a": [1, 2]}));
        assert_eq!(input(""), json!({}));
        assert_eq!(input("  "), json!({}));
        assert_eq!(input(r#"{"a": "#), json!({UNPARSED_ARGUMENTS: r#"{"a": "#}));
        assert_eq!(input("[1]"), json!({UNPARSED_ARGUMENTS: "[1]"}));
    }
}
