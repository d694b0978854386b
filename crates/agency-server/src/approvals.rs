//! Approvals (issue 36): the tool calls waiting for a person in the account's agencies, and
//! their answers (by a person signed in, or by the agency's API key, as a webhook's receiver
//! answers); an agency's approval webhook. A turn waiting on one goes on when it is answered,
//! on whichever server it runs.

use agency_core::ApprovalId;
use agency_core::approval::Answer;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use secrecy::ExposeSecret;

use crate::auth::{Account, Key, Session};
use crate::documented::{Documented, documented};
use crate::{ApiError, AppState, wire};

/// Every route here, as its handler's `#[utoipa::path]` declares it.
pub fn routes() -> Documented {
    documented![
        list_approvals,
        approve,
        deny,
        get_webhook,
        set_webhook,
        delete_webhook
    ]
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

/// Approves a call: it runs (once), with new `arguments` where the agent's policy allows. A
/// person signed in answers, or the agency's API key (`Authorization: Bearer agk_…`).
#[utoipa::path(post, path = "/api/approvals/{id}/approve", tag = "approvals",
    request_body(content = Option<wire::Approve>), params(("id" = String, Path)),
    responses((status = 200, body = wire::Approval), (status = 404),
        (status = 409, description = "Already answered (the first answer stands)"),
        (status = 422, description = "Arguments the policy does not allow, or not an object")))]
pub async fn approve(
    State(s): State<AppState>,
    who: Answerer,
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
        by: String::new(),
    };
    answered(&s, who, id, answer).await
}

/// Denies a call: its agent reads that it was not run, and the `reason` if given. A person
/// signed in answers, or the agency's API key.
#[utoipa::path(post, path = "/api/approvals/{id}/deny", tag = "approvals",
    request_body(content = Option<wire::Deny>), params(("id" = String, Path)),
    responses((status = 200, body = wire::Approval), (status = 404),
        (status = 409, description = "Already answered (the first answer stands)")))]
pub async fn deny(
    State(s): State<AppState>,
    who: Answerer,
    Path(id): Path<String>,
    body: Result<Option<Json<Option<wire::Deny>>>, JsonRejection>,
) -> Result<Json<wire::Approval>, ApiError> {
    let id = approval_id(&id)?;
    let body = body?.and_then(|Json(b)| b).unwrap_or_default();
    let answer = Answer {
        approve: false,
        reason: body.reason,
        arguments: None,
        by: String::new(),
    };
    answered(&s, who, id, answer).await
}

/// Who answers an approval: a person signed in (their session and its CSRF token), or, with
/// `Authorization: Bearer agk_…`, one of its agency's API keys (a webhook's receiver).
pub enum Answerer {
    Person(Session),
    Key(agency_core::ApiKey),
}

impl FromRequestParts<AppState> for Answerer {
    type Rejection = axum::response::Response;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, Self::Rejection> {
        use axum::response::IntoResponse;
        if parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return match Key::from_request_parts(parts, s).await {
                Ok(Key(key)) => Ok(Answerer::Key(key)),
                Err(refused) => Err(refused.into_response()),
            };
        }
        match Account::from_request_parts(parts, s).await {
            Ok(Account(session)) => Ok(Answerer::Person(session)),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// Gives the approval `id` its answer (the first one stands) and shows it as it now is.
async fn answered(
    s: &AppState,
    who: Answerer,
    id: ApprovalId,
    mut answer: Answer,
) -> Result<Json<wire::Approval>, ApiError> {
    let approvals = s.rt.approvals();
    let done = match &who {
        Answerer::Person(session) => {
            answer.by = session.user.email.to_string();
            approvals.answer(&session.owner(), id, answer).await?
        }
        Answerer::Key(key) => approvals.answer_with_key(key, id, answer).await?,
    };
    Ok(Json(with_names(s, &done).await))
}

/// The agency's approval webhook.
#[utoipa::path(get, path = "/api/agencies/{agency}/approval-webhook", tag = "approvals",
    params(("agency" = String, Path)),
    responses((status = 200, body = wire::ApprovalWebhook), (status = 404, description = "No such agency, or it has no webhook")))]
pub async fn get_webhook(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<wire::ApprovalWebhook>, ApiError> {
    let hook = s
        .rt
        .approvals()
        .webhook(&session.owner(), &agency)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("agency `{agency}` has no approval webhook")))?;
    Ok(Json(wire::ApprovalWebhook::from(&hook)))
}

/// Sets the agency's approval webhook (replacing any): the answer holds its signing secret,
/// this once.
#[utoipa::path(put, path = "/api/agencies/{agency}/approval-webhook", tag = "approvals",
    request_body = wire::SetApprovalWebhook, params(("agency" = String, Path)),
    responses((status = 200, body = wire::CreatedApprovalWebhook), (status = 404),
        (status = 422, description = "Not an http(s) URL, or one this server may not call")))]
pub async fn set_webhook(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
    body: Result<Json<wire::SetApprovalWebhook>, JsonRejection>,
) -> Result<Json<wire::CreatedApprovalWebhook>, ApiError> {
    let Json(body) = body?;
    let (hook, secret) =
        s.rt.approvals()
            .set_webhook(&session.owner(), &agency, &body.url)
            .await?;
    Ok(Json(wire::CreatedApprovalWebhook {
        webhook: wire::ApprovalWebhook::from(&hook),
        secret: secret.expose_secret().to_string(),
    }))
}

/// Removes the agency's approval webhook.
#[utoipa::path(delete, path = "/api/agencies/{agency}/approval-webhook", tag = "approvals",
    params(("agency" = String, Path)),
    responses((status = 204), (status = 404, description = "No such agency, or it has no webhook")))]
pub async fn delete_webhook(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
) -> Result<StatusCode, ApiError> {
    if s.rt
        .approvals()
        .delete_webhook(&session.owner(), &agency)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "agency `{agency}` has no approval webhook"
        )))
    }
}
