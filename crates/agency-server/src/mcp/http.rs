//! MCP's Streamable HTTP transport at `/api/agency/{agency}/mcp`, authorized by the agency's
//! API keys (the same [`Key`] as the OpenAI endpoint: its rate limit, its agency).
//!
//! A POST is read in the revision it speaks: a request with `MCP-Protocol-Version:
//! 2026-07-28` stands alone (its `_meta` and `Mcp-Method` header checked as the SDKs do); an
//! `initialize` opens a 2025-11-25 (or older) session, whose later requests name it in
//! `Mcp-Session-Id`. A call with a progress token is answered as server-sent events (its
//! progress, then its result); others as JSON. A dropped response, or the session's
//! `notifications/cancelled`, cancels the turn.
//!
//! Sessions live in this process (bounded; the oldest idle ones go first): behind a load
//! balancer, 2025-11-25 clients need sticky routing by `Mcp-Session-Id`; 2026-07-28 clients
//! need none.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agency_core::{Agency, ConversationId};
use agency_runtime::RuntimeError;
use agency_runtime::keys::AuthError;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::tool::Asker;
use super::wire::{self, HEADER_MISMATCH, INVALID_REQUEST, Message, RpcError};
use super::{Era, Reply};
use crate::AppState;
use crate::auth::{Key, KeyRefused};

/// Largest request body (a message is at most [`super::tool::MAX_MESSAGE`]).
const MAX_BODY: usize = 2 * 1024 * 1024;
/// Sessions kept at most; past it, the least recently used is forgotten.
const MAX_SESSIONS: usize = 10_000;
/// A session unused this long is forgotten.
const SESSION_IDLE: Duration = Duration::from_secs(24 * 3600);
/// Comments sent while the agents work, so proxies keep a stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// The MCP route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/agency/{agency}/mcp",
            post(post_message).get(get_stream).delete(end_session),
        )
        .layer(Extension(Arc::new(Sessions::default())))
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

/// A 2025-11-25 session: its key, the revision agreed, and its calls running.
struct Session {
    key: uuid::Uuid,
    version: String,
    calls: HashMap<String, ConversationId>,
    used: Instant,
}

#[derive(Default)]
pub struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open(&self, key: uuid::Uuid, version: String) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut all = self.lock();
        all.retain(|_, s| s.used.elapsed() < SESSION_IDLE);
        if all.len() >= MAX_SESSIONS
            && let Some(oldest) = all
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
        {
            all.remove(&oldest);
        }
        all.insert(
            id.clone(),
            Session {
                key,
                version,
                calls: HashMap::new(),
                used: Instant::now(),
            },
        );
        id
    }

    /// The revision of session `id`, if it is this key's.
    fn version(&self, id: &str, key: uuid::Uuid) -> Option<String> {
        let mut all = self.lock();
        let session = all.get_mut(id).filter(|s| s.key == key)?;
        session.used = Instant::now();
        Some(session.version.clone())
    }

    fn end(&self, id: &str, key: uuid::Uuid) -> bool {
        let mut all = self.lock();
        if all.get(id).is_some_and(|s| s.key == key) {
            all.remove(id);
            true
        } else {
            false
        }
    }

    fn call(&self, id: &str, request: &Value, conversation: Option<ConversationId>) {
        if let Some(session) = self.lock().get_mut(id) {
            match conversation {
                Some(c) => session.calls.insert(request.to_string(), c),
                None => session.calls.remove(&request.to_string()),
            };
        }
    }

    fn running(&self, id: &str, request: &Value) -> Option<ConversationId> {
        self.lock()
            .get(id)?
            .calls
            .get(&request.to_string())
            .copied()
    }
}

/// A JSON-RPC message as an HTTP response.
fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An error answering request `id` (or what could not be read as one), with the status the
/// SDKs give its code.
fn error_response(e: &RpcError, id: Value) -> Response {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::OK);
    json_response(status, &e.to(id))
}

fn with_session(mut response: Response, session: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(session) {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    response
}

/// A refused key: 401 with a `WWW-Authenticate` challenge, or 429 with `Retry-After`.
fn refused(e: AuthError) -> Response {
    let message = e.to_string();
    let (status, extra) = match &e {
        AuthError::RateLimited { retry_after, .. } => (
            StatusCode::TOO_MANY_REQUESTS,
            (
                header::RETRY_AFTER,
                retry_after.as_secs().max(1).to_string(),
            ),
        ),
        _ => (
            StatusCode::UNAUTHORIZED,
            (
                header::WWW_AUTHENTICATE,
                "Bearer realm=\"agency\", error=\"invalid_token\"".to_string(),
            ),
        ),
    };
    let mut response = json_response(
        status,
        &RpcError::new(INVALID_REQUEST, message).to(Value::Null),
    );
    if let Ok(v) = HeaderValue::from_str(&extra.1) {
        response.headers_mut().insert(extra.0, v);
    }
    response
}

fn not_found(selector: &str) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &RpcError::new(
            INVALID_REQUEST,
            format!("No agency `{selector}` for this key."),
        )
        .to(Value::Null),
    )
}

/// The key's agency, if `selector` (an id or a name) names it; another's does not exist.
async fn agency_of(
    s: &AppState,
    key: Result<Key, KeyRefused>,
    selector: &str,
) -> Result<(agency_core::ApiKey, Arc<Agency>), Response> {
    let Key(key) = key.map_err(|KeyRefused(e)| refused(e))?;
    let agency = match s.rt.agencies().published(key.agency_id).await {
        Ok(agency) => agency,
        Err(RuntimeError::AgencyNotFound(_)) => return Err(not_found(selector)),
        Err(e) => {
            tracing::error!(error = %e, "an MCP request could not load its agency");
            let e = RpcError::new(
                wire::INTERNAL_ERROR,
                "The server had an error; its operator can find it in the logs.",
            );
            return Err(json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &e.to(Value::Null),
            ));
        }
    };
    if selector != agency.name && selector != agency.id.to_string() {
        return Err(not_found(selector));
    }
    Ok((key, agency))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether a browser's `Origin` may call (the spec's guard against DNS rebinding): none sent
/// (not a browser), the server's own, or one the operator allows (`--cors-origin`).
fn origin_allowed(s: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = header(headers, "origin") else {
        return true;
    };
    let origin = origin.trim().to_ascii_lowercase();
    let own = header(headers, "host").is_some_and(|host| {
        origin
            .split_once("://")
            .is_some_and(|(_, at)| at == host.trim().to_ascii_lowercase())
    });
    own || match &s.cors {
        crate::openai::CorsOrigins::Any => true,
        crate::openai::CorsOrigins::Only(list) => list.contains(&origin),
        crate::openai::CorsOrigins::None => false,
    }
}

fn forbidden_origin() -> Response {
    let e = RpcError::new(
        INVALID_REQUEST,
        "Forbidden: this Origin may not call the server.",
    );
    json_response(StatusCode::FORBIDDEN, &e.to(Value::Null))
}

/// Whether the client takes what a POST may answer (JSON, and events for a call's progress).
fn accepts(headers: &HeaderMap) -> bool {
    let Some(accept) = header(headers, "accept") else {
        return true;
    };
    accept.split(',').any(|t| {
        let t = t.split(';').next().unwrap_or("").trim();
        matches!(t, "application/json" | "application/*" | "*/*")
    })
}

/// `POST /api/agency/{agency}/mcp`: one message of a client.
async fn post_message(
    State(s): State<AppState>,
    Extension(sessions): Extension<Arc<Sessions>>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if !origin_allowed(&s, &headers) {
        return forbidden_origin();
    }
    let (key, agency) = match agency_of(&s, key, &selector).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    if !accepts(&headers) {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    }
    let body = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let e = RpcError::new(
                INVALID_REQUEST,
                format!("The request is larger than {} MiB.", MAX_BODY >> 20),
            );
            return json_response(StatusCode::PAYLOAD_TOO_LARGE, &e.to(Value::Null));
        }
        Err(e) => {
            return error_response(&RpcError::new(INVALID_REQUEST, e.body_text()), Value::Null);
        }
    };
    let message = match wire::parse(&body) {
        Ok(message) => message,
        Err(e) => return error_response(&e, Value::Null),
    };
    let asker = Asker::Key {
        key: key.clone(),
        agency,
    };
    let session = header(&headers, SESSION_HEADER).map(str::to_string);
    match session {
        Some(session) => {
            let Some(version) = sessions.version(&session, key.id) else {
                let e = RpcError::new(INVALID_REQUEST, "Session not found");
                return json_response(StatusCode::NOT_FOUND, &e.to(Value::Null));
            };
            if let Some(asked) = header(&headers, VERSION_HEADER)
                && !wire::HANDSHAKE.contains(&asked)
            {
                return error_response(&RpcError::unsupported_version(asked), Value::Null);
            }
            let era = Era::Handshake(Some(version));
            let response = in_session(&s, &sessions, &session, asker, era, message).await;
            with_session(response, &session)
        }
        None => stateless(&s, &sessions, &headers, (key.id, asker), message).await,
    }
}

/// A message without a session: an `initialize`, or a 2026-07-28 request.
async fn stateless(
    s: &AppState,
    sessions: &Sessions,
    headers: &HeaderMap,
    (key, asker): (uuid::Uuid, Asker),
    message: Message,
) -> Response {
    let version = header(headers, VERSION_HEADER);
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (id, method, params),
        Message::Notification { .. } | Message::Response => {
            return match version {
                Some(v) if !wire::is_supported(v) => {
                    error_response(&RpcError::unsupported_version(v), Value::Null)
                }
                _ => StatusCode::ACCEPTED.into_response(),
            };
        }
    };
    if method == "initialize" && version.is_none_or(|v| v != wire::MODERN) {
        let reply = super::answer(asker.agency(), &Era::Handshake(None), id, &method, params);
        return match reply {
            Reply::Initialized { response, version } => {
                let session = sessions.open(key, version);
                with_session(json_response(StatusCode::OK, &response), &session)
            }
            Reply::Now(response) => json_response(StatusCode::BAD_REQUEST, &response),
            Reply::Call { .. } => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        };
    }
    if let Err(e) = modern_envelope(headers, &method, &params) {
        return error_response(&e, id);
    }
    let span = super::span(&method, &params, &Era::Modern, &id, None);
    let reply = super::answer(asker.agency(), &Era::Modern, id, &method, params);
    span.run(respond(s, asker, true, reply, None)).await
}

/// The checks of a 2026-07-28 request, in the SDKs' order: the envelope, the headers that
/// mirror it, then its version.
fn modern_envelope(
    headers: &HeaderMap,
    method: &str,
    params: &serde_json::Map<String, Value>,
) -> Result<(), RpcError> {
    let header_version = header(headers, VERSION_HEADER);
    let body_version = wire::envelope_version(params)?;
    let Some(body_version) = body_version else {
        return Err(match header_version {
            // A handshake-era client without its session.
            None => RpcError::new(INVALID_REQUEST, "Bad Request: Missing session ID"),
            Some(v) if wire::HANDSHAKE.contains(&v) => {
                RpcError::new(INVALID_REQUEST, "Bad Request: Missing session ID")
            }
            Some(v) if v != wire::MODERN => RpcError::unsupported_version(v),
            Some(_) => RpcError::invalid_params(format!(
                "params._meta must be an object carrying the required '{}' and '{}' envelope keys",
                wire::META_VERSION,
                wire::META_CAPABILITIES
            )),
        });
    };
    let mismatch = |what: &str| {
        RpcError::new(
            HEADER_MISMATCH,
            format!("{what} header does not match the request body"),
        )
    };
    if header_version != Some(body_version.as_str()) {
        return Err(mismatch(VERSION_HEADER));
    }
    if header(headers, METHOD_HEADER) != Some(method) {
        return Err(mismatch(METHOD_HEADER));
    }
    if method == "tools/call"
        && let Some(name) = params.get("name").and_then(Value::as_str)
        && header(headers, NAME_HEADER) != Some(name)
    {
        return Err(mismatch(NAME_HEADER));
    }
    if body_version != wire::MODERN {
        return Err(RpcError::unsupported_version(&body_version));
    }
    Ok(())
}

/// A message of a 2025-11-25 session.
async fn in_session(
    s: &AppState,
    sessions: &Arc<Sessions>,
    session: &str,
    asker: Asker,
    era: Era,
    message: Message,
) -> Response {
    match message {
        Message::Request { id, method, params } => {
            if method == "initialize" {
                let e = RpcError::new(INVALID_REQUEST, "The session is already initialized.");
                return json_response(StatusCode::OK, &e.to(id));
            }
            let span = super::span(&method, &params, &era, &id, Some(session));
            let reply = super::answer(asker.agency(), &era, id, &method, params);
            let track = (sessions.clone(), session.to_string());
            span.run(respond(s, asker, false, reply, Some(track))).await
        }
        Message::Notification { method, params } => {
            if method == "notifications/cancelled"
                && let Some(request) = params.get("requestId")
            {
                let running = sessions.running(session, request);
                let cancelled = running.map(|c| s.rt.cancel(c));
                tracing::debug!(?running, ?cancelled, "an MCP client cancelled a call");
            }
            StatusCode::ACCEPTED.into_response()
        }
        Message::Response => StatusCode::ACCEPTED.into_response(),
    }
}

/// A reply on the wire; a call runs, its events streamed when the client asked for progress.
async fn respond(
    s: &AppState,
    asker: Asker,
    modern: bool,
    reply: Reply,
    session: Option<(Arc<Sessions>, String)>,
) -> Response {
    let (id, token, call) = match reply {
        Reply::Now(response) => {
            // An error's status: the 2026-07-28 table; a session's clients (the TypeScript
            // SDK's among them) read a JSON-RPC error only from a 200.
            let status = response
                .get("error")
                .and_then(|e| e.get("code"))
                .and_then(Value::as_i64)
                .filter(|_| modern)
                .and_then(|code| StatusCode::from_u16(wire::http_status(code)).ok())
                .unwrap_or(StatusCode::OK);
            return json_response(status, &response);
        }
        Reply::Initialized { response, .. } => return json_response(StatusCode::OK, &response),
        Reply::Call { id, token, call } => (id, token, call),
    };
    let streamed = token.is_some();
    let (tx, mut rx) = mpsc::channel::<Value>(32);
    let rt = s.rt.clone();
    let request = id.clone();
    let tracked = session.clone();
    tokio::spawn(agency_telemetry::Span::current().run(async move {
        let begun = |conversation| {
            if let Some((sessions, session)) = &tracked {
                sessions.call(session, &request, Some(conversation));
            }
        };
        super::run_call(rt, asker, modern, (id, token, call), tx, begun).await;
        if let Some((sessions, session)) = &tracked {
            sessions.call(session, &request, None);
        }
    }));
    if !streamed {
        return match rx.recv().await {
            Some(response) => json_response(StatusCode::OK, &response),
            None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        };
    }
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let message = rx.recv().await?;
        let event = Event::default().event("message").data(message.to_string());
        Some((Ok::<_, Infallible>(event), rx))
    });
    Sse::new(crate::counted(events))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

/// `GET`: no stream of the server's own messages (it sends none outside a request's).
async fn get_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST, DELETE")],
    )
        .into_response()
}

/// `DELETE`: the client ends its session.
async fn end_session(
    State(s): State<AppState>,
    Extension(sessions): Extension<Arc<Sessions>>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
) -> Response {
    if !origin_allowed(&s, &headers) {
        return forbidden_origin();
    }
    let (key, _) = match agency_of(&s, key, &selector).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    match header(&headers, SESSION_HEADER) {
        Some(session) if sessions.end(session, key.id) => StatusCode::OK.into_response(),
        Some(_) => {
            let e = RpcError::new(INVALID_REQUEST, "Session not found");
            json_response(StatusCode::NOT_FOUND, &e.to(Value::Null))
        }
        None => {
            let e = RpcError::new(INVALID_REQUEST, "Bad Request: Missing session ID");
            json_response(StatusCode::BAD_REQUEST, &e.to(json!(null)))
        }
    }
}
