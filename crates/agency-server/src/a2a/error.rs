//! A2A's errors: each with its JSON-RPC code and, for the HTTP+JSON binding, its HTTP status
//! and `google.rpc.ErrorInfo` reason (as the protocol's SDKs map them).

use agency_runtime::RuntimeError;
use agency_runtime::keys::AuthError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    ExtendedAgentCardNotConfigured,
    VersionNotSupported,
    /// No key, or one not valid: HTTP 401 on either binding.
    Unauthenticated,
    /// Over the key's rate limit: HTTP 429 on either binding.
    RateLimited {
        retry_after_secs: u64,
    },
    /// A budget the request would be paid from is spent (the message says which and when it
    /// renews): HTTP 429 on either binding, without `Retry-After` (it renews at a period's end).
    QuotaExhausted,
}

impl Kind {
    fn code(self) -> i64 {
        match self {
            Kind::Parse => -32700,
            Kind::InvalidRequest
            | Kind::Unauthenticated
            | Kind::RateLimited { .. }
            | Kind::QuotaExhausted => -32600,
            Kind::MethodNotFound => -32601,
            Kind::InvalidParams => -32602,
            Kind::Internal => -32603,
            Kind::TaskNotFound => -32001,
            Kind::TaskNotCancelable => -32002,
            Kind::PushNotificationNotSupported => -32003,
            Kind::UnsupportedOperation => -32004,
            Kind::ContentTypeNotSupported => -32005,
            Kind::ExtendedAgentCardNotConfigured => -32007,
            Kind::VersionNotSupported => -32009,
        }
    }

    /// HTTP status, gRPC status name, A2A reason.
    fn rest(self) -> (StatusCode, &'static str, &'static str) {
        let bad = StatusCode::BAD_REQUEST;
        match self {
            Kind::Parse | Kind::InvalidRequest => (bad, "INVALID_ARGUMENT", "INVALID_REQUEST"),
            Kind::MethodNotFound => (StatusCode::NOT_FOUND, "NOT_FOUND", "METHOD_NOT_FOUND"),
            Kind::InvalidParams => (bad, "INVALID_ARGUMENT", "INVALID_PARAMS"),
            Kind::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "INTERNAL_ERROR",
            ),
            Kind::TaskNotFound => (StatusCode::NOT_FOUND, "NOT_FOUND", "TASK_NOT_FOUND"),
            Kind::TaskNotCancelable => (bad, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
            Kind::PushNotificationNotSupported => (
                bad,
                "FAILED_PRECONDITION",
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            Kind::UnsupportedOperation => (bad, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"),
            Kind::ContentTypeNotSupported => {
                (bad, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
            }
            Kind::ExtendedAgentCardNotConfigured => (
                bad,
                "FAILED_PRECONDITION",
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            Kind::VersionNotSupported => (bad, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"),
            Kind::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "UNAUTHENTICATED",
                "UNAUTHENTICATED",
            ),
            Kind::RateLimited { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "RESOURCE_EXHAUSTED",
                "RATE_LIMITED",
            ),
            Kind::QuotaExhausted => (
                StatusCode::TOO_MANY_REQUESTS,
                "RESOURCE_EXHAUSTED",
                "QUOTA_EXHAUSTED",
            ),
        }
    }
}

/// An A2A error: what kind, and what a person can act on.
#[derive(Debug)]
pub struct A2aError {
    pub kind: Kind,
    pub message: String,
}

impl A2aError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidParams, message)
    }

    pub fn task_not_found(id: &str) -> Self {
        Self::new(
            Kind::TaskNotFound,
            format!("No task `{id}` for this agency."),
        )
    }

    /// Whether it is answered at the HTTP layer (401, 429) rather than in a JSON-RPC body.
    pub fn http_only(&self) -> bool {
        matches!(
            self.kind,
            Kind::Unauthenticated | Kind::RateLimited { .. } | Kind::QuotaExhausted
        )
    }

    /// The JSON-RPC error object.
    pub fn rpc_error(&self) -> Value {
        json!({ "code": self.kind.code(), "message": self.message })
    }

    /// A JSON-RPC response carrying it.
    pub fn rpc_response(&self, id: &Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "error": self.rpc_error() })
    }

    /// The HTTP+JSON binding's body (`google.rpc.Status` with an `ErrorInfo`).
    fn rest_body(&self) -> Value {
        let (status, name, reason) = self.kind.rest();
        json!({ "error": {
            "code": status.as_u16(),
            "status": name,
            "message": self.message,
            "details": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }],
        }})
    }

    /// The HTTP+JSON binding's response (and either binding's for 401 and 429).
    pub fn rest_response(&self) -> Response {
        let (status, ..) = self.kind.rest();
        let mut response = (status, axum::Json(self.rest_body())).into_response();
        let headers = response.headers_mut();
        match self.kind {
            Kind::Unauthenticated => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Kind::RateLimited { retry_after_secs } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            }
            _ => {}
        }
        response
    }
}

impl From<AuthError> for A2aError {
    fn from(e: AuthError) -> Self {
        let message = e.to_string();
        match e {
            AuthError::RateLimited { retry_after, .. } => Self::new(
                Kind::RateLimited {
                    retry_after_secs: retry_after.as_secs().max(1),
                },
                message,
            ),
            _ => Self::new(Kind::Unauthenticated, message),
        }
    }
}

impl From<RuntimeError> for A2aError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::NotFound(m) => Self::new(Kind::TaskNotFound, format!("{m}.")),
            RuntimeError::ConversationNotFound(id) => Self::new(
                Kind::TaskNotFound,
                format!("No context `{id}` for this agency."),
            ),
            RuntimeError::AgencyNotFound(name) => {
                Self::new(Kind::TaskNotFound, format!("No agency `{name}`."))
            }
            RuntimeError::NotPublished(_) => Self::new(Kind::UnsupportedOperation, e.to_string()),
            RuntimeError::Invalid(m) => Self::invalid(m),
            RuntimeError::Conflict(m) => Self::new(Kind::UnsupportedOperation, m),
            RuntimeError::Budget(m) => Self::new(Kind::QuotaExhausted, m),
            e => {
                tracing::error!(error = %e, "an A2A request failed");
                Self::new(
                    Kind::Internal,
                    "The server could not answer; its operator finds the detail in its log.",
                )
            }
        }
    }
}

impl IntoResponse for A2aError {
    fn into_response(self) -> Response {
        self.rest_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_is_429_resource_exhausted_with_its_message() {
        let message = "API key `app`'s budget of $0.01 a day is spent; it renews at 00:00 UTC.";
        let e = A2aError::from(RuntimeError::Budget(message.into()));
        assert!(
            e.http_only(),
            "answered at the HTTP layer, as a rate limit is"
        );
        let response = e.rest_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            response.headers().get(header::RETRY_AFTER).is_none(),
            "it renews at its period's end, not in seconds"
        );
        let body = e.rest_body();
        assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(body["error"]["details"][0]["reason"], "QUOTA_EXHAUSTED");
        assert_eq!(body["error"]["message"], message);
        assert_eq!(e.rpc_error()["code"], -32600);
    }
}
