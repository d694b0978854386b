//! What every HTTP provider shares: timeouts, retries with exponential backoff and jitter that
//! honour `Retry-After`, a concurrency limit and a request rate per provider, server-sent
//! events with an idle timeout, and the provider's own error message.

use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use reqwest::Response;
use serde_json::Value;
use tokio::sync::Semaphore;

mod error;
pub mod net;

pub use error::{ProviderError, WHOLE_CALL};

/// The header a webhook bot's caller key travels in (spec 003; see `crate::bot`).
pub const CALLER_KEY_HEADER: &str = "x-caller-key";

/// The headers that carry credentials: kept out of header compression tables and debug output.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "x-api-key", CALLER_KEY_HEADER];

/// Limits and patience for one provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// Until the response's headers of a call answered whole (which a provider sends once the
    /// answer is written).
    pub first_byte_timeout: Duration,
    /// Until the response's headers of a streamed call, which a provider sends at once; a
    /// server that accepts the connection and says nothing is given up on sooner. (A stream's
    /// first event has its own `idle_timeout`.)
    pub stream_first_byte_timeout: Duration,
    /// The whole call, retries and reading the answer included.
    pub total_timeout: Duration,
    /// Longest silence inside a stream.
    pub idle_timeout: Duration,
    /// Retries after the first attempt, on 429, 5xx and connection failures.
    pub max_retries: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// Calls in flight at once; more wait their turn.
    pub max_concurrency: usize,
    /// Calls started per minute; more wait their turn.
    pub requests_per_minute: Option<NonZeroU32>,
    /// The most an answer may hold: a body, an error body, or a whole stream. A provider's
    /// answer is untrusted; past this it is an error, not a process out of memory.
    pub max_answer_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            stream_first_byte_timeout: Duration::from_secs(30),
            total_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            max_concurrency: 16,
            requests_per_minute: None,
            max_answer_bytes: 16 << 20,
        }
    }
}

/// A provider call about to be tried again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The attempt about to start: 2 for the first retry.
    pub attempt: u32,
    /// The wait before it (backoff, or the provider's `Retry-After`).
    pub wait: Duration,
    /// Why, as [`ProviderError::kind`] says it: no provider text, safe to show anyone.
    pub reason: String,
}

/// Told of each retry of a model call (see `ModelRequest::on_retry`). Called on the caller's
/// task, before the wait: it must not block.
#[derive(Clone)]
pub struct RetryHook(Arc<dyn Fn(Retry) + Send + Sync>);

impl RetryHook {
    pub fn new(f: impl Fn(Retry) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub fn call(&self, retry: Retry) {
        (self.0)(retry);
    }
}

impl std::fmt::Debug for RetryHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryHook")
    }
}

/// The process's HTTP client for a connect timeout, built on first use: the operator's
/// (see [`client_for`]).
pub fn shared_client(connect_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    client_for(Origin::Operator, connect_timeout)
}

/// The process's HTTP client for URLs named by `origin` (an account's are guarded, see
/// [`net::guard`]) and a connect timeout, built on first use. Building one reads the
/// system's root certificates (6–20 ms measured here, blocking the thread), and every
/// provider an agency declares is built again when the agency changes: they all share one
/// client, and with it its pool of connections.
pub fn client_for(
    origin: Origin,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ProviderError> {
    type Clients = Vec<((Origin, Duration), reqwest::Client)>;
    static CLIENTS: std::sync::Mutex<Clients> = std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = (origin, connect_timeout);
    if let Some((_, client)) = clients.iter().find(|(k, _)| *k == key) {
        return Ok(client.clone());
    }
    let mut builder = reqwest::Client::builder().connect_timeout(connect_timeout);
    if let Origin::Account { allow_private } = origin {
        builder = net::guard(builder, allow_private);
    }
    let client = builder
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build an HTTP client: {e}")))?;
    clients.push((key, client.clone()));
    Ok(client)
}

/// Who named an endpoint, which decides what it may reach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Origin {
    /// The server's configuration: trusted, called as written.
    #[default]
    Operator,
    /// An account (its agency file or draft): public addresses only unless `allow_private`.
    Account { allow_private: bool },
}

/// One provider's HTTP endpoint, with its limits.
pub struct Endpoint {
    base_url: String,
    client: reqwest::Client,
    settings: HttpSettings,
    /// Whether an error answer's own message is passed on. Off for endpoints an account
    /// named: what reaches the account is our wording of the status, not the body of
    /// whatever answered.
    quote_errors: bool,
    permits: Arc<Semaphore>,
    rate: Option<Arc<DefaultDirectRateLimiter>>,
    /// Each path's URL, parsed once (parsing showed in the endpoint's profile).
    urls: std::sync::Mutex<std::collections::HashMap<String, reqwest::Url>>,
}

/// A successful response, holding its place in the concurrency limit until dropped.
pub struct Answer {
    pub response: Response,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Endpoint {
    /// An endpoint on the process's client for its connect timeout (see [`shared_client`]).
    pub fn new(base_url: &str, settings: HttpSettings) -> Result<Self, ProviderError> {
        let client = shared_client(settings.connect_timeout)?;
        Ok(Self::with_client(base_url, client, settings))
    }

    /// An endpoint named by `origin`: the operator's as configured; an account's called only
    /// on public addresses unless the operator allows others (see [`net`]), with its
    /// errors told in our words.
    pub fn named_by(
        origin: Origin,
        base_url: &str,
        settings: HttpSettings,
    ) -> Result<Self, ProviderError> {
        let Origin::Account { allow_private } = origin else {
            return Self::new(base_url, settings);
        };
        let url = net::parse_url(base_url, "the base URL")?;
        if !allow_private {
            net::refuse_literal(&url)?;
        }
        let client = client_for(origin, settings.connect_timeout)?;
        let mut endpoint = Self::with_client(base_url, client, settings);
        endpoint.quote_errors = false;
        Ok(endpoint)
    }

    /// An endpoint on a client of the caller's (its own resolver, redirect policy, ...); the
    /// client's connect timeout is the caller's to set.
    pub fn with_client(base_url: &str, client: reqwest::Client, settings: HttpSettings) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            client,
            permits: Arc::new(Semaphore::new(settings.max_concurrency.max(1))),
            rate: settings
                .requests_per_minute
                .map(|n| Arc::new(RateLimiter::direct(Quota::per_minute(n)))),
            settings,
            quote_errors: true,
            urls: std::sync::Mutex::default(),
        }
    }

    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// One call: POSTs `body` to `path` with `headers` and reads the answer with `read`, all
    /// within the total timeout. What is worth retrying is retried with backoff (429, 5xx,
    /// connection failures, no headers in time — `streamed` calls wait less for them), each
    /// retry told to `on_retry`; an answer that came malformed, cut short, stalled or broken
    /// off is asked for once more, as one of those attempts. Waits for a place under the
    /// concurrency and rate limits.
    pub async fn call<T, F>(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &Value,
        on_retry: Option<&RetryHook>,
        streamed: bool,
        mut read: impl FnMut(Answer) -> F,
    ) -> Result<T, ProviderError>
    where
        F: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let call = async {
            let url = self.url(path)?;
            let mut attempt = 0;
            let mut asked_again = false;
            loop {
                let answer = self
                    .post(&url, headers, body, on_retry, streamed, &mut attempt)
                    .await?;
                match read(answer).await {
                    Err(e)
                        if e.worth_asking_again()
                            && !asked_again
                            && attempt < self.settings.max_retries =>
                    {
                        asked_again = true;
                        tracing::warn!(%url, attempt = attempt + 1, error = %e, "asking a provider again");
                        announce(on_retry, attempt, Duration::ZERO, &e);
                        attempt += 1;
                    }
                    done => return done,
                }
            }
        };
        tokio::time::timeout(self.settings.total_timeout, call)
            .await
            .map_err(|_| ProviderError::Timeout(WHOLE_CALL))?
    }

    /// The first successful response, `attempt` counting the tries.
    async fn post(
        &self,
        url: &reqwest::Url,
        headers: &[(&str, String)],
        body: &Value,
        on_retry: Option<&RetryHook>,
        streamed: bool,
        attempt: &mut u32,
    ) -> Result<Answer, ProviderError> {
        let first_byte = if streamed {
            self.settings.stream_first_byte_timeout
        } else {
            self.settings.first_byte_timeout
        };
        loop {
            let permit = self
                .permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| ProviderError::Config("the provider is shutting down".into()))?;
            if let Some(rate) = &self.rate {
                rate.until_ready().await;
            }
            let mut request = self.client.post(url.clone()).json(body);
            for (name, value) in headers {
                let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                    ProviderError::Config(format!(
                        "the `{name}` header holds characters a header cannot carry"
                    ))
                })?;
                value.set_sensitive(CREDENTIAL_HEADERS.contains(name));
                request = request.header(*name, value);
            }
            // The trace goes on at the provider, the bot or the MCP server (when tracing is on).
            if agency_telemetry::tracing_on() {
                let mut context = reqwest::header::HeaderMap::new();
                agency_telemetry::propagate::inject(&mut context);
                request = request.headers(context);
            }
            let error = match tokio::time::timeout(first_byte, request.send()).await {
                Err(_) => ProviderError::Timeout("the first byte"),
                Ok(Err(e)) if e.is_timeout() => ProviderError::Timeout("the connection"),
                Ok(Err(e)) => ProviderError::Connection(error_chain(&e)),
                Ok(Ok(response)) if response.status().is_success() => {
                    return Ok(Answer {
                        response,
                        _permit: permit,
                    });
                }
                Ok(Ok(response)) => status_error(response, self.quote_errors).await,
            };
            drop(permit);
            if !error.retryable() || *attempt >= self.settings.max_retries {
                return Err(error);
            }
            let wait = self.backoff(*attempt, &error);
            tracing::warn!(%url, attempt = *attempt + 1, wait_ms = wait.as_millis() as u64, %error, "retrying a provider call");
            announce(on_retry, *attempt, wait, &error);
            tokio::time::sleep(wait).await;
            *attempt += 1;
        }
    }

    fn url(&self, path: &str) -> Result<reqwest::Url, ProviderError> {
        if let Ok(urls) = self.urls.lock()
            && let Some(url) = urls.get(path)
        {
            return Ok(url.clone());
        }
        let text = format!("{}{path}", self.base_url);
        let url = reqwest::Url::parse(&text)
            .map_err(|e| ProviderError::Config(format!("`{text}` is not a URL: {e}")))?;
        if let Ok(mut urls) = self.urls.lock() {
            urls.insert(path.to_string(), url.clone());
        }
        Ok(url)
    }

    /// Full jitter: a random wait up to base · 2^attempt, capped; a `Retry-After` the provider
    /// sent wins (capped too).
    fn backoff(&self, attempt: u32, error: &ProviderError) -> Duration {
        if let ProviderError::Status {
            retry_after: Some(wait),
            ..
        } = error
        {
            return (*wait).min(self.settings.backoff_max);
        }
        let ceiling = self
            .settings
            .backoff_base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.settings.backoff_max);
        ceiling.mul_f64(fastrand::f64())
    }

    /// The whole body of a non-streamed answer; a silence longer than the idle timeout is an
    /// error, not a hang, and so is a body past [`HttpSettings::max_answer_bytes`].
    pub async fn body(&self, mut answer: Answer) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout(self.settings.idle_timeout, answer.response.chunk()).await {
                Err(_) => return Err(ProviderError::Timeout("the rest of the answer")),
                Ok(Err(e)) => return Err(ProviderError::Connection(error_chain(&e))),
                Ok(Ok(None)) => return Ok(body),
                Ok(Ok(Some(bytes))) => {
                    let max = self.settings.max_answer_bytes;
                    if body.len() + bytes.len() > max {
                        return Err(ProviderError::TooLarge(max));
                    }
                    body.extend_from_slice(&bytes);
                }
            }
        }
    }

    /// The server-sent events of a streamed answer; a silence longer than the idle timeout is
    /// an error, not a hang.
    pub fn events(
        &self,
        answer: Answer,
    ) -> Pin<Box<dyn Stream<Item = Result<SseEvent, ProviderError>> + Send>> {
        let idle = self.settings.idle_timeout;
        let max_bytes = self.settings.max_answer_bytes;
        let Answer { response, _permit } = answer;
        // The stream as a whole is bounded, and with it the event the parser is buffering.
        let mut seen = 0usize;
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| ProviderError::Connection(error_chain(&e)))?;
            seen += chunk.len();
            if seen > max_bytes {
                return Err(ProviderError::TooLarge(max_bytes));
            }
            Ok(chunk)
        });
        let mut inner = bytes.eventsource();
        Box::pin(async_stream(move |tx| async move {
            let _permit = _permit;
            loop {
                match tokio::time::timeout(idle, inner.next()).await {
                    Err(_) => {
                        let _ = tx
                            .send(Err(ProviderError::Timeout("the stream to continue")))
                            .await;
                        return;
                    }
                    Ok(None) => return,
                    Ok(Some(Err(e))) => {
                        let error = match e {
                            eventsource_stream::EventStreamError::Transport(e) => e,
                            other => {
                                ProviderError::Malformed(format!("broken event stream: {other}"))
                            }
                        };
                        let _ = tx.send(Err(error)).await;
                        return;
                    }
                    Ok(Some(Ok(event))) => {
                        let event = SseEvent {
                            event: event.event,
                            data: event.data,
                        };
                        if tx.send(Ok(event)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }))
    }
}

/// One server-sent event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`message` when absent).
    pub event: String,
    pub data: String,
}

/// A stream fed by a task, so the idle timeout and the permit live with the stream.
fn async_stream<F, Fut>(f: F) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<SseEvent, ProviderError>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let task = tokio::spawn(f(tx));
    futures::stream::poll_fn(move |cx| {
        let item = rx.poll_recv(cx);
        if let std::task::Poll::Ready(None) = item {
            task.abort();
        }
        item
    })
}

/// Told to `on_retry`: attempt `attempt + 2` starts after `wait`, because of `error`.
fn announce(on_retry: Option<&RetryHook>, attempt: u32, wait: Duration, error: &ProviderError) {
    if let Some(hook) = on_retry {
        hook.call(Retry {
            attempt: attempt + 2,
            wait,
            reason: error.kind(),
        });
    }
}

/// The most of an error body read for its message.
const MAX_ERROR_BODY: usize = 64 << 10;

/// The error of a non-2xx response: with `quote`, the provider's own message
/// (`{"error": {"message"}}` in both OpenAI's and Anthropic's bodies), or the start of the
/// body; without, our words for the status.
async fn status_error(mut response: Response, quote: bool) -> ProviderError {
    let status = response.status();
    let retry_after = retry_after(&response);
    if !quote {
        return ProviderError::Status {
            status: status.as_u16(),
            message: our_wording(status.as_u16()).into(),
            retry_after,
        };
    }
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(bytes)) => body.extend_from_slice(&bytes),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&body);
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| {
            let t: String = text.chars().take(300).collect();
            if t.trim().is_empty() {
                status.canonical_reason().unwrap_or("error").to_string()
            } else {
                t
            }
        });
    ProviderError::Status {
        status: status.as_u16(),
        message,
        retry_after,
    }
}

/// What an error status means, in our words: what an account is told of an endpoint it named.
fn our_wording(status: u16) -> &'static str {
    match status {
        400 | 422 => "the provider refused the request",
        401 | 403 => "the provider refused the key (check the key stored for it)",
        404 => "the provider has no such model or path (check the model and the base URL)",
        408 | 504 => "the provider timed out",
        413 => "the request is too large for the provider",
        429 => "the provider is rate limiting these calls",
        500..=599 => "the provider failed",
        _ => "the provider answered with an error",
    }
}

/// `Retry-After` in seconds or as an HTTP date.
fn retry_after(response: &Response) -> Option<Duration> {
    let value = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}
