//! Errors as OpenAI sends them: `{"error": {"message", "type", "param", "code"}}` with its
//! status codes, so clients' own exception types work.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use agency_runtime::RuntimeError;
use agency_runtime::keys::AuthError;

use super::{CONVERSATION_HEADER, RequestId};

#[derive(Debug)]
pub struct OpenAiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    pub retry_after_secs: Option<u64>,
}

impl OpenAiError {
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(Into::into),
            code: None,
            retry_after_secs: None,
        }
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn unauthorized(message: impl Into<String>, code: Option<&'static str>) -> Self {
        Self {
            code,
            ..Self::invalid(message, None).status(StatusCode::UNAUTHORIZED)
        }
    }

    pub fn model_not_found(model: &str) -> Self {
        Self::invalid(
            format!("The model `{model}` does not exist or you do not have access to it."),
            None,
        )
        .status(StatusCode::NOT_FOUND)
        .with_code("model_not_found")
    }

    pub fn server(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            kind: "server_error",
            ..Self::invalid(message, None).status(status)
        }
    }

    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "message": self.message, "type": self.kind, "param": self.param, "code": self.code } })
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), message = %self.message, "chat completion failed");
        }
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(secs) = self.retry_after_secs
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}

pub(crate) fn auth_error(e: AuthError) -> OpenAiError {
    let message = e.to_string();
    match e {
        AuthError::Missing => OpenAiError::unauthorized(message, None),
        AuthError::Invalid(_) | AuthError::Revoked(_) => {
            OpenAiError::unauthorized(message, Some("invalid_api_key"))
        }
        AuthError::Expired(_) => OpenAiError::unauthorized(message, Some("expired_api_key")),
        AuthError::RateLimited { retry_after, .. } => OpenAiError {
            kind: "requests",
            retry_after_secs: Some(retry_after.as_secs().max(1)),
            ..OpenAiError::invalid(message, None)
                .status(StatusCode::TOO_MANY_REQUESTS)
                .with_code("rate_limit_exceeded")
        },
    }
}

/// A runtime error as the client sees it. What went wrong inside the agency (which agent, which
/// provider, what it said) is for its owner: logged under the request's id, which the message
/// gives, and kept with the failed turn in the conversation.
pub(crate) fn runtime_error(e: RuntimeError, request: &RequestId) -> OpenAiError {
    match e {
        RuntimeError::AgencyNotFound(name) => OpenAiError::model_not_found(&name),
        RuntimeError::NotPublished(_) => OpenAiError::invalid(e.to_string(), Some("model"))
            .status(StatusCode::NOT_FOUND)
            .with_code("model_not_found"),
        RuntimeError::ConversationNotFound(id) => OpenAiError::invalid(
            format!(
                "No conversation {id} for this agency (from the `{CONVERSATION_HEADER}` header)."
            ),
            None,
        )
        .status(StatusCode::NOT_FOUND)
        .with_code("conversation_not_found"),
        RuntimeError::Invalid(m) => OpenAiError::invalid(m, Some("messages")),
        // As OpenAI answers a spent quota: 429, `insufficient_quota` (no retry will help
        // before the budget renews, which the message says).
        RuntimeError::Budget(m) => OpenAiError {
            kind: "insufficient_quota",
            ..OpenAiError::invalid(m, None)
                .status(StatusCode::TOO_MANY_REQUESTS)
                .with_code("insufficient_quota")
        },
        RuntimeError::Conflict(m) => OpenAiError::invalid(m, None).status(StatusCode::CONFLICT),
        RuntimeError::Model {
            agent,
            ref name,
            ref error,
        } => {
            tracing::warn!(
                request_id = %request,
                agent = %agent,
                agent_name = %name,
                error = %error,
                "the agency could not answer: a model failed"
            );
            OpenAiError::server(
                StatusCode::BAD_GATEWAY,
                format!(
                    "The agency could not answer this request ({request}); its owner can find what failed in the server's logs and the conversation browser."
                ),
            )
        }
        RuntimeError::Validation(_)
        | RuntimeError::Unauthorized(_)
        | RuntimeError::TooManyAttempts(_)
        | RuntimeError::RoomNotFound(_)
        | RuntimeError::NotFound(_)
        | RuntimeError::Store(_) => {
            tracing::error!(request_id = %request, error = %e, "chat completion failed");
            OpenAiError::server(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "The server had an error while processing your request ({request}); its operator can find it in the server's logs."
                ),
            )
        }
    }
}
