//! Models: anything that reads an agent's context and answers.
//!
//! [`Model`] is the one trait every provider implements. [`Providers`] maps the provider part
//! of a model reference (`builtin/rules` → `builtin`) to what serves it. This crate ships the
//! built-in rules model; real LLM providers plug in beside it.

use std::collections::HashMap;
use std::sync::Arc;

/// A chat message, as chat models are sent one (the core's: tool calls, results and images).
pub use agency_core::ChatMessage;
use agency_core::tool::{Tool, ToolCall, ToolPart};
use agency_core::{
    Agency, Agent, AgentId, Message, MessageKind, ModelRef, ProviderKind, ProviderSpec, Roster,
    Usage, protocol, rules,
};
use async_trait::async_trait;
use secrecy::SecretString;

pub mod anthropic;
pub mod bot;
pub mod http;
pub mod openai;
pub mod tools;

/// What a model is asked: the agent, and its whole context (system prompt first).
#[derive(Clone, Debug)]
pub struct ModelRequest {
    pub agency: Arc<Agency>,
    pub roster: Arc<Roster>,
    pub agent: AgentId,
    pub context: Arc<Vec<Message>>,
    /// The tools this agent may call (qualified `server/tool` names), as the runtime resolved
    /// them; empty when it may call none.
    pub tools: Arc<Vec<Tool>>,
    /// How the model may use them (an API client's `tool_choice`, for the manager).
    pub tool_use: agency_core::tool::ToolUse,
    /// The JSON Schema an answer to the user must match (an API client's strict structured
    /// output, for the manager): providers that ask for the protocol's reply schema ask with
    /// this one as the answer's `context`.
    pub answer_schema: Option<Arc<serde_json::Value>>,
    /// Set when the caller streams: the provider streams too and sends each piece of text as
    /// it arrives. The returned [`Completion`] still holds the whole text.
    pub deltas: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Told when an HTTP provider retries the call (a 429, a 5xx, a lost connection), so the
    /// caller can show it. Models that do not retry ignore it.
    pub on_retry: Option<http::RetryHook>,
}

/// A chat model's call outside any routing: the messages (system first), the tools it may
/// call, how to sample, and the caller's hooks. A routed call frames itself into one
/// ([`ModelRequest::chat_request`]); rooms and evaluations build one directly.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    /// Every tool call should be followed by its result before the next message that is not
    /// one; providers answer any that is not with an error result ([`tools::paired`]).
    pub messages: Vec<ChatMessage>,
    /// What the model may call, by qualified name (`server/tool`); none sends no tools.
    pub tools: Vec<Tool>,
    /// How the model may use them; ignored without tools.
    pub tool_use: agency_core::tool::ToolUse,
    /// See [`ModelRequest::answer_schema`].
    pub answer_schema: Option<Arc<serde_json::Value>>,
    pub sampling: agency_core::Sampling,
    /// The answer is a reply of the `json` protocol: providers that can ask for it as
    /// structured output.
    pub json_reply: bool,
    /// Set when the caller streams (see [`ModelRequest::deltas`]).
    pub deltas: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Told when an HTTP provider retries the call (see [`ModelRequest::on_retry`]).
    pub on_retry: Option<http::RetryHook>,
}

impl ModelRequest {
    pub fn agent(&self) -> Option<&Agent> {
        self.agency.agent(self.agent)
    }

    /// The call as a chat model takes it: the context framed by the agency's protocol, the
    /// agent's sampling, the caller's hooks.
    pub fn chat_request(&self) -> ChatRequest {
        ChatRequest {
            messages: self.chat(),
            tools: self.tools.as_ref().clone(),
            tool_use: self.tool_use.clone(),
            answer_schema: self.answer_schema.clone(),
            sampling: self.agent().map(|a| a.sampling).unwrap_or_default(),
            json_reply: self.agency.protocol == agency_core::Protocol::Json,
            deltas: self.deltas.clone(),
            on_retry: self.on_retry.clone(),
        }
    }

    /// The context as chat messages: what a chat model is sent. Deliveries are framed by the
    /// agency's protocol so the agent sees who sent them; a reply's tool calls and the tool
    /// results that answer them go with their messages, and a call the context holds no result
    /// for is answered with an error result ([`tools::paired`]).
    pub fn chat(&self) -> Vec<ChatMessage> {
        let chat: Vec<ChatMessage> = self
            .context
            .iter()
            .filter(|m| m.included)
            .map(|m| {
                let text = match m.kind {
                    MessageKind::Input | MessageKind::Delivery | MessageKind::Failure => {
                        protocol::frame(self.agency.protocol, m.from, &m.text, &self.roster)
                    }
                    _ => m.text.clone(),
                };
                let tool = match (m.kind, &m.tool) {
                    (MessageKind::Reply, Some(ToolPart::Calls(calls))) if !calls.is_empty() => {
                        m.tool.clone()
                    }
                    (MessageKind::ToolResult, Some(ToolPart::Result(_))) => m.tool.clone(),
                    _ => None,
                };
                ChatMessage {
                    role: m.role(),
                    text,
                    tool,
                    // The user's images reach the model the user's message reaches.
                    images: if m.kind == MessageKind::Input {
                        m.images.clone()
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();
        match tools::paired(&chat) {
            std::borrow::Cow::Borrowed(_) => chat,
            std::borrow::Cow::Owned(paired) => paired,
        }
    }
}

/// A call's text passed on as it streams, across the call's attempts: a stream asked for
/// again passes on only what goes past what an earlier attempt passed on, and nothing once it
/// differs from that, so whoever listens never sees text twice or spliced. (The call's
/// [`Completion`] holds the text of the attempt that answered.) Clones share it.
#[derive(Clone)]
pub(crate) struct Deltas(Arc<std::sync::Mutex<Passed>>);

struct Passed {
    tx: tokio::sync::mpsc::UnboundedSender<String>,
    passed: String,
    this_attempt: String,
    diverged: bool,
}

impl Deltas {
    pub(crate) fn new(tx: tokio::sync::mpsc::UnboundedSender<String>) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Passed {
            tx,
            passed: String::new(),
            this_attempt: String::new(),
            diverged: false,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Passed> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An attempt starts streaming from its beginning.
    pub(crate) fn restart(&self) {
        self.lock().this_attempt.clear();
    }

    pub(crate) fn push(&self, piece: &str) {
        let mut p = self.lock();
        if p.diverged {
            return;
        }
        p.this_attempt.push_str(piece);
        let Passed {
            tx,
            passed,
            this_attempt: this,
            diverged,
        } = &mut *p;
        if this.len() <= passed.len() {
            *diverged = !passed.starts_with(this.as_str());
            return;
        }
        if !this.starts_with(passed.as_str()) {
            *diverged = true;
            return;
        }
        let new = this[passed.len()..].to_string();
        passed.push_str(&new);
        // The caller may have stopped listening; the answer is still wanted.
        let _ = tx.send(new);
    }
}

/// A model's answer: its text, and the tools it calls (qualified `server/tool` names, or the
/// name as the model wrote it when it named no tool it was given). Calls carry their ids as
/// the model sent them: empty when a server sent none, and not checked for uniqueness (the
/// runtime makes them unique within the reply).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub usage: Usage,
    pub tool_calls: Vec<ToolCall>,
    /// The model that answered, as the provider named it (for traces).
    pub model: Option<String>,
    /// Why the model stopped, in the provider's words (`stop`, `tool_calls`, `end_turn`).
    pub finish_reason: Option<String>,
}

/// Why a model could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("{provider} has no model `{model}`")]
    UnknownModel { provider: String, model: String },
    #[error("{provider}: {message}")]
    Failed { provider: String, message: String },
}

#[async_trait]
pub trait Model: Send + Sync {
    /// A plain chat: what every chat model answers.
    async fn chat(&self, request: ChatRequest) -> Result<Completion, ModelError>;

    /// An agent's turn in a routed conversation. A chat model answers the context framed by
    /// the agency's protocol; the rules model reads the routing itself.
    async fn complete(&self, request: ModelRequest) -> Result<Completion, ModelError> {
        self.chat(request.chat_request()).await
    }

    /// A call of the memory cycle (rate an observation, reflect, plan): `request`'s context
    /// already holds the task's prompt, which is all a chat model needs. A scripted model may
    /// answer from `task` itself.
    async fn complete_task(
        &self,
        request: ModelRequest,
        task: &agency_core::memory::MemoryTask,
    ) -> Result<Completion, ModelError> {
        let _ = task;
        self.complete(request).await
    }
}

/// A source of models: a provider (`builtin`, `openai`, a local server, ...).
pub trait Provider: Send + Sync {
    fn model(&self, name: &str) -> Option<Arc<dyn Model>>;
}

/// Whether a provider has the key its API wants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyState {
    /// It needs none (the built-in models, a server on one's own network without a key).
    #[default]
    NotNeeded,
    /// It was built with one.
    Present,
    /// It wants one and has none: its models fail on their first call.
    Missing,
}

impl KeyState {
    /// What a provider built from `spec` with `key` (or without) has.
    pub fn of(spec: &ProviderSpec, has_key: bool) -> Self {
        if has_key {
            KeyState::Present
        } else if spec.api_key_env.is_some() || spec.base_url.is_none() {
            // Its own API (no base URL: OpenAI's or Anthropic's), or one that names a key.
            KeyState::Missing
        } else {
            KeyState::NotNeeded
        }
    }
}

/// What the UI tells of a provider: its kind (`None`: the built-in one, or another without a
/// spec), whether it has a key, and the models its spec names (through their prices).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderInfo {
    pub kind: Option<agency_core::ProviderKind>,
    pub key: KeyState,
    pub models: Vec<String>,
}

/// The providers this server knows, by name, how it calls webhook bots, and how it builds the
/// providers agencies declare.
#[derive(Clone)]
pub struct Providers {
    by_name: HashMap<String, Arc<dyn Provider>>,
    /// What those built from specs are (see [`Providers::describe`]).
    info: HashMap<String, ProviderInfo>,
    /// Prices by provider, then model, as their specs give them.
    prices: HashMap<String, HashMap<String, agency_core::Price>>,
    bots: Option<bot::BotClient>,
    /// The patience every provider built from a spec starts from.
    http: http::HttpSettings,
    /// Whether providers accounts declare may be on loopback and private networks.
    allow_private: bool,
}

impl Providers {
    /// Only the built-in models; bots and accounts' providers on public addresses only.
    pub fn builtin() -> Self {
        let mut p = Self {
            by_name: HashMap::new(),
            info: HashMap::new(),
            prices: HashMap::new(),
            bots: bot::BotClient::new(bot::default_settings(), false).ok(),
            http: http::HttpSettings::default(),
            allow_private: false,
        };
        p.insert("builtin", Arc::new(Builtin));
        p
    }

    /// Calls bots with `client` (e.g. one allowed to reach private addresses).
    pub fn set_bots(&mut self, client: bot::BotClient) {
        self.bots = Some(client);
    }

    /// Lets accounts' providers and bots reach loopback and private networks: for a server on
    /// one's own machine, never for one that hosts others' accounts.
    pub fn allow_private_addresses(&mut self) -> Result<(), http::ProviderError> {
        self.allow_private = true;
        self.bots = Some(bot::BotClient::new(bot::default_settings(), true)?);
        Ok(())
    }

    /// Whether accounts' providers may be on loopback and private networks.
    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// The patience providers built from specs start from (timeouts, retries, sizes).
    pub fn set_http(&mut self, settings: http::HttpSettings) {
        self.http = settings;
    }

    pub fn http(&self) -> &http::HttpSettings {
        &self.http
    }

    /// How bots are called; `None` when no HTTP client could be built.
    pub fn bots(&self) -> Option<&bot::BotClient> {
        self.bots.as_ref()
    }

    pub fn insert(&mut self, name: &str, provider: Arc<dyn Provider>) {
        self.by_name.insert(name.to_string(), provider);
    }

    /// Records what provider `name` is, for [`Providers::catalog`].
    pub fn describe(&mut self, name: &str, info: ProviderInfo) {
        self.info.insert(name.to_string(), info);
    }

    /// Every provider by name (`builtin` first, then by name), with what is known of it.
    pub fn catalog(&self) -> Vec<(String, ProviderInfo)> {
        let mut out: Vec<(String, ProviderInfo)> = self
            .by_name
            .keys()
            .map(|name| {
                let mut info = self.info.get(name).cloned().unwrap_or_default();
                if name == "builtin" {
                    info.models = vec!["rules".into()];
                }
                if info.models.is_empty() {
                    info.models = suggested_models(name)
                        .iter()
                        .map(|m| m.to_string())
                        .collect();
                }
                (name.clone(), info)
            })
            .collect();
        out.sort_by(|a, b| (a.0 != "builtin", &a.0).cmp(&(b.0 != "builtin", &b.0)));
        out
    }

    /// Sets the prices of provider `name`'s models (replacing any it had).
    pub fn set_prices(&mut self, name: &str, prices: &[(String, agency_core::Price)]) {
        self.prices
            .insert(name.to_string(), prices.iter().cloned().collect());
    }

    /// What a call of `model` costs per token; the built-in models are free. `None` when no
    /// price is known.
    pub fn price(&self, model: &ModelRef) -> Option<agency_core::Price> {
        if model.provider == "builtin" {
            return Some(agency_core::Price::default());
        }
        self.prices.get(&model.provider)?.get(&model.model).copied()
    }

    pub fn resolve(&self, model: &ModelRef) -> Option<Arc<dyn Model>> {
        self.by_name.get(&model.provider)?.model(&model.model)
    }

    pub fn serves(&self, model: &ModelRef) -> bool {
        self.resolve(model).is_some()
    }
}

/// A few models of the default providers, offered where a model is typed (their specs price
/// none, so nothing else names them).
pub fn suggested_models(provider: &str) -> &'static [&'static str] {
    match provider {
        "openai" => &["gpt-4o-mini", "gpt-4.1-mini", "gpt-4o"],
        "anthropic" => &["claude-sonnet-4-5", "claude-haiku-4-5"],
        _ => &[],
    }
}

/// The providers a server has unless its configuration says otherwise: `openai` and
/// `anthropic` (keys from `OPENAI_API_KEY` and `ANTHROPIC_API_KEY`) and `ollama` on this machine.
pub fn default_specs() -> Vec<ProviderSpec> {
    let spec = |name: &str, kind, base_url: Option<&str>, env: Option<&str>| ProviderSpec {
        name: name.into(),
        kind,
        base_url: base_url.map(Into::into),
        api_key_env: env.map(Into::into),
        max_concurrency: None,
        requests_per_minute: None,
        prices: Vec::new(),
    };
    vec![
        spec("openai", ProviderKind::OpenAi, None, Some("OPENAI_API_KEY")),
        spec(
            "anthropic",
            ProviderKind::Anthropic,
            None,
            Some("ANTHROPIC_API_KEY"),
        ),
        spec(
            "ollama",
            ProviderKind::OpenAi,
            Some("http://127.0.0.1:11434/v1"),
            None,
        ),
    ]
}

/// Builds the provider a spec describes, with its key already found, on `settings` (its own
/// limits on top); `origin` says who wrote the spec, which decides what it may reach.
pub fn from_spec(
    spec: &ProviderSpec,
    api_key: Option<SecretString>,
    settings: &http::HttpSettings,
    origin: http::Origin,
) -> Result<Arc<dyn Provider>, http::ProviderError> {
    let mut settings = settings.clone();
    if let Some(n) = spec.max_concurrency {
        settings.max_concurrency = usize::try_from(n).unwrap_or(usize::MAX);
    }
    settings.requests_per_minute = spec.requests_per_minute.and_then(std::num::NonZeroU32::new);
    Ok(match spec.kind {
        ProviderKind::OpenAi => {
            let mut config = openai::OpenAiConfig::new(spec.base_url.as_deref(), api_key);
            config.http = settings;
            config.origin = origin;
            Arc::new(openai::OpenAi::new(&spec.name, config)?)
        }
        ProviderKind::Anthropic => {
            let mut config = anthropic::AnthropicConfig::new(spec.base_url.as_deref(), api_key);
            config.http = settings;
            config.origin = origin;
            Arc::new(anthropic::Anthropic::new(&spec.name, config)?)
        }
    })
}

/// `builtin/rules`.
struct Builtin;

impl Provider for Builtin {
    fn model(&self, name: &str) -> Option<Arc<dyn Model>> {
        (name == "rules").then(|| Arc::new(RulesModel) as Arc<dyn Model>)
    }
}

/// The deterministic, free model: follows the agent's ad-lib rules (see [`agency_core::rules`]).
pub struct RulesModel;

#[async_trait]
impl Model for RulesModel {
    async fn complete(&self, request: ModelRequest) -> Result<Completion, ModelError> {
        let agent = request.agent().ok_or_else(|| ModelError::Failed {
            provider: "builtin".into(),
            message: format!("no agent #{}", request.agent.get()),
        })?;
        Ok(
            match rules::respond(agent, &request.context, &request.roster) {
                rules::Response::Send(envelopes) => Completion {
                    text: protocol::format_reply(
                        request.agency.protocol,
                        &envelopes,
                        &request.roster,
                    ),
                    ..Completion::default()
                },
                rules::Response::Call(calls) => Completion {
                    tool_calls: calls,
                    ..Completion::default()
                },
            },
        )
    }

    /// Without rules to follow, what the person said since its last answer, back.
    async fn chat(&self, request: ChatRequest) -> Result<Completion, ModelError> {
        Ok(Completion {
            text: rules::echo(request.messages.iter().map(|m| (m.role, m.text.as_str()))),
            ..Completion::default()
        })
    }

    /// Deterministic answers (see [`agency_core::memory::MemoryTask::rules_answer`]), so the
    /// memory cycle runs offline and the same every time.
    async fn complete_task(
        &self,
        _request: ModelRequest,
        task: &agency_core::memory::MemoryTask,
    ) -> Result<Completion, ModelError> {
        Ok(Completion {
            text: task.rules_answer(),
            ..Completion::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agency_core::{
        AgencyDraft, AgencyId, AgentDraft, ConversationId, MessageId, Role, RuleDraft,
    };

    #[test]
    fn a_provider_without_the_key_its_api_wants_is_marked_missing() {
        let specs = default_specs();
        let by = |n: &str| specs.iter().find(|s| s.name == n).unwrap();
        assert_eq!(KeyState::of(by("openai"), false), KeyState::Missing);
        assert_eq!(KeyState::of(by("openai"), true), KeyState::Present);
        assert_eq!(KeyState::of(by("anthropic"), false), KeyState::Missing);
        // A server on one's own machine needs none unless its spec names one.
        assert_eq!(KeyState::of(by("ollama"), false), KeyState::NotNeeded);
        let mut named = by("ollama").clone();
        named.api_key_env = Some("OLLAMA_KEY".into());
        assert_eq!(KeyState::of(&named, false), KeyState::Missing);
        // The catalog: builtin first, suggestions where no spec prices a model.
        let mut p = Providers::builtin();
        p.describe(
            "openai",
            ProviderInfo {
                kind: Some(agency_core::ProviderKind::OpenAi),
                key: KeyState::Missing,
                models: Vec::new(),
            },
        );
        p.insert("openai", Arc::new(Builtin));
        let names: Vec<String> = p.catalog().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["builtin", "openai"]);
        assert_eq!(
            p.catalog()[1].1.models,
            ["gpt-4o-mini", "gpt-4.1-mini", "gpt-4o"]
        );
    }

    fn request(protocol: &str) -> ModelRequest {
        let agency = AgencyDraft {
            name: "t".into(),
            protocol: protocol.into(),
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
                    model: "builtin/rules".into(),
                    rules: vec![RuleDraft {
                        when: "boss".into(),
                        action: "did {{message}}".into(),
                        send_to: vec!["boss".into()],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
        .validate(AgencyId::new(), "local", &|_| true)
        .unwrap();
        let conversation = ConversationId::new();
        let msg = |seq, kind, from: Option<u32>, text: &str, included| Message {
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
            included,
            created_at: chrono::DateTime::UNIX_EPOCH,
        };
        let context = vec![
            msg(0, MessageKind::System, None, "You are dev.", true),
            msg(1, MessageKind::Delivery, Some(1), "build \"it\"", true),
            msg(
                2,
                MessageKind::Reply,
                Some(2),
                r#"{"to":1,"context":"done"}"#,
                true,
            ),
            msg(3, MessageKind::Delivery, Some(1), "left out", false),
            msg(
                4,
                MessageKind::Correction,
                None,
                "Your reply could not be delivered",
                true,
            ),
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

    #[test]
    fn chat_frames_deliveries_and_skips_excluded_messages() {
        let chat = request("json").chat();
        assert_eq!(
            chat,
            vec![
                ChatMessage::new(Role::System, "You are dev."),
                ChatMessage::new(Role::User, r#"{"from":1,"context":"build \"it\""}"#),
                ChatMessage::new(Role::Assistant, r#"{"to":1,"context":"done"}"#),
                ChatMessage::new(Role::User, "Your reply could not be delivered"),
            ]
        );
        assert_eq!(
            request("directives").chat()[1],
            ChatMessage::new(Role::User, "FROM boss: build \"it\"")
        );
    }

    #[test]
    fn chat_carries_calls_and_results_and_answers_calls_left_without_one() {
        use agency_core::tool::{ToolCall, ToolResult};
        let mut req = request("json");
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "files/read".into(),
            arguments: r#"{"path":"a"#.into(),
        };
        let result = |id: &str, is_error| {
            Some(ToolPart::Result(ToolResult {
                call_id: id.into(),
                name: "files/read".into(),
                is_error,
            }))
        };
        let context = Arc::make_mut(&mut req.context);
        context.truncate(2);
        let template = context[1].clone();
        let mut add = |kind, text: &str, tool| {
            let mut m = template.clone();
            m.seq = context.len() as i64;
            m.kind = kind;
            m.text = text.into();
            m.tool = tool;
            context.push(m);
        };
        add(
            MessageKind::Reply,
            "",
            Some(ToolPart::Calls(vec![call("a"), call("b")])),
        );
        add(MessageKind::ToolResult, "A", result("a", false));
        add(MessageKind::Delivery, "more", None);
        let chat = req.chat();
        let calls = ChatMessage {
            images: Vec::new(),
            role: Role::Assistant,
            text: String::new(),
            tool: Some(ToolPart::Calls(vec![call("a"), call("b")])),
        };
        assert_eq!(
            chat[2..],
            [
                calls,
                ChatMessage {
                    images: Vec::new(),
                    role: Role::Tool,
                    text: "A".into(),
                    tool: result("a", false),
                },
                ChatMessage {
                    images: Vec::new(),
                    role: Role::Tool,
                    text: tools::MISSING_RESULT.into(),
                    tool: result("b", true),
                },
                ChatMessage::new(Role::User, r#"{"from":1,"context":"more"}"#),
            ]
        );
        assert_eq!(chat.len(), 6);
    }

    #[tokio::test]
    async fn the_rules_model_calls_tools_its_rules_call() {
        let mut req = request("directives");
        Arc::make_mut(&mut req.context).truncate(2);
        let mut agency = (*req.agency).clone();
        let dev = agency.agents.iter_mut().find(|a| a.name == "dev").unwrap();
        let draft = AgencyDraft {
            name: "t".into(),
            protocol: "directives".into(),
            manager: "dev".into(),
            agents: vec![AgentDraft {
                id: Some(2),
                name: "dev".into(),
                model: "builtin/rules".into(),
                tools: vec!["files/read".into()],
                rules: vec![RuleDraft {
                    when: "any".into(),
                    action: "got {{result}}".into(),
                    send_to: vec!["user".into()],
                    call: Some("files/read".into()),
                    with: Some(serde_json::json!({"path": "{{message}}"})),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
        .validate(AgencyId::new(), "local", &|_| true)
        .unwrap();
        *dev = draft.agents[0].clone();
        req.agency = Arc::new(agency);
        let done = RulesModel.complete(req).await.unwrap();
        assert_eq!(done.text, "");
        assert_eq!(done.tool_calls.len(), 1);
        assert_eq!(done.tool_calls[0].name, "files/read");
        assert_eq!(done.tool_calls[0].arguments, r#"{"path":"build \"it\""}"#);
    }

    #[tokio::test]
    async fn the_rules_model_answers_in_the_protocol() {
        let providers = Providers::builtin();
        let model = providers
            .resolve(&ModelRef::parse("builtin/rules").unwrap())
            .unwrap();
        assert!(!providers.serves(&ModelRef::parse("builtin/gpt").unwrap()));
        assert!(!providers.serves(&ModelRef::parse("openai/gpt-4o").unwrap()));
        let mut req = request("directives");
        // The context up to the boss's first message, not yet answered.
        Arc::make_mut(&mut req.context).truncate(2);
        let done = model.complete(req).await.unwrap();
        assert_eq!(done.text, "TO boss: did build \"it\"");
        assert_eq!(done.usage, Usage::default());
    }
}
