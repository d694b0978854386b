use agency_runtime::RuntimeError;
use agency_runtime::keys::AuthError;

/// What can go wrong at the MQTT edge. Each kind has the `exception_type` a client sees on
/// `EVT/error`; internal causes are logged and shown only as "internal error".
#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    #[error(
        "`{0}` is not an MQTT URL Agency can use: write mqtt://[USER[:PASSWORD]@]HOST[:PORT] or mqtts://..."
    )]
    Url(String),
    #[error("the payload is not valid: {0}")]
    InvalidPayload(String),
    #[error("no team `{0}` (a team is an agency's handle, or its name)")]
    UnknownTeam(String),
    #[error("team `{team}` has no agent `{agent}` (an agent's handle, or its name)")]
    UnknownAgent { team: String, agent: String },
    #[error("conversation {0} was never initialized: send CMD/chat_new/{{agentId}} first")]
    NotInitialized(String),
    #[error("conversation {conversation} is not a conversation with agent `{agent}`")]
    OtherAgent { conversation: String, agent: String },
    #[error("conversation {0} has no turn running to cancel")]
    NothingToCancel(String),
    #[error("{0}")]
    Unsupported(String),
    /// A message without a key where its team takes none, or with another agency's key.
    #[error("{0}")]
    Unauthorized(String),
    /// A message with a key that is not valid now, or over its rate limit.
    #[error(transparent)]
    Key(#[from] AuthError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("MQTT client error: {0}")]
    Client(String),
}

impl MqttError {
    /// The `exception_type` of the error event.
    pub fn exception_type(&self) -> &'static str {
        match self {
            MqttError::Url(_) => "InvalidConfiguration",
            MqttError::InvalidPayload(_) => "InvalidPayload",
            MqttError::UnknownTeam(_) => "UnknownTeam",
            MqttError::UnknownAgent { .. } => "UnknownAgent",
            MqttError::NotInitialized(_) => "ConversationNotInitialized",
            MqttError::OtherAgent { .. } => "ConversationOfAnotherAgent",
            MqttError::NothingToCancel(_) => "NoRunningTurn",
            MqttError::Unsupported(_) => "Unsupported",
            MqttError::Unauthorized(_) => "Unauthorized",
            MqttError::Key(AuthError::RateLimited { .. }) => "TooManyRequests",
            MqttError::Key(_) => "Unauthorized",
            MqttError::Runtime(e) => match e {
                RuntimeError::AgencyNotFound(_) | RuntimeError::NotPublished(_) => "UnknownTeam",
                RuntimeError::ConversationNotFound(_) => "ConversationNotInitialized",
                RuntimeError::RoomNotFound(_) | RuntimeError::NotFound(_) => "InvalidRequest",
                RuntimeError::Invalid(_) | RuntimeError::Validation(_) => "InvalidRequest",
                RuntimeError::Conflict(_) => "Conflict",
                RuntimeError::Unauthorized(_) => "Unauthorized",
                RuntimeError::TooManyAttempts(_) => "TooManyRequests",
                RuntimeError::Model { .. } => "ModelError",
                RuntimeError::Budget(_) => "BudgetExceeded",
                RuntimeError::Store(_) => "InternalError",
            },
            MqttError::Client(_) => "InternalError",
        }
    }

    /// The message a client may see: internal causes are hidden (and logged by the caller).
    pub fn public_message(&self) -> String {
        match self {
            MqttError::Runtime(RuntimeError::Store(_)) | MqttError::Client(_) => {
                "internal error".to_string()
            }
            other => other.to_string(),
        }
    }

    pub fn is_internal(&self) -> bool {
        matches!(
            self,
            MqttError::Runtime(RuntimeError::Store(_)) | MqttError::Client(_)
        )
    }
}
