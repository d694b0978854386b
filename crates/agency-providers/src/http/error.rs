//! Why a call over HTTP failed: the one error of providers, bots and the address checks.

use std::time::Duration;

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
    /// The answer was not in the provider's format, or ended before it was whole.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// The stream reported an error of the provider's part way through.
    #[error("the stream broke off: {0}")]
    Broken(String),
    /// A whole, well-formed answer that holds nothing to use (a refusal, no text).
    #[error("{0}")]
    Unusable(String),
    #[error("the answer is larger than {} MiB", .0 >> 20)]
    TooLarge(usize),
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
            ProviderError::Broken(_) => "stream broken off".into(),
            ProviderError::Unusable(_) => "unusable answer".into(),
            ProviderError::TooLarge(_) => "answer too large".into(),
            ProviderError::Config(_) => "configuration".into(),
        }
    }

    /// Worth another try before any answer came: the same request may succeed later.
    pub fn retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Timeout(what) => *what != WHOLE_CALL,
            ProviderError::Connection(_) => true,
            ProviderError::Malformed(_)
            | ProviderError::Broken(_)
            | ProviderError::Unusable(_)
            | ProviderError::TooLarge(_)
            | ProviderError::Config(_) => false,
        }
    }

    /// Worth one more try after an answer started coming and then failed: it came malformed
    /// or cut short, the stream stalled, or it broke off with an error of the provider's.
    /// A second such answer is the error.
    pub(super) fn worth_asking_again(&self) -> bool {
        match self {
            ProviderError::Malformed(_)
            | ProviderError::Broken(_)
            | ProviderError::Connection(_) => true,
            ProviderError::Timeout(what) => *what != WHOLE_CALL,
            _ => false,
        }
    }
}
