//! The HTTP+JSON binding: `POST /message:send`, `POST /message:stream`, `GET /tasks`,
//! `GET /tasks/{id}`, `POST /tasks/{id}:cancel`, `GET|POST /tasks/{id}:subscribe`, under the
//! agent's base URL. Errors are `google.rpc.Status` bodies with A2A's reason.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::encode::Framing;
use super::error::Kind;
use super::types::{ListTasksRequest, SendMessageRequest, TaskIdRequest};
use super::{A2aError, Admitted, admit, check_version};
use crate::AppState;
use crate::auth::{Key, KeyRefused};

/// The key, the agency and the version, in that order.
async fn let_in(
    s: &AppState,
    selector: &str,
    headers: &HeaderMap,
    key: Result<Key, KeyRefused>,
) -> Result<Admitted, A2aError> {
    let a = admit(s, selector, key).await?;
    check_version(headers)?;
    Ok(a)
}

/// A JSON body read as `T`: not JSON is a parse error, JSON of the wrong shape bad params.
pub(super) fn body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, A2aError> {
    let body = body.map_err(|e| A2aError::new(Kind::InvalidRequest, e.body_text()))?;
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| A2aError::new(Kind::Parse, format!("The body is not JSON: {e}")))?;
    serde_json::from_value(value)
        .map_err(|e| A2aError::invalid(format!("The request is not valid: {e}")))
}

fn json<T: serde::Serialize>(result: Result<T, A2aError>) -> Response {
    match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.rest_response(),
    }
}

pub(super) async fn send(
    State(s): State<AppState>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    json(
        async {
            let a = let_in(&s, &selector, &headers, key).await?;
            let request: SendMessageRequest = body(raw)?;
            super::send_message(&s, &a, request).await
        }
        .await,
    )
}

pub(super) async fn stream(
    State(s): State<AppState>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let result = async {
        let a = let_in(&s, &selector, &headers, key).await?;
        let request: SendMessageRequest = body(raw)?;
        super::stream_message(&s, &a, request, Framing::Rest).await
    }
    .await;
    result.unwrap_or_else(|e| e.rest_response())
}

pub(super) async fn list(
    State(s): State<AppState>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
    query: Result<Query<ListTasksRequest>, QueryRejection>,
) -> Response {
    json(
        async {
            let a = let_in(&s, &selector, &headers, key).await?;
            let Query(request) = query.map_err(|e| A2aError::invalid(e.body_text()))?;
            super::list_tasks(&s, &a, request).await
        }
        .await,
    )
}

/// `GET /tasks/{id}` and `GET /tasks/{id}:subscribe`.
pub(super) async fn task_get(
    State(s): State<AppState>,
    Path((selector, task)): Path<(String, String)>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
    query: Result<Query<TaskIdRequest>, QueryRejection>,
) -> Response {
    let result = async {
        let a = let_in(&s, &selector, &headers, key).await?;
        if let Some(id) = task.strip_suffix(":subscribe") {
            return super::subscribe(&s, &a, id, Framing::Rest).await;
        }
        let Query(request) = query.map_err(|e| A2aError::invalid(e.body_text()))?;
        let found = super::get_task(&s, &a, &task, request.history_length).await?;
        Ok(axum::Json(found).into_response())
    }
    .await;
    result.unwrap_or_else(|e| e.rest_response())
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
pub(super) async fn task_post(
    State(s): State<AppState>,
    Path((selector, task)): Path<(String, String)>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
) -> Response {
    let result = async {
        let a = let_in(&s, &selector, &headers, key).await?;
        if let Some(id) = task.strip_suffix(":subscribe") {
            return super::subscribe(&s, &a, id, Framing::Rest).await;
        }
        if let Some(id) = task.strip_suffix(":cancel") {
            let task = super::cancel_task(&s, &a, id).await?;
            return Ok(axum::Json(task).into_response());
        }
        Err(A2aError::new(
            Kind::MethodNotFound,
            format!("No operation `POST /tasks/{task}`: tasks take `:cancel` and `:subscribe`."),
        ))
    }
    .await;
    result.unwrap_or_else(|e| e.rest_response())
}

/// Any other URL under the agent's: A2A's own answer. (Push notification configurations and
/// the extended card are not served.)
pub(super) async fn unknown(
    State(s): State<AppState>,
    Path((selector, rest)): Path<(String, String)>,
    key: Result<Key, KeyRefused>,
) -> Response {
    if let Err(e) = admit(&s, &selector, key).await {
        return e.rest_response();
    }
    let e = if rest.contains("pushNotificationConfigs") {
        A2aError::new(
            Kind::PushNotificationNotSupported,
            "This agent sends no push notifications: stream the task, or subscribe to it.",
        )
    } else if rest == "extendedAgentCard" {
        A2aError::new(
            Kind::ExtendedAgentCardNotConfigured,
            "This agent has no extended card: its card is the whole.",
        )
    } else {
        A2aError::new(
            Kind::MethodNotFound,
            format!("No A2A operation at `{rest}` of this agent."),
        )
    };
    e.rest_response()
}
