//! The drop-in OpenAI endpoint: `POST /v1/chat/completions` (the agency named by `model`) and
//! `POST /api/agency/{agency}/chat/completions` (by id or name), the Responses API beside them,
//! and `GET .../models`. An app pointed here with an agency's key cannot tell it is talking to
//! a team.
//!
//! Each API is a face on the runtime's one pipeline (`agency_runtime::pipeline`): its
//! translator reads the request into a `TurnRequest` ([`messages`] reads chat messages for
//! both), [`begin`] hands it over, and its encoder writes the turn's events on its wire
//! (`chat.rs`'s chunks, `responses/stream.rs`'s events), or its outcome whole.

mod chat;
mod cors;
mod error;
mod format;
mod messages;
mod prefill;
mod responses;
pub mod tools;
pub mod types;
mod work;

use std::sync::Arc;

use agency_core::{Agency, ApiKey, ConversationId};
use agency_runtime::api::ChatTurn;
use agency_runtime::{Ask, Caller, RuntimeError, Turn, TurnRequest};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{
    DefaultBodyLimit, Extension, FromRequest, FromRequestParts, OptionalFromRequestParts, Path,
    Request, State,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::options;
pub use cors::CorsOrigins;
pub use error::OpenAiError;
use error::{auth_error, runtime_error};
use tracing::Instrument;
pub use work::SHOW_WORK_HEADER;

use crate::AppState;
use crate::auth::{Key, KeyRefused};

/// Largest request body: a long history of long messages, but not unbounded.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The header that carries (and may name) the conversation.
pub const CONVERSATION_HEADER: &str = "x-agency-conversation";

/// The header that names a request (OpenAI's).
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The OpenAI routes, answering browsers of `cors` origins.
pub fn routes(cors: &CorsOrigins) -> Router<AppState> {
    // Each answers a browser's preflight (`OPTIONS`), with CORS headers when `cors` allows.
    let preflight = || options(cors::preflight);
    let routes = Router::new()
        .route("/v1/chat/completions", preflight().post(chat::chat))
        .route("/v1/models", preflight().get(v1_models))
        .route("/v1/models/{model}", preflight().get(v1_model))
        .route(
            "/api/agency/{agency}/chat/completions",
            preflight().post(chat::chat),
        )
        .route(
            "/api/agency/{agency}/models",
            preflight().get(agency_models),
        )
        .route(
            "/api/agency/{agency}/models/{model}",
            preflight().get(agency_model),
        )
        .route("/v1/responses", preflight().post(responses::create))
        .route("/v1/responses/compact", preflight().post(compact))
        .route(
            "/v1/responses/{id}",
            preflight().get(responses::get).delete(responses::delete),
        )
        .route(
            "/v1/responses/{id}/input_items",
            preflight().get(responses::input_items),
        )
        .route(
            "/api/agency/{agency}/responses",
            preflight().post(responses::create),
        )
        .route(
            "/api/agency/{agency}/responses/compact",
            preflight().post(compact),
        )
        .route(
            "/api/agency/{agency}/responses/{id}",
            preflight().get(responses::get).delete(responses::delete),
        )
        .route(
            "/api/agency/{agency}/responses/{id}/input_items",
            preflight().get(responses::input_items),
        )
        .route("/v1/{*rest}", axum::routing::any(unknown_url))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    cors::apply(routes, cors).layer(axum::middleware::from_fn(request_id))
}

/// A request's id (`req_` and 32 hex digits): the `x-request-id` of its response, a field of
/// everything it logs, and what an error the client cannot act on names so that the agency's
/// owner finds the detail.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Like OpenAI, every response carries `x-request-id` (the SDKs show it as `_request_id` and
/// on their errors), and whatever the request logs carries it too (and its conversation's id,
/// once known). Handlers get it as an extension.
async fn request_id(mut request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let id = new_request_id();
    // In a trace, the id is an attribute of the request's span (this span is for the logs).
    agency_telemetry::Span::current().set_attributes(|| {
        [agency_telemetry::KeyValue::new(
            agency_telemetry::semconv::AGENCY_REQUEST_ID,
            id.clone(),
        )]
    });
    let span = tracing::info_span!(
        "openai",
        request_id = %id,
        conversation = tracing::field::Empty
    );
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).instrument(span).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// A new request's id: `req_` and 32 hex digits.
fn new_request_id() -> String {
    format!("req_{}", uuid::Uuid::now_v7().simple())
}

async fn v1_models(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let (_, agency) = authorize(&s, &request, key, None).await?;
    Ok(axum::Json(model_list(&agency)).into_response())
}

async fn v1_model(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(model): Path<String>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let (_, agency) = authorize(&s, &request, key, Some(&model)).await?;
    Ok(axum::Json(model_of(&agency)).into_response())
}

async fn agency_models(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(agency): Path<String>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let (_, agency) = authorize(&s, &request, key, Some(&agency)).await?;
    Ok(axum::Json(model_list(&agency)).into_response())
}

async fn agency_model(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path((agency, model)): Path<(String, String)>,
    key: Result<Key, KeyRefused>,
) -> Result<Response, OpenAiError> {
    let (_, agency) = authorize(&s, &request, key, Some(&agency)).await?;
    if !names(&agency, &model) {
        return Err(OpenAiError::model_not_found(&model));
    }
    Ok(axum::Json(model_of(&agency)).into_response())
}

/// `POST /v1/responses/compact`: not offered — an agency keeps each conversation whole on
/// the server, and a client goes on with `previous_response_id` (docs/responses.md).
async fn compact() -> OpenAiError {
    OpenAiError::invalid(
        "Compacting is not supported: an agency keeps each conversation whole on the server. Continue it with `previous_response_id`.",
        None,
    )
}

/// A method an OpenAI URL does not take (`GET /v1/chat/completions`): OpenAI's own answer,
/// named by a request id as every answer of these faces is.
pub fn wrong_method(method: &axum::http::Method, uri: &axum::http::Uri) -> Response {
    let mut response = OpenAiError::invalid(
        format!("Invalid method for URL ({method} {})", uri.path()),
        None,
    )
    .status(StatusCode::METHOD_NOT_ALLOWED)
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&new_request_id()) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// Whether `path` is one of the OpenAI faces' (`/v1/…`, an agency's `chat/completions`,
/// `responses`, `models`), whose errors are OpenAI's.
pub fn is_openai_path(path: &str) -> bool {
    if path == "/v1" || path.starts_with("/v1/") {
        return true;
    }
    let Some(rest) = path.strip_prefix("/api/agency/") else {
        return false;
    };
    let mut parts = rest.splitn(3, '/');
    let (_, face) = (parts.next(), parts.next());
    matches!(face, Some("chat" | "responses" | "models"))
}

/// Other OpenAI URLs (`/v1/completions`, `/v1/embeddings`, …): OpenAI's own answer.
async fn unknown_url(method: axum::http::Method, uri: axum::http::Uri) -> OpenAiError {
    OpenAiError::invalid(
        format!(
            "Invalid URL ({method} {}): an agency serves chat completions, responses and models.",
            uri.path()
        ),
        None,
    )
    .status(StatusCode::NOT_FOUND)
}

fn model_of(agency: &Agency) -> types::Model {
    types::Model {
        id: agency.name.clone(),
        object: "model",
        created: agency
            .id
            .0
            .get_timestamp()
            .map_or(0, |t| i64::try_from(t.to_unix().0).unwrap_or(0)),
        owned_by: agency.owner.clone(),
    }
}

fn model_list(agency: &Agency) -> types::ModelList {
    types::ModelList {
        object: "list",
        data: vec![model_of(agency)],
    }
}

/// `selector` (an id or a name) names this agency.
fn names(agency: &Agency, selector: &str) -> bool {
    selector == agency.name || selector == agency.id.to_string()
}

/// The key of the request and its agency; `selector`, when given, must name that agency (a
/// key reaches only its own, and others look as if they did not exist).
async fn authorize(
    s: &AppState,
    request: &RequestId,
    key: Result<Key, KeyRefused>,
    selector: Option<&str>,
) -> Result<(ApiKey, Arc<Agency>), OpenAiError> {
    let Key(key) = key.map_err(|KeyRefused(e)| auth_error(e))?;
    // The published version: cached, checked with one small read.
    let agency = match s.rt.agencies().published(key.agency_id).await {
        Ok(agency) => agency,
        Err(RuntimeError::AgencyNotFound(_)) => {
            return Err(OpenAiError::model_not_found(selector.unwrap_or("?")));
        }
        Err(e) => return Err(runtime_error(e, request)),
    };
    match selector {
        Some(sel) if !names(&agency, sel) => Err(OpenAiError::model_not_found(sel)),
        _ => Ok((key, agency)),
    }
}

/// The conversation a request names in its header, if any.
fn named_conversation(headers: &HeaderMap) -> Result<Option<ConversationId>, OpenAiError> {
    match headers.get(CONVERSATION_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| {
                OpenAiError::invalid(
                    format!("`{CONVERSATION_HEADER}` must be a conversation id"),
                    None,
                )
            }),
    }
}

/// A request of either API that runs a turn, read as OpenAI reads one: the key first (before
/// the body), then the body as `T`, then the agency named by the path
/// (`/api/agency/{agency}/…`) or else by the body's `model`.
pub(super) struct Asked<T> {
    pub request_id: RequestId,
    pub key: ApiKey,
    pub agency: Arc<Agency>,
    /// The conversation the request names in [`CONVERSATION_HEADER`].
    pub conversation: Option<ConversationId>,
    /// Whether [`SHOW_WORK_HEADER`] asks for the team's work as reasoning.
    pub show_work: bool,
    pub body: T,
}

/// A request body that names its model.
pub(super) trait Named {
    /// What is said when it names none.
    const MISSING: &'static str;
    fn model(&self) -> Option<&str>;
}

impl<T: serde::de::DeserializeOwned + Named + Send> FromRequest<AppState> for Asked<T> {
    type Rejection = OpenAiError;

    async fn from_request(request: Request, s: &AppState) -> Result<Self, OpenAiError> {
        let (mut parts, body) = request.into_parts();
        let request_id = parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(|| RequestId(String::new()));
        let path =
            <Path<String> as OptionalFromRequestParts<AppState>>::from_request_parts(&mut parts, s)
                .await
                .map_err(|e| OpenAiError::invalid(e.body_text(), None))?;
        let key = Key::from_request_parts(&mut parts, s).await;
        let conversation = named_conversation(&parts.headers);
        let show_work = work::asked(&parts.headers);
        let body = Bytes::from_request(Request::from_parts(parts, body), s).await;
        let body = body_of(body)?;
        let (key, agency) = authorize(s, &request_id, key, None).await?;
        let body: T = serde_json::from_slice(&body).map_err(|e| {
            OpenAiError::invalid(
                format!("We could not parse the JSON body of your request: {e}"),
                None,
            )
        })?;
        let selector = match path.as_ref().map(|Path(p)| p.as_str()).or(body.model()) {
            Some(selector) if !selector.trim().is_empty() => selector,
            _ => return Err(OpenAiError::invalid(T::MISSING, Some("model"))),
        };
        if !names(&agency, selector) {
            return Err(OpenAiError::model_not_found(selector));
        }
        let conversation = conversation?;
        let show_work = show_work?;
        Ok(Self {
            request_id,
            key,
            agency,
            conversation,
            show_work,
            body,
        })
    }
}

/// How a turn is watched: whether its answer streams, and whether its work (its hops, as
/// [`work`] shows them) streams too.
#[derive(Clone, Copy)]
struct Watched {
    stream: bool,
    show_work: bool,
}

/// The pipeline's entry for both APIs: the key's turn begun (its conversation open and
/// locked), the conversation in the request's logs.
async fn begin(
    s: &AppState,
    request_id: &RequestId,
    key: ApiKey,
    agency: Arc<Agency>,
    turn: ChatTurn,
    watched: Watched,
    face: agency_core::Face,
) -> Result<Turn, OpenAiError> {
    let request = TurnRequest {
        caller: Caller::Key(key),
        ask: Ask::Chat {
            agency,
            turn: Box::new(turn),
        },
        stream_text: watched.stream,
        // A turn run whole shows its work from its trace; a streamed one as its hops come.
        progress: watched.stream && watched.show_work,
        face,
    };
    let turn =
        s.rt.begin(request)
            .await
            .map_err(|e| runtime_error(e, request_id))?;
    tracing::Span::current().record("conversation", tracing::field::display(turn.conversation()));
    Ok(turn)
}

/// A response that names its conversation in [`CONVERSATION_HEADER`].
fn of_conversation(mut response: Response, conversation: ConversationId) -> Response {
    if let Ok(v) = HeaderValue::from_str(&conversation.to_string()) {
        response.headers_mut().insert(CONVERSATION_HEADER, v);
    }
    response
}

/// A request's body, or why it could not be read (too large: a 413).
fn body_of(body: Result<Bytes, BytesRejection>) -> Result<Bytes, OpenAiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            OpenAiError::invalid(
                format!("The request is larger than {} MiB.", MAX_BODY >> 20),
                None,
            )
            .status(StatusCode::PAYLOAD_TOO_LARGE)
            .with_code("request_too_large")
        } else {
            OpenAiError::invalid(e.body_text(), None)
        }
    })
}

/// The end user a request names: `safety_identifier`, or the older `user`.
fn end_user(other: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    ["safety_identifier", "user"].iter().find_map(|name| {
        other
            .get(*name)
            .and_then(|v| v.as_str())
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
    })
}

/// The `system_fingerprint` of the agency's answers: `fp_v` and its published version, so a
/// client that watches it sees when the team behind the model changed. (The endpoint serves
/// published versions only; the server's own version stands in should one lack its number.)
fn fingerprint(agency: &Agency) -> String {
    match agency.version {
        Some(v) => format!("fp_v{v}"),
        None => format!("fp_agency_{}", env!("CARGO_PKG_VERSION")),
    }
}

/// The time to the first token of a streamed answer (`gen_ai.server.time_to_first_token`),
/// from when its stream was opened.
pub(crate) struct FirstToken {
    started: std::time::Instant,
    agency: Option<String>,
}

impl FirstToken {
    pub(crate) fn new(agency: &str) -> Self {
        Self {
            started: std::time::Instant::now(),
            agency: Some(agency.to_string()),
        }
    }

    /// Text goes to the client: the first time, it is measured.
    pub(crate) fn seen(&mut self) {
        if let Some(agency) = self.agency.take() {
            agency_telemetry::metrics().first_token(&agency, self.started.elapsed().as_secs_f64());
        }
    }
}
