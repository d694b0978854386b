//! The HTTP edge: the drop-in OpenAI endpoint, the management API (accounts, agencies,
//! publishing, keys, conversations) with its OpenAPI document, the web UI (`ui`), and health.
//!
//! Handlers are thin: they parse, call the runtime, and render. Wire types live in [`wire`]
//! and are converted from the domain explicitly; errors are one enum, [`ApiError`].

pub mod a2a;
mod approvals;
pub mod auth;
mod content;
mod conversations;
mod documented;
mod encode;
mod error;
mod events;
mod listen;
mod manage;
pub mod mcp;
pub mod openai;
pub mod openapi;
mod proxy;
mod rooms;
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

/// The management API's routes, with their documentation (see [`documented`]).
fn management_api() -> documented::Documented {
    manage::routes()
        .merge(conversations::routes())
        .merge(approvals::routes())
        .merge(rooms::routes())
}

/// The application's routes.
pub fn router(state: AppState) -> Router {
    let router = Router::new()
        .merge(openai::routes(&state.cors))
        .merge(mcp::http::routes())
        .merge(a2a::routes())
        .merge(content::routes())
        .merge(management_api().router)
        .merge(ui::routes())
        .route("/healthz", get(health))
        .route("/readyz", get(ready))
        .route("/api/openapi.json", get(openapi_json))
        .fallback(ui::not_found)
        .method_not_allowed_fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                use axum::response::IntoResponse;
                if openai::is_openai_path(uri.path()) {
                    openai::wrong_method(&method, &uri)
                } else {
                    ApiError::MethodNotAllowed.into_response()
                }
            },
        )
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY));
    // Observed when telemetry records something (set up before the router is made): a layer
    // costs every request a boxed copy of the route and a boxed future even when it does nothing.
    let router = if agency_telemetry::tracing_on() || agency_telemetry::metrics_on() {
        router.layer(axum::middleware::from_fn(observe))
    } else {
        router
    };
    router.with_state(state)
}

/// Every request's span (continuing the caller's trace when its `traceparent` names one) and
/// its place in the HTTP metrics: by method, route pattern and status, with its duration.
async fn observe(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    // The matched route's pattern is shared, not copied.
    let matched = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .cloned();
    let route = matched.as_ref().map_or("unmatched", |p| p.as_str());
    let parent = agency_telemetry::propagate::continue_from(request.headers());
    let span =
        agency_telemetry::Span::start_in(&parent, agency_telemetry::SpanKind::Server, || {
            let kv = vec![
                agency_telemetry::KeyValue::new(
                    agency_telemetry::semconv::HTTP_REQUEST_METHOD,
                    method.to_string(),
                ),
                agency_telemetry::KeyValue::new(
                    agency_telemetry::semconv::HTTP_ROUTE,
                    route.to_string(),
                ),
            ];
            (format!("{method} {route}"), kv)
        });
    let response = span.run(next.run(request)).await;
    let status = response.status();
    span.set_attributes(|| {
        [agency_telemetry::KeyValue::new(
            agency_telemetry::semconv::HTTP_RESPONSE_STATUS_CODE,
            i64::from(status.as_u16()),
        )]
    });
    if status.is_server_error() {
        span.set_failed();
    }
    agency_telemetry::metrics().http(
        method.as_str(),
        route,
        status.as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// `GET /metrics`: the process's metrics in Prometheus' text format, on the operator's own
/// listener (`--metrics-listen`), never the public one.
pub async fn serve_metrics(
    listener: TcpListener,
    prometheus: agency_telemetry::Prometheus,
) -> std::io::Result<()> {
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let prometheus = prometheus.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    prometheus.render(),
                )
            }
        }),
    );
    axum::serve(listener, app).await
}

/// `stream`, counted among the open event streams until it is dropped.
pub(crate) fn counted<S: futures::Stream>(stream: S) -> impl futures::Stream<Item = S::Item> {
    use futures::StreamExt;
    let open = agency_telemetry::metrics().sse_stream();
    stream.map(move |item| {
        let _open = &open;
        item
    })
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
