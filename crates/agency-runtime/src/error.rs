use agency_core::{AgentId, ConversationId, ValidationErrors};
use agency_store::StoreError;

/// What can go wrong running an agency. The edges map each kind to their own status codes.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("no agency `{0}`")]
    AgencyNotFound(String),
    #[error("no conversation {0}")]
    ConversationNotFound(ConversationId),
    #[error("no room {0}")]
    RoomNotFound(agency_core::RoomId),
    /// Something inside a thing the caller owns (a room's agent or message) is not there.
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("the agency is not valid:\n{0}")]
    Validation(#[from] ValidationErrors),
    #[error("{0}")]
    Conflict(String),
    /// Wrong credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// Too many failed log-ins: the next may be tried after this long.
    #[error("too many failed log-ins for this email or from this address: try again in {}", wait_text(.0))]
    TooManyAttempts(std::time::Duration),
    /// The agency exists but has no published version to serve.
    #[error("agency `{0}` is not published: publish it to reach it through its API")]
    NotPublished(String),
    #[error("agent {agent} ({name}) could not answer: {error}")]
    Model {
        agent: AgentId,
        name: String,
        error: String,
    },
    /// A budget the request would be paid from is spent: which, and when it renews.
    #[error("{0}")]
    Budget(String),
    #[error(transparent)]
    Store(StoreError),
}

impl RuntimeError {
    /// A problem of one field, named by its path.
    pub fn field(path: &str, message: impl std::fmt::Display) -> Self {
        RuntimeError::Validation(ValidationErrors(vec![agency_core::ValidationError {
            path: path.to_string(),
            message: message.to_string(),
        }]))
    }
}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => RuntimeError::Conflict(m),
            other => RuntimeError::Store(other),
        }
    }
}

/// A wait as a person reads it: `40 seconds`, `3 minutes`.
fn wait_text(d: &std::time::Duration) -> String {
    let s = d.as_secs().max(1);
    if s < 90 {
        format!("{s} second{}", if s == 1 { "" } else { "s" })
    } else {
        format!("{} minutes", s.div_ceil(60))
    }
}
