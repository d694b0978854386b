//! The JSON-RPC 2.0 binding: `POST` to the agent's base URL, one request per body, methods by
//! their names in `a2a.proto` (`SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`,
//! `CancelTask`, `SubscribeToTask`). Errors are JSON-RPC errors with A2A's codes; a key refused
//! is HTTP's 401 (or 429), before any body is read.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::encode::Framing;
use super::error::Kind;
use super::types::TaskIdRequest;
use super::{A2aError, Admitted, admit, check_version};
use crate::AppState;
use crate::auth::{Key, KeyRefused};

/// The methods of `a2a.proto` this agent does not serve, and why.
const PUSH_METHODS: [&str; 4] = [
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
];
const METHODS: [&str; 6] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
];

pub(super) async fn handle(
    State(s): State<AppState>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let a = match admit(&s, &selector, key).await {
        Ok(a) => a,
        Err(e) if e.http_only() => return e.rest_response(),
        Err(e) => return reply(&Value::Null, Err(e)),
    };
    let (id, method, params) = match read(raw) {
        Ok(request) => request,
        Err((id, e)) => return reply(&id, Err(e)),
    };
    if let Err(e) = check_method(&method).and_then(|()| check_version(&headers)) {
        return reply(&id, Err(e));
    }
    match dispatch(&s, &a, &id, &method, params).await {
        Ok(Answer::Result(v)) => reply(&id, Ok(v)),
        Ok(Answer::Stream(response)) => response,
        Err(e) => reply(&id, Err(e)),
    }
}

enum Answer {
    Result(Value),
    Stream(Response),
}

/// The request's id, method and params; else the error, with the id when it was read.
fn read(raw: Result<Bytes, BytesRejection>) -> Result<(Value, String, Value), (Value, A2aError)> {
    let invalid = |id: &Value, m: &str| (id.clone(), A2aError::new(Kind::InvalidRequest, m));
    let raw = raw.map_err(|e| {
        (
            Value::Null,
            A2aError::new(Kind::InvalidRequest, e.body_text()),
        )
    })?;
    let value: Value = serde_json::from_slice(&raw).map_err(|e| {
        (
            Value::Null,
            A2aError::new(Kind::Parse, format!("The body is not JSON: {e}")),
        )
    })?;
    let Value::Object(mut request) = value else {
        return Err(invalid(
            &Value::Null,
            "A request is one JSON-RPC object (batches are not served).",
        ));
    };
    let id = request.remove("id").unwrap_or(Value::Null);
    if !matches!(id, Value::String(_) | Value::Number(_) | Value::Null) {
        return Err(invalid(&Value::Null, "`id` must be a string or a number."));
    }
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(&id, "`jsonrpc` must be \"2.0\"."));
    }
    let Some(Value::String(method)) = request.remove("method") else {
        return Err(invalid(&id, "`method` is required."));
    };
    let params = match request.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => return Err(invalid(&id, "`params` must be an object.")),
    };
    Ok((id, method, params))
}

fn check_method(method: &str) -> Result<(), A2aError> {
    if METHODS.contains(&method)
        || PUSH_METHODS.contains(&method)
        || method == "GetExtendedAgentCard"
    {
        return Ok(());
    }
    Err(A2aError::new(
        Kind::MethodNotFound,
        format!(
            "Method not found: `{method}`. This agent serves {}.",
            METHODS.join(", ")
        ),
    ))
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, A2aError> {
    serde_json::from_value(params)
        .map_err(|e| A2aError::invalid(format!("`params` are not valid: {e}")))
}

fn result<T: serde::Serialize>(value: T) -> Result<Answer, A2aError> {
    serde_json::to_value(value)
        .map(Answer::Result)
        .map_err(|e| A2aError::new(Kind::Internal, e.to_string()))
}

async fn dispatch(
    s: &AppState,
    a: &Admitted,
    id: &Value,
    method: &str,
    p: Value,
) -> Result<Answer, A2aError> {
    let framing = || Framing::Rpc(id.clone());
    match method {
        "SendMessage" => result(super::send_message(s, a, params(p)?).await?),
        "SendStreamingMessage" => super::stream_message(s, a, params(p)?, framing())
            .await
            .map(Answer::Stream),
        "GetTask" => {
            let request: TaskIdRequest = params(p)?;
            result(super::get_task(s, a, &request.id, request.history_length).await?)
        }
        "ListTasks" => result(super::list_tasks(s, a, params(p)?).await?),
        "CancelTask" => {
            let request: TaskIdRequest = params(p)?;
            result(super::cancel_task(s, a, &request.id).await?)
        }
        "SubscribeToTask" => {
            let request: TaskIdRequest = params(p)?;
            super::subscribe(s, a, &request.id, framing())
                .await
                .map(Answer::Stream)
        }
        "GetExtendedAgentCard" => Err(A2aError::new(
            Kind::ExtendedAgentCardNotConfigured,
            "This agent has no extended card: its card is the whole.",
        )),
        _ => Err(A2aError::new(
            Kind::PushNotificationNotSupported,
            "This agent sends no push notifications: stream the task, or subscribe to it.",
        )),
    }
}

/// A JSON-RPC response (HTTP 200, as the binding answers every request it read).
fn reply(id: &Value, outcome: Result<Value, A2aError>) -> Response {
    let body = match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(e) => e.rpc_response(id),
    };
    axum::Json(body).into_response()
}
