//! The HTTP edge: the drop-in OpenAI endpoint, the management API (accounts, agencies,
//! publishing, keys, conversations) with its OpenAPI document, the web UI (`ui`), and health.
//!
//! Handlers are thin: they parse, call the runtime, and render. Wire types live in [`wire`]
//! and are converted from the domain explicitly; errors are one enum, [`ApiError`].

pub mod auth;
mod content;
mod conversations;
mod error;
mod events;
mod listen;
mod manage;
pub mod openai;
pub mod openapi;
mod proxy;
mod rooms;
pub mod testing;
mod ui;
mod wire;

use std::future::Future;
use std::sync::Arc;

use agency_runtime::Runtime;
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;

pub use error::ApiError;
pub use listen::Connections;
pub use openai::CorsOrigins;
pub use proxy::TrustedProxies;

/// What every handler may use.
#[derive(Clone)]
pub struct AppState {
    pub rt: Arc<Runtime>,
    pub auth: Arc<agency_runtime::keys::Authenticator>,
    /// The web origins whose pages may call the OpenAI endpoints (the operator's
    /// `--cors-origin`).
    pub cors: CorsOrigins,
}

/// Largest request body of the management API and the pages' forms (axum's default, made
/// explicit); the OpenAI endpoint takes more ([`openai::MAX_BODY`]).
pub const MAX_BODY: usize = 2 * 1024 * 1024;

/// How often the last use of API keys is written.
const FLUSH_KEY_USAGE: std::time::Duration = std::time::Duration::from_secs(5);

/// The application's routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(openai::routes(&state.cors))
        .merge(content::routes())
        .merge(manage::routes())
        .merge(conversations::routes())
        .merge(rooms::routes())
        .merge(ui::routes())
        .route("/healthz", get(health))
        .route("/readyz", get(ready))
        .route("/api/openapi.json", get(openapi_json))
        .fallback(|| async { ApiError::NotFound("no such endpoint".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

/// Serves until `shutdown` resolves, then finishes the requests in progress; at most as
/// many connections, and as patiently, as `connections` says.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    connections: Connections,
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
    let served = listen::serve(listener, router(state.clone()), connections, shutdown).await;
    flusher.abort();
    if let Err(e) = state.auth.flush_usage().await {
        tracing::warn!(error = %e, "cannot record API key use");
    }
    served
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// 200 when the database answers with the schema this program knows (a load balancer's
/// readiness check), else 503 and why: the process lives (`/healthz`) but should get no
/// requests.
async fn ready(
    axum::extract::State(s): axum::extract::State<AppState>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Err(reason) = s.rt.ready().await else {
        return Json(serde_json::json!({ "status": "ready" })).into_response();
    };
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        Json(serde_json::json!({ "status": "unavailable", "reason": reason })),
    )
        .into_response()
}

async fn openapi_json() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        openapi::document(),
    )
}
