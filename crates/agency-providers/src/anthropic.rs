//! Anthropic Messages API.
//!
//! `POST {base_url}/v1/messages`, API version `2023-06-01`. The agent's context becomes a
//! top-level `system` prompt and `messages` that alternate strictly between `user` and
//! `assistant`, starting with `user`, as the API requires. Answers are read whole, or as
//! server-sent events when the caller streams.

use std::fmt;
use std::sync::Arc;

use agency_core::{Role, Usage};
use async_trait::async_trait;
use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use crate::http::{Answer, Endpoint, HttpSettings, Origin, ProviderError, SseEvent};
use crate::{ChatRequest, Completion, Deltas, Model, ModelError, Provider};

pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when the agent sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// What the first user message says when a context opens with the assistant.
pub const CONVERSATION_START: &str = "(conversation start)";

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
        let body = self.body(&request, streamed);
        let read = |answer| {
            let deltas = deltas.clone();
            async move {
                match deltas {
                    None => self.read_message(answer).await,
                    Some(deltas) => {
                        deltas.restart();
                        self.read_stream(answer, &deltas).await
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

    /// The request body: the model, the folded context, and the agent's sampling.
    fn body(&self, request: &ChatRequest, stream: bool) -> Value {
        let (system, messages) = fold(request.messages.clone());
        let sampling = request.sampling;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        if let Some(system) = system {
            body.insert("system".into(), json!(system));
        }
        body.insert(
            "messages".into(),
            Value::Array(
                messages
                    .into_iter()
                    .map(|(role, text)| json!({"role": role.as_str(), "content": text}))
                    .collect(),
            ),
        );
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
    async fn read_message(&self, answer: Answer) -> Result<Completion, ProviderError> {
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
        let text: String = content
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect();
        let stop_reason = message.get("stop_reason").and_then(Value::as_str);
        let mut usage = Usage::default();
        if let Some(u) = message.get("usage") {
            usage.prompt_tokens = input_tokens(u).unwrap_or(0);
            usage.completion_tokens = tokens(u, "output_tokens").unwrap_or(0);
        }
        self.finish(text, usage, stop_reason)
    }

    /// A streamed message: text deltas go to `deltas` as they arrive.
    async fn read_stream(
        &self,
        answer: Answer,
        deltas: &Deltas,
    ) -> Result<Completion, ProviderError> {
        let mut events = self.shared.endpoint.events(answer);
        let mut text = String::new();
        let mut usage = Usage::default();
        let mut stop_reason: Option<String> = None;
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
                    if let Some(u) = data.pointer("/message/usage") {
                        if let Some(n) = input_tokens(u) {
                            usage.prompt_tokens = n;
                        }
                        if let Some(n) = tokens(u, "output_tokens") {
                            usage.completion_tokens = n;
                        }
                    }
                }
                "content_block_delta" => {
                    let delta = data.get("delta");
                    let is_text = delta.and_then(|d| d.get("type")).and_then(Value::as_str)
                        == Some("text_delta");
                    if let Some(piece) = delta
                        .filter(|_| is_text)
                        .and_then(|d| d.get("text"))
                        .and_then(Value::as_str)
                        && !piece.is_empty()
                    {
                        text.push_str(piece);
                        deltas.push(piece);
                    }
                }
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
                "message_stop" => return self.finish(text, usage, stop_reason.as_deref()),
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
                // `ping`, `content_block_start`, `content_block_stop`, and event types added
                // after this was written (the API may add them at any time).
                _ => {}
            }
        }
        Err(ProviderError::Malformed(
            "the stream ended before `message_stop`".into(),
        ))
    }

    /// The completion, or an error if the model wrote no text.
    fn finish(
        &self,
        text: String,
        usage: Usage,
        stop_reason: Option<&str>,
    ) -> Result<Completion, ProviderError> {
        if stop_reason == Some("max_tokens") {
            tracing::warn!(
                provider = %self.shared.name,
                model = %self.model,
                "the answer was cut off at max_tokens"
            );
        }
        if text.is_empty() {
            return Err(ProviderError::Unusable(format!(
                "the answer has no text (stop reason: {})",
                stop_reason.unwrap_or("none")
            )));
        }
        Ok(Completion { text, usage })
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

/// The chat as the Messages API wants it: the system entries joined into one prompt, and the
/// rest merged into strictly alternating turns that start with the user. Empty entries are
/// dropped (the API refuses empty content).
fn fold(chat: Vec<(Role, String)>) -> (Option<String>, Vec<(Role, String)>) {
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(Role, String)> = Vec::new();
    for (role, text) in chat {
        if text.trim().is_empty() {
            continue;
        }
        if role == Role::System {
            system.push(text);
            continue;
        }
        match turns.last_mut() {
            Some((last, joined)) if *last == role => {
                joined.push_str("\n\n");
                joined.push_str(&text);
            }
            _ => turns.push((role, text)),
        }
    }
    if turns.first().is_none_or(|(role, _)| *role != Role::User) {
        turns.insert(0, (Role::User, CONVERSATION_START.to_string()));
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, turns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(entries: &[(Role, &str)]) -> Vec<(Role, String)> {
        entries.iter().map(|(r, t)| (*r, t.to_string())).collect()
    }

    #[test]
    fn folding_merges_same_role_runs_and_lifts_the_system_prompt() {
        let (system, turns) = fold(chat(&[
            (Role::System, "You are dev."),
            (Role::System, "Be brief."),
            (Role::User, "a"),
            (Role::User, "b"),
            (Role::Assistant, "c"),
            (Role::User, " "),
            (Role::Assistant, "d"),
            (Role::User, "e"),
        ]));
        assert_eq!(system.as_deref(), Some("You are dev.\n\nBe brief."));
        assert_eq!(
            turns,
            chat(&[
                (Role::User, "a\n\nb"),
                (Role::Assistant, "c\n\nd"),
                (Role::User, "e"),
            ])
        );
    }

    #[test]
    fn folding_always_starts_with_the_user() {
        let (system, turns) = fold(chat(&[(Role::Assistant, "hi"), (Role::User, "yo")]));
        assert_eq!(system, None);
        assert_eq!(
            turns,
            chat(&[
                (Role::User, CONVERSATION_START),
                (Role::Assistant, "hi"),
                (Role::User, "yo"),
            ])
        );
        let (system, turns) = fold(chat(&[(Role::System, "only a prompt")]));
        assert_eq!(system.as_deref(), Some("only a prompt"));
        assert_eq!(turns, chat(&[(Role::User, CONVERSATION_START)]));
    }
}
