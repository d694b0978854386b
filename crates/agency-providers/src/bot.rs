//! Webhook bots (spec 003): an agent behind an HTTP endpoint of its owner's. A call POSTs the
//! spec's request (`context`, `conversation`, `message`, `users`) with the bot's caller key in
//! `X-CALLER-KEY`, and the bot answers `{"message": "..."}`.
//!
//! Endpoints are someone else's URLs called from our server, so a [`BotClient`] calls only
//! public addresses (see [`crate::http::net`]) unless it is built to allow others (tests, a bot on
//! the same machine, evaluation against one's own bots).

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::http::{CALLER_KEY_HEADER, Endpoint, HttpSettings, ProviderError, RetryHook, net};

/// A message as a bot sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotMessage {
    /// The id of the user who sent it, or `"BOT"` for the bot's own messages.
    pub from: String,
    /// The ids of the users tagged in it.
    #[serde(default)]
    pub tagged: Vec<String>,
    pub id: String,
    pub text: String,
    /// RFC 3339.
    pub timestamp: String,
}

/// An earlier exchange with the bot: the messages that asked it, and its reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotConversation {
    pub id: String,
    pub messages: Vec<BotMessage>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotUser {
    pub id: String,
    pub username: String,
}

/// The body of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotRequest {
    /// Earlier messages relevant to the request, oldest first.
    pub context: Vec<BotMessage>,
    /// Earlier exchanges with this bot, oldest first.
    #[serde(default)]
    pub conversation: Vec<BotConversation>,
    /// The message that tagged the bot or replied to it.
    pub message: BotMessage,
    /// The users the message mentions.
    #[serde(default)]
    pub users: Vec<BotUser>,
}

/// What `agency eval` sends a bot: the request a room sends (`context`, `message`, `users`),
/// with `conversation` as spec 003's evaluation gives it — the conversation so far, every
/// message up to and including the one to answer — so that a bot written to either section of
/// the spec sees the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalRequest {
    pub context: Vec<BotMessage>,
    pub conversation: Vec<BotMessage>,
    pub message: BotMessage,
    pub users: Vec<BotUser>,
}

/// A bot's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotReply {
    pub message: String,
}

/// Patience with bots: they answer within seconds or not at all.
pub fn default_settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(5),
        first_byte_timeout: Duration::from_secs(30),
        total_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(15),
        max_retries: 2,
        backoff_base: Duration::from_millis(250),
        backoff_max: Duration::from_secs(5),
        max_concurrency: 64,
        max_answer_bytes: 1 << 20,
        ..HttpSettings::default()
    }
}

/// Calls bots.
#[derive(Clone)]
pub struct BotClient {
    client: reqwest::Client,
    settings: HttpSettings,
    allow_private: bool,
}

impl std::fmt::Debug for BotClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotClient")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl BotClient {
    /// `allow_private`: whether endpoints on loopback and private networks may be called.
    pub fn new(settings: HttpSettings, allow_private: bool) -> Result<Self, ProviderError> {
        Ok(Self {
            client: crate::http::client_for(
                crate::http::Origin::Account { allow_private },
                settings.connect_timeout,
            )?,
            settings,
            allow_private,
        })
    }

    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Whether `endpoint` may be registered: an `http(s)` URL with a host, and no address this
    /// client refuses (a literal one, or what the name resolves to now).
    pub async fn check_endpoint(&self, endpoint: &str) -> Result<reqwest::Url, ProviderError> {
        let url = parse_endpoint(endpoint)?;
        if !self.allow_private {
            net::check_url(&url).await?;
        }
        Ok(url)
    }

    /// Calls the bot at `endpoint` and returns its message. Retries 429, 5xx and lost
    /// connections; a malformed answer is asked for once more, then is the error.
    pub async fn call(
        &self,
        endpoint: &str,
        caller_key: &SecretString,
        request: &impl Serialize,
        on_retry: Option<&RetryHook>,
    ) -> Result<String, ProviderError> {
        let url = self.check_endpoint(endpoint).await?;
        let endpoint =
            Endpoint::with_client(url.as_str(), self.client.clone(), self.settings.clone());
        let body = serde_json::to_value(request)
            .map_err(|e| ProviderError::Config(format!("cannot encode the request: {e}")))?;
        let key = (CALLER_KEY_HEADER, caller_key.expose_secret().to_string());
        let read = |answer| async {
            let bytes = endpoint.body(answer).await?;
            let reply: BotReply = serde_json::from_slice(&bytes).map_err(|e| {
                let start: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
                ProviderError::Malformed(format!(
                    "expected {{\"message\": \"...\"}} ({e}); the bot answered `{start}`"
                ))
            })?;
            if reply.message.trim().is_empty() {
                return Err(ProviderError::Unusable("the bot's message is empty".into()));
            }
            Ok(reply.message)
        };
        endpoint
            .call("", std::slice::from_ref(&key), &body, on_retry, false, read)
            .await
    }
}

impl BotClient {
    /// POSTs `body` to an endpoint of an account's (a webhook) with `headers`: any 2xx answer
    /// is taken, its body unread. Retries 429, 5xx and lost connections.
    pub async fn notify(
        &self,
        endpoint: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
    ) -> Result<(), ProviderError> {
        let url = self.check_endpoint(endpoint).await?;
        let endpoint =
            Endpoint::with_client(url.as_str(), self.client.clone(), self.settings.clone());
        endpoint
            .call("", headers, body, None, false, |_| async { Ok(()) })
            .await
    }
}

/// An endpoint URL as it may be registered: `http` or `https`, with a host, no credentials
/// (the bot is called with its caller key).
pub fn parse_endpoint(endpoint: &str) -> Result<reqwest::Url, ProviderError> {
    net::parse_url(endpoint, "the endpoint")
}
