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

/// Limits and patience for one provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// Until the response's headers (a stream's first event has its own `idle_timeout`).
    pub first_byte_timeout: Duration,
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
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            max_concurrency: 16,
            requests_per_minute: None,
        }
    }
}

/// What `Timeout` waited for when the whole call ran out of time (not worth a retry).
pub const WHOLE_CALL: &str = "the whole call";

/// Why a provider call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with an error status; `message` is its own.
    #[error("HTTP {status}: {message}")]
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("could not reach the provider: {0}")]
    Connection(String),
    /// The answer was not in the provider's format.
    #[error("malformed answer: {0}")]
    Malformed(String),
    #[error("{0}")]
    Config(String),
}

impl ProviderError {
    /// What went wrong in a few words, without the provider's own message: `HTTP 503`,
    /// `timeout`, `connection failed`, ...
    pub fn kind(&self) -> String {
        match self {
            ProviderError::Status { status, .. } => format!("HTTP {status}"),
            ProviderError::Timeout(_) => "timeout".into(),
            ProviderError::Connection(_) => "connection failed".into(),
            ProviderError::Malformed(_) => "malformed answer".into(),
            ProviderError::Config(_) => "configuration".into(),
        }
    }

    /// Worth another try: the same request may succeed later.
    pub fn retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Timeout(what) => *what != WHOLE_CALL,
            ProviderError::Connection(_) => true,
            ProviderError::Malformed(_) | ProviderError::Config(_) => false,
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

/// The process's HTTP client for a connect timeout, built on first use. Building one reads
/// the system's root certificates (6–20 ms measured here, blocking the thread), and every
/// provider an agency declares is built again when the agency changes: they all share one
/// client, and with it its pool of connections.
pub fn shared_client(connect_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    static CLIENTS: std::sync::Mutex<Vec<(Duration, reqwest::Client)>> =
        std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, client)) = clients.iter().find(|(t, _)| *t == connect_timeout) {
        return Ok(client.clone());
    }
    let client = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build an HTTP client: {e}")))?;
    clients.push((connect_timeout, client.clone()));
    Ok(client)
}

/// One provider's HTTP endpoint, with its limits.
pub struct Endpoint {
    base_url: String,
    client: reqwest::Client,
    settings: HttpSettings,
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
            urls: std::sync::Mutex::default(),
        }
    }

    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// POSTs `body` to `path` with `headers`, retrying what is worth retrying, and returns the
    /// first successful response. Waits for a place under the concurrency and rate limits.
    pub async fn post(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &Value,
    ) -> Result<Answer, ProviderError> {
        self.post_observed(path, headers, body, None).await
    }

    /// [`Endpoint::post`], telling `on_retry` of each retry before its wait.
    pub async fn post_observed(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &Value,
        on_retry: Option<&RetryHook>,
    ) -> Result<Answer, ProviderError> {
        tokio::time::timeout(
            self.settings.total_timeout,
            self.post_with_retries(path, headers, body, on_retry),
        )
        .await
        .map_err(|_| ProviderError::Timeout("total"))?
    }

    async fn post_with_retries(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &Value,
        on_retry: Option<&RetryHook>,
    ) -> Result<Answer, ProviderError> {
        let url = self.url(path)?;
        let mut attempt = 0;
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
                // Credentials stay out of header compression tables and debug output.
                value.set_sensitive(matches!(
                    *name,
                    "authorization" | "x-api-key" | crate::bot::CALLER_KEY_HEADER
                ));
                request = request.header(*name, value);
            }
            let error = match tokio::time::timeout(self.settings.first_byte_timeout, request.send())
                .await
            {
                Err(_) => ProviderError::Timeout("the first byte"),
                Ok(Err(e)) if e.is_timeout() => ProviderError::Timeout("the connection"),
                Ok(Err(e)) => ProviderError::Connection(error_chain(&e)),
                Ok(Ok(response)) if response.status().is_success() => {
                    return Ok(Answer {
                        response,
                        _permit: permit,
                    });
                }
                Ok(Ok(response)) => status_error(response).await,
            };
            drop(permit);
            if !error.retryable() || attempt >= self.settings.max_retries {
                return Err(error);
            }
            let wait = self.backoff(attempt, &error);
            tracing::warn!(%url, attempt = attempt + 1, wait_ms = wait.as_millis() as u64, %error, "retrying a provider call");
            if let Some(hook) = on_retry {
                hook.call(Retry {
                    attempt: attempt + 2,
                    wait,
                    reason: error.kind(),
                });
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
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
    /// error, not a hang.
    pub async fn body(&self, mut answer: Answer) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout(self.settings.idle_timeout, answer.response.chunk()).await {
                Err(_) => return Err(ProviderError::Timeout("the rest of the answer")),
                Ok(Err(e)) => return Err(ProviderError::Connection(error_chain(&e))),
                Ok(Ok(None)) => return Ok(body),
                Ok(Ok(Some(bytes))) => body.extend_from_slice(&bytes),
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
        let Answer { response, _permit } = answer;
        let mut inner = response.bytes_stream().eventsource();
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
                        let _ = tx
                            .send(Err(ProviderError::Malformed(format!(
                                "broken event stream: {e}"
                            ))))
                            .await;
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

/// The error of a non-2xx response: the provider's own message (`{"error": {"message"}}` in
/// both OpenAI's and Anthropic's bodies), or the start of the body.
async fn status_error(response: Response) -> ProviderError {
    let status = response.status();
    let retry_after = retry_after(&response);
    let text = response.text().await.unwrap_or_default();
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
