use agency_runtime::RuntimeError;
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection, StringRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Every way a request can fail, with its status code. Internal errors are logged once here
/// and shown to the client only as "internal error".
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// Answered with `Retry-After` (whole seconds, rounded up) when the wait is known.
    #[error("{message}")]
    TooManyRequests {
        message: String,
        retry_after: Option<std::time::Duration>,
    },
    #[error("{0}")]
    NotFound(String),
    /// A body over the limit (2 MiB; the OpenAI endpoint's 4 MiB).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A body in a format this endpoint does not read (JSON without `Content-Type: application/json`).
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("this endpoint does not take that method")]
    MethodNotAllowed,
    #[error("{0}")]
    Conflict(String),
    /// Fields with problems, each named by its path (`agents[1].rules[0].send_to`).
    #[error("{}", .0.0.first().map_or("the request is not valid".to_string(), |e| e.to_string()))]
    Fields(agency_core::ValidationErrors),
    #[error("{0}")]
    BadGateway(String),
    /// The server is at a limit of its own for now; answered with `Retry-After: 1`.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Fields(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::AgencyNotFound(_)
            | RuntimeError::ConversationNotFound(_)
            | RuntimeError::RoomNotFound(_)
            | RuntimeError::NotFound(_) => ApiError::NotFound(e.to_string()),
            RuntimeError::Invalid(m) => ApiError::BadRequest(m),
            RuntimeError::Validation(v) => ApiError::Fields(v),
            RuntimeError::Conflict(m) => ApiError::Conflict(m),
            RuntimeError::Unauthorized(m) => ApiError::Unauthorized(m),
            RuntimeError::TooManyAttempts(wait) => ApiError::TooManyRequests {
                message: e.to_string(),
                retry_after: Some(wait),
            },
            RuntimeError::NotPublished(_) => ApiError::Conflict(e.to_string()),
            RuntimeError::Model { .. } => ApiError::BadGateway(e.to_string()),
            RuntimeError::Budget(m) => ApiError::TooManyRequests {
                message: m,
                retry_after: None,
            },
            RuntimeError::Store(s) => ApiError::Internal(s.to_string()),
        }
    }
}

/// A body or query the extractors refused: too large, not JSON, not of the shape asked for.
/// Malformed and mistyped input is a 400 (with serde's path to the field), as it always was;
/// size and format keep their own statuses.
fn rejected(status: StatusCode, text: String) -> ApiError {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(format!(
            "the body is too large: this API reads at most {} MiB",
            crate::MAX_BODY >> 20
        )),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(text),
        _ => ApiError::BadRequest(text),
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        rejected(r.status(), r.body_text())
    }
}

impl From<StringRejection> for ApiError {
    fn from(r: StringRejection) -> Self {
        rejected(r.status(), r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        rejected(r.status(), r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(error = %detail, "request failed");
        }
        let fields = match &self {
            ApiError::Fields(v) => Some(
                v.0.iter()
                    .map(|e| crate::wire::FieldError {
                        path: e.path.clone(),
                        message: e.message.clone(),
                    })
                    .collect(),
            ),
            _ => None,
        };
        let error = crate::wire::ErrorBody {
            error: crate::wire::ErrorDetail {
                message: self.to_string(),
                status: self.status_code().as_u16(),
                fields,
            },
        };
        let mut response = (self.status_code(), Json(error)).into_response();
        let wait = match &self {
            ApiError::TooManyRequests { retry_after, .. } => *retry_after,
            ApiError::Unavailable(_) => Some(std::time::Duration::from_secs(1)),
            _ => None,
        };
        if let Some(wait) = wait {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after(wait));
        }
        response
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub fn retry_after(wait: std::time::Duration) -> axum::http::HeaderValue {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    axum::http::HeaderValue::from(secs.max(1))
}
