//! Approvals (issue 36): the tool calls waiting for a person in the account's agencies, and
//! their answers. A turn waiting on one (any face but the Responses API) goes on when it is
//! answered, on whichever server it runs.

use agency_core::ApprovalId;
use agency_core::approval::Answer;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};

use crate::auth::{Account, Session};
use crate::documented::{Documented, documented};
use crate::{ApiError, AppState, wire};

/// Every route here, as its handler's `#[utoipa::path]` declares it.
pub fn routes() -> Documented {
    documented![list_approvals, approve, deny]
}

fn approval_id(id: &str) -> Result<ApprovalId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("no approval `{id}`")))
}

/// The tool calls waiting for a person's approval in the account's agencies, oldest first.
#[utoipa::path(get, path = "/api/approvals", tag = "approvals",
    responses((status = 200, body = Vec<wire::Approval>)))]
pub async fn list_approvals(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::Approval>>, ApiError> {
    let pending = s.rt.approvals().pending(&session.owner()).await?;
    let mut named = Vec::with_capacity(pending.len());
    for a in &pending {
        named.push(with_names(&s, a).await);
    }
    Ok(Json(named))
}

/// An approval as a person reads it: with its agency's and its agent's names (from the
/// agency's draft, cached), where they can be read.
async fn with_names(s: &AppState, a: &agency_core::Approval) -> wire::Approval {
    let mut wire = wire::Approval::from(a);
    if let Ok(agency) = s.rt.agencies().draft(a.agency).await {
        wire.agency_name = Some(agency.name.clone());
        wire.agent_name = agency.agent(a.agent).map(|agent| agent.name.clone());
    }
    wire
}

/// Approves a call: it runs (once), with new `arguments` where the agent's policy allows.
#[utoipa::path(post, path = "/api/approvals/{id}/approve", tag = "approvals",
    request_body(content = Option<wire::Approve>), params(("id" = String, Path)),
    responses((status = 200, body = wire::Approval), (status = 404),
        (status = 409, description = "Already answered (the first answer stands)"),
        (status = 422, description = "Arguments the policy does not allow, or not an object")))]
pub async fn approve(
    State(s): State<AppState>,
    Account(session): Account,
    Path(id): Path<String>,
    body: Result<Option<Json<Option<wire::Approve>>>, JsonRejection>,
) -> Result<Json<wire::Approval>, ApiError> {
    let id = approval_id(&id)?;
    let body = body?.and_then(|Json(b)| b).unwrap_or_default();
    let answer = Answer {
        approve: true,
        reason: None,
        arguments: body
            .arguments
            .map(|a| serde_json::Value::Object(a).to_string()),
        by: session.user.email.to_string(),
    };
    answered(&s, &session, id, answer).await
}

/// Denies a call: its agent reads that it was not run, and the `reason` if given.
#[utoipa::path(post, path = "/api/approvals/{id}/deny", tag = "approvals",
    request_body(content = Option<wire::Deny>), params(("id" = String, Path)),
    responses((status = 200, body = wire::Approval), (status = 404),
        (status = 409, description = "Already answered (the first answer stands)")))]
pub async fn deny(
    State(s): State<AppState>,
    Account(session): Account,
    Path(id): Path<String>,
    body: Result<Option<Json<Option<wire::Deny>>>, JsonRejection>,
) -> Result<Json<wire::Approval>, ApiError> {
    let id = approval_id(&id)?;
    let body = body?.and_then(|Json(b)| b).unwrap_or_default();
    let answer = Answer {
        approve: false,
        reason: body.reason,
        arguments: None,
        by: session.user.email.to_string(),
    };
    answered(&s, &session, id, answer).await
}

/// Gives the approval `id` its answer (the first one stands) and shows it as it now is.
async fn answered(
    s: &AppState,
    session: &Session,
    id: ApprovalId,
    answer: Answer,
) -> Result<Json<wire::Approval>, ApiError> {
    let done =
        s.rt.approvals()
            .answer(&session.owner(), id, answer)
            .await?;
    Ok(Json(with_names(s, &done).await))
}
