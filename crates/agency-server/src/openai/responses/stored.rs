//! Stored responses: `GET` and `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`.

use agency_runtime::api::ApiResponse;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::auth::{Key, KeyRefused};
use crate::openai::error::runtime_error;
use crate::openai::{OpenAiError, RequestId, authorize};

fn not_found(id: &str) -> OpenAiError {
    OpenAiError::invalid(format!("No response found with id '{id}'."), None)
        .status(StatusCode::NOT_FOUND)
}

/// The stored response `id` of the key's agency (`selector`, when given, must name it).
async fn stored(
    s: &AppState,
    request: &RequestId,
    key: Result<Key, KeyRefused>,
    selector: Option<&str>,
    id: &str,
) -> Result<ApiResponse, OpenAiError> {
    let (_, agency) = authorize(s, request, key, selector).await?;
    s.rt.conversations()
        .response(agency.id, id)
        .await
        .map_err(|e| runtime_error(e, request))?
        .ok_or_else(|| not_found(id))
}

fn json_text(text: &str) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text.to_string(),
    )
        .into_response()
}

/// Where a stored response is: its id, under `/v1` or under an agency's path.
#[derive(Debug, Deserialize)]
pub(crate) struct At {
    agency: Option<String>,
    id: String,
}

/// `GET /v1/responses/{id}`, and under `/api/agency/{agency}`.
pub(crate) async fn get(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(at): Path<At>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let r = stored(&s, &request, key, at.agency.as_deref(), &at.id).await?;
    Ok(json_text(&r.body))
}

/// `DELETE /v1/responses/{id}`, and under `/api/agency/{agency}`.
pub(crate) async fn delete(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(at): Path<At>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let (_, agency) = authorize(&s, &request, key, at.agency.as_deref()).await?;
    let deleted =
        s.rt.conversations()
            .delete_response(agency.id, &at.id)
            .await
            .map_err(|e| runtime_error(e, &request))?;
    if !deleted {
        return Err(not_found(&at.id));
    }
    let id = at.id;
    Ok(axum::Json(json!({"id": id, "object": "response", "deleted": true})).into_response())
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    order: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// A response's input items, a page of them: newest first unless `order=asc`.
fn input_list(r: &ApiResponse, q: &ListQuery) -> Result<Value, OpenAiError> {
    let mut items: Vec<Value> = serde_json::from_str(&r.input).unwrap_or_default();
    match q.order.as_deref() {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(other) => {
            return Err(OpenAiError::invalid(
                format!("Invalid value for 'order': `{other}` (asc or desc)."),
                Some("order"),
            ));
        }
    }
    if let Some(after) = &q.after {
        let at = items
            .iter()
            .position(|i| i.get("id").and_then(Value::as_str) == Some(after.as_str()))
            .map_or(items.len(), |p| p + 1);
        items.drain(..at);
    }
    let limit = q.limit.unwrap_or(20).clamp(1, 100);
    let has_more = items.len() > limit;
    items.truncate(limit);
    let id_of = |i: Option<&Value>| i.and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    Ok(json!({
        "object": "list",
        "data": items,
        "first_id": id_of(items.first()),
        "last_id": id_of(items.last()),
        "has_more": has_more,
    }))
}

/// `GET /v1/responses/{id}/input_items`, and under `/api/agency/{agency}`.
pub(crate) async fn input_items(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(at): Path<At>,
    Query(q): Query<ListQuery>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let r = stored(&s, &request, key, at.agency.as_deref(), &at.id).await?;
    Ok(axum::Json(input_list(&r, &q)?).into_response())
}
