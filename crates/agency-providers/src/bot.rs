//! Webhook bots (spec 003): an agent behind an HTTP endpoint of its owner's. A call POSTs the
//! spec's request (`context`, `conversation`, `message`, `users`) with the bot's caller key in
//! `X-CALLER-KEY`, and the bot answers `{"message": "..."}`.
//!
//! Endpoints are someone else's URLs called from our server, so a [`BotClient`] refuses
//! loopback, private, link-local and other non-public addresses — checked on the URL, on every
//! DNS answer (a name that later resolves elsewhere is caught at connect time), with no proxy
//! and no redirects in between — unless it is built to allow them (tests, a bot on the same
//! machine, evaluation against one's own bots).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::http::{Endpoint, HttpSettings, ProviderError, RetryHook};

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

/// A bot's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotReply {
    pub message: String,
}

/// The caller-key header.
pub const CALLER_KEY_HEADER: &str = "x-caller-key";

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
        requests_per_minute: None,
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
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver { allow_private }))
            .build()
            .map_err(|e| ProviderError::Config(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self {
            client,
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
        if self.allow_private {
            return Ok(url);
        }
        let host = url
            .host_str()
            .ok_or_else(|| ProviderError::Config("the endpoint has no host".into()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return refuse_private(ip).map(|()| url);
        }
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| ProviderError::Config(format!("cannot resolve `{host}`: {e}")))?;
        for addr in addrs {
            refuse_private(addr.ip())?;
        }
        Ok(url)
    }

    /// Calls the bot at `endpoint` and returns its message. Retries 429, 5xx and lost
    /// connections; a malformed answer is an error, not a retry.
    pub async fn call(
        &self,
        endpoint: &str,
        caller_key: &SecretString,
        request: &BotRequest,
        on_retry: Option<&RetryHook>,
    ) -> Result<String, ProviderError> {
        let url = self.check_endpoint(endpoint).await?;
        let endpoint =
            Endpoint::with_client(url.as_str(), self.client.clone(), self.settings.clone());
        let body = serde_json::to_value(request)
            .map_err(|e| ProviderError::Config(format!("cannot encode the request: {e}")))?;
        let key = (CALLER_KEY_HEADER, caller_key.expose_secret().to_string());
        let answer = endpoint
            .post_observed("", std::slice::from_ref(&key), &body, on_retry)
            .await?;
        let bytes = endpoint.body(answer).await?;
        let reply: BotReply = serde_json::from_slice(&bytes).map_err(|e| {
            let start: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
            ProviderError::Malformed(format!(
                "expected {{\"message\": \"...\"}} ({e}); the bot answered `{start}`"
            ))
        })?;
        if reply.message.trim().is_empty() {
            return Err(ProviderError::Malformed(
                "the bot's message is empty".into(),
            ));
        }
        Ok(reply.message)
    }
}

/// An endpoint URL as it may be registered: `http` or `https`, with a host, no credentials.
pub fn parse_endpoint(endpoint: &str) -> Result<reqwest::Url, ProviderError> {
    let url = reqwest::Url::parse(endpoint.trim())
        .map_err(|e| ProviderError::Config(format!("`{endpoint}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ProviderError::Config(format!(
            "the endpoint must be an http or https URL, not `{}:`",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ProviderError::Config("the endpoint has no host".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ProviderError::Config(
            "the endpoint must not carry credentials; the bot is called with its caller key".into(),
        ));
    }
    Ok(url)
}

fn refuse_private(ip: IpAddr) -> Result<(), ProviderError> {
    if is_public(ip) {
        Ok(())
    } else {
        Err(ProviderError::Config(format!(
            "the endpoint's address {ip} is loopback or private, which this server does not \
             call (its operator can allow it with --allow-private-bots)"
        )))
    }
}

/// Whether `ip` is on the public internet: not loopback, private, link-local, shared (CGNAT),
/// unspecified, broadcast, multicast, documentation or benchmarking space.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (first & 0xffc0) == 0xfec0 // site-local fec0::/10
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || v6 == Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 1))
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared 100.64.0.0/10
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18.0.0/15
        || a >= 240)
}

/// The system resolver, without the addresses a client refuses.
struct GuardedResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                let e = format!("`{host}` has no address this server may call");
                return Err(e.into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}
