//! Errors as OpenAI sends them: `{"error": {"message", "type", "param", "code"}}` with its
//! status codes, so clients' own exception types work.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

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
