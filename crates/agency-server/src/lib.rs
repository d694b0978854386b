//! The HTTP edge: health, and a small JSON API to run conversations.
//!
//! Handlers are thin: they parse, call the runtime, and render. Wire types live in [`wire`]
//! and are converted from the domain explicitly; errors are one enum, [`ApiError`].

mod content;
mod error;
pub mod openai;
mod wire;

use std::future::Future;
use std::sync::Arc;

use agency_core::{ConversationId, MessageKind};
use agency_runtime::{LOCAL_OWNER, Runtime};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use tokio::net::TcpListener;

pub use error::ApiError;

/// What every handler may use.
#[derive(Clone)]
pub struct AppState {
    pub rt: Arc<Runtime>,
    pub auth: Arc<agency_runtime::keys::Authenticator>,
}

/// How often the last use of API keys is written.
const FLUSH_KEY_USAGE: std::time::Duration = std::time::Duration::from_secs(5);

/// The application's routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(openai::routes())
        .merge(content::routes())
        .route("/healthz", get(health))
        .route("/api/agencies", get(list_agencies))
        .route("/api/agencies/{agency}", get(get_agency))
        .route(
            "/api/agencies/{agency}/conversations",
            post(create_conversation),
        )
        .route("/api/conversations/{id}", get(get_conversation))
        .route(
            "/api/conversations/{id}/messages",
            get(list_messages).post(post_message),
        )
        .route("/api/conversations/{id}/turns/{number}", get(get_turn))
        .fallback(|| async { ApiError::NotFound("no such endpoint".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state)
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

/// Serves until `shutdown` resolves, then finishes the requests in progress.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let auth = state.auth.clone();
    let flusher = tokio::spawn(async move {
        let mut tick = tokio::time::interval(FLUSH_KEY_USAGE);
        loop {
            tick.tick().await;
            if let Err(e) = auth.flush_usage().await {
                tracing::warn!(error = %e, "cannot record API key use");
            }
        }
    });
    // Small writes (stream chunks) go out at once instead of waiting for the peer's ACK.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let served = axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(shutdown)
        .await;
    flusher.abort();
    if let Err(e) = state.auth.flush_usage().await {
        tracing::warn!(error = %e, "cannot record API key use");
    }
    served
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn list_agencies(
    State(AppState { rt, .. }): State<AppState>,
) -> Result<Json<Vec<wire::Agency>>, ApiError> {
    let agencies = rt
        .store()
        .list_agencies(LOCAL_OWNER)
        .await
        .map_err(agency_runtime::RuntimeError::from)?;
    Ok(Json(agencies.iter().map(wire::Agency::from).collect()))
}

async fn get_agency(
    State(AppState { rt, .. }): State<AppState>,
    Path(agency): Path<String>,
) -> Result<Json<wire::Agency>, ApiError> {
    let agency = rt.agency(LOCAL_OWNER, &agency).await?;
    Ok(Json(wire::Agency::from(&agency)))
}

async fn create_conversation(
    State(AppState { rt, .. }): State<AppState>,
    Path(agency): Path<String>,
) -> Result<(StatusCode, Json<wire::Conversation>), ApiError> {
    let agency = rt.agency(LOCAL_OWNER, &agency).await?;
    let c = rt.start_conversation(&agency).await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::Conversation::new(&c, Vec::new())),
    ))
}

fn conversation_id(id: &str) -> Result<ConversationId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("no conversation `{id}`")))
}

async fn get_conversation(
    State(AppState { rt, .. }): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<wire::Conversation>, ApiError> {
    let id = conversation_id(&id)?;
    let c = rt
        .store()
        .conversation(id)
        .await
        .map_err(agency_runtime::RuntimeError::from)?
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {id}")))?;
    let turns = rt
        .store()
        .turns(id)
        .await
        .map_err(agency_runtime::RuntimeError::from)?;
    Ok(Json(wire::Conversation::new(
        &c,
        turns.iter().map(wire::Turn::from).collect(),
    )))
}

async fn post_message(
    State(AppState { rt, .. }): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<wire::PostMessage>, JsonRejection>,
) -> Result<Json<wire::TurnResult>, ApiError> {
    let id = conversation_id(&id)?;
    let Json(body) = body?;
    let out = rt.send(id, body.text).await?;
    Ok(Json(wire::TurnResult::from(&out)))
}

async fn get_turn(
    State(AppState { rt, .. }): State<AppState>,
    Path((id, number)): Path<(String, String)>,
) -> Result<Json<wire::TurnTrace>, ApiError> {
    let id = conversation_id(&id)?;
    // Parsed here, not by the extractor, so that a bad number gets this API's JSON error.
    let number: u32 = number
        .parse()
        .map_err(|_| ApiError::NotFound(format!("conversation {id} has no turn `{number}`")))?;
    let turns = rt
        .store()
        .turns(id)
        .await
        .map_err(agency_runtime::RuntimeError::from)?;
    let turn = turns
        .iter()
        .find(|t| t.number == number)
        .ok_or_else(|| ApiError::NotFound(format!("conversation {id} has no turn {number}")))?;
    let roster = roster_of(&rt, id).await?;
    let trace = rt.trace(id, turn.id).await?;
    Ok(Json(wire::TurnTrace {
        turn: wire::Turn::from(turn),
        trace: trace
            .iter()
            .map(|e| wire::TraceEntry::new(e, &roster))
            .collect(),
    }))
}

async fn list_messages(
    State(AppState { rt, .. }): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<wire::Message>>, ApiError> {
    let id = conversation_id(&id)?;
    let roster = roster_of(&rt, id).await?;
    let messages = rt
        .store()
        .messages(id)
        .await
        .map_err(agency_runtime::RuntimeError::from)?;
    Ok(Json(
        messages
            .iter()
            .filter(|m| m.kind != MessageKind::System || m.agent.is_some())
            .map(|m| wire::Message::new(m, &roster))
            .collect(),
    ))
}

async fn roster_of(rt: &Runtime, id: ConversationId) -> Result<agency_core::Roster, ApiError> {
    let store = rt.store();
    let c = store
        .conversation(id)
        .await
        .map_err(agency_runtime::RuntimeError::from)?
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {id}")))?;
    let agency = store
        .agency(c.agency_id)
        .await
        .map_err(agency_runtime::RuntimeError::from)?;
    Ok(agency.map(|a| a.roster()).unwrap_or_default())
}
