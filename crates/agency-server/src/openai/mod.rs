//! The drop-in OpenAI endpoint: `POST /v1/chat/completions` (the agency named by `model`) and
//! `POST /api/agency/{agency}/chat/completions` (by id or name), with `GET .../models` beside
//! each. An app pointed here with an agency's key cannot tell it is talking to a team.

mod cors;
mod error;
mod format;
mod prefill;
mod responses;
pub mod tools;
pub mod types;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agency_core::{Agency, ApiKey, ChatMessage, ConversationId, Role, StopReason};
use agency_runtime::api::{ChatTurn, Opened};
use agency_runtime::{RuntimeError, TurnOutcome};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::options;
use chrono::Utc;
pub use cors::CorsOrigins;
pub use error::OpenAiError;
use prefill::Continuation;
use tracing::Instrument;
use types::{ChatRequest, Content};

use crate::AppState;
use crate::auth::{Key, KeyRefused};
use agency_runtime::keys::AuthError;

/// Largest request body: a long history of long messages, but not unbounded.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// The header that carries (and may name) the conversation.
pub const CONVERSATION_HEADER: &str = "x-agency-conversation";
/// The header that names a request (OpenAI's).
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// Comments sent while the agents work, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The OpenAI routes, answering browsers of `cors` origins.
pub fn routes(cors: &CorsOrigins) -> Router<AppState> {
    // Each answers a browser's preflight (`OPTIONS`), with CORS headers when `cors` allows.
    let preflight = || options(cors::preflight);
    let routes = Router::new()
        .route("/v1/chat/completions", preflight().post(v1_chat))
        .route("/v1/models", preflight().get(v1_models))
        .route("/v1/models/{model}", preflight().get(v1_model))
        .route(
            "/api/agency/{agency}/chat/completions",
            preflight().post(agency_chat),
        )
        .route(
            "/api/agency/{agency}/models",
            preflight().get(agency_models),
        )
        .route(
            "/api/agency/{agency}/models/{model}",
            preflight().get(agency_model),
        )
        .route("/v1/responses", preflight().post(responses::v1_create))
        .route(
            "/v1/responses/{id}",
            preflight()
                .get(responses::v1_get)
                .delete(responses::v1_delete),
        )
        .route(
            "/v1/responses/{id}/input_items",
            preflight().get(responses::v1_input_items),
        )
        .route(
            "/api/agency/{agency}/responses",
            preflight().post(responses::agency_create),
        )
        .route(
            "/api/agency/{agency}/responses/{id}",
            preflight()
                .get(responses::agency_get)
                .delete(responses::agency_delete),
        )
        .route(
            "/api/agency/{agency}/responses/{id}/input_items",
            preflight().get(responses::agency_input_items),
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
    let id = format!("req_{}", uuid::Uuid::now_v7().simple());
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

async fn v1_chat(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    key: Result<Key, KeyRefused>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // Boxed: the turn's future is tens of kilobytes, and axum moves a handler's future
    // several times before it is first polled (docs/benchmarks.md, "Against another commit").
    Box::pin(chat(s, &request, None, key, headers, body))
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn agency_chat(
    State(s): State<AppState>,
    Extension(request): Extension<RequestId>,
    Path(agency): Path<String>,
    key: Result<Key, KeyRefused>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    Box::pin(chat(s, &request, Some(agency), key, headers, body))
        .await
        .unwrap_or_else(IntoResponse::into_response)
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
    let agency = match s.rt.published_agency(key.agency_id).await {
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

fn auth_error(e: AuthError) -> OpenAiError {
    let message = e.to_string();
    match e {
        AuthError::Missing => OpenAiError::unauthorized(message, None),
        AuthError::Invalid(_) | AuthError::Revoked(_) => {
            OpenAiError::unauthorized(message, Some("invalid_api_key"))
        }
        AuthError::Expired(_) => OpenAiError::unauthorized(message, Some("expired_api_key")),
        AuthError::RateLimited { retry_after, .. } => OpenAiError {
            kind: "requests",
            retry_after_secs: Some(retry_after.as_secs().max(1)),
            ..OpenAiError::invalid(message, None)
                .status(StatusCode::TOO_MANY_REQUESTS)
                .with_code("rate_limit_exceeded")
        },
    }
}

/// A runtime error as the client sees it. What went wrong inside the agency (which agent, which
/// provider, what it said) is for its owner: logged under the request's id, which the message
/// gives, and kept with the failed turn in the conversation.
fn runtime_error(e: RuntimeError, request: &RequestId) -> OpenAiError {
    match e {
        RuntimeError::AgencyNotFound(name) => OpenAiError::model_not_found(&name),
        RuntimeError::NotPublished(_) => OpenAiError::invalid(e.to_string(), Some("model"))
            .status(StatusCode::NOT_FOUND)
            .with_code("model_not_found"),
        RuntimeError::ConversationNotFound(id) => OpenAiError::invalid(
            format!(
                "No conversation {id} for this agency (from the `{CONVERSATION_HEADER}` header)."
            ),
            None,
        )
        .status(StatusCode::NOT_FOUND)
        .with_code("conversation_not_found"),
        RuntimeError::Invalid(m) => OpenAiError::invalid(m, Some("messages")),
        RuntimeError::Conflict(m) => OpenAiError::invalid(m, None).status(StatusCode::CONFLICT),
        RuntimeError::Model {
            agent,
            ref name,
            ref error,
        } => {
            tracing::warn!(
                request_id = %request,
                agent = %agent,
                agent_name = %name,
                error = %error,
                "the agency could not answer: a model failed"
            );
            OpenAiError::server(
                StatusCode::BAD_GATEWAY,
                format!(
                    "The agency could not answer this request ({request}); its owner can find what failed in the server's logs and the conversation browser."
                ),
            )
        }
        RuntimeError::Validation(_)
        | RuntimeError::Unauthorized(_)
        | RuntimeError::TooManyAttempts(_)
        | RuntimeError::RoomNotFound(_)
        | RuntimeError::NotFound(_)
        | RuntimeError::Store(_) => {
            tracing::error!(request_id = %request, error = %e, "chat completion failed");
            OpenAiError::server(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "The server had an error while processing your request ({request}); its operator can find it in the server's logs."
                ),
            )
        }
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

async fn chat(
    s: AppState,
    request_id: &RequestId,
    path_agency: Option<String>,
    key: Result<Key, KeyRefused>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let body = body_of(body)?;
    // Like OpenAI: the key first, then the body.
    let bearer_check = authorize(&s, request_id, key, None).await?;
    let request: ChatRequest = serde_json::from_slice(&body).map_err(|e| {
        OpenAiError::invalid(
            format!("We could not parse the JSON body of your request: {e}"),
            None,
        )
    })?;
    let (key, agency) = bearer_check;
    let selector = match (&path_agency, &request.model) {
        (Some(path), _) => path.clone(),
        (None, Some(model)) if !model.trim().is_empty() => model.clone(),
        (None, _) => {
            return Err(OpenAiError::invalid(
                "You must provide a model parameter.",
                Some("model"),
            ));
        }
    };
    if !names(&agency, &selector) {
        return Err(OpenAiError::model_not_found(&selector));
    }
    let stream = request.stream.unwrap_or(false);
    let include_usage = check(&request, stream)?;
    let end_user = end_user(&request.other);
    let client = tools::client_tools(
        request.other.get("tools"),
        request.other.get("tool_choice"),
        request.other.get("parallel_tool_calls"),
    )?;
    let format =
        format::response_format(request.response_format.as_ref(), "response_format", false)?;
    if format == Some(agency_runtime::format::ResponseFormat::JsonObject)
        && !request.messages.iter().any(mentions_json)
    {
        return Err(OpenAiError::invalid(
            "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
            Some("messages"),
        ));
    }
    let mut turn = chat_turn(request.messages, false)?;
    turn.end_user = end_user;
    turn.format = format;
    turn.tools = client.tools;
    turn.tool_use = client.tool_use;
    turn.conversation = named_conversation(&headers)?;
    let prefill = turn.prefill.clone();

    let rt = s.rt.clone();
    let conversation = rt
        .api_conversation(&key, &agency, &turn)
        .await
        .map_err(|e| runtime_error(e, request_id))?;
    tracing::Span::current().record("conversation", tracing::field::display(conversation.id()));
    let conversation_header = HeaderValue::from_str(&conversation.id().to_string()).ok();
    let mut response = if stream {
        stream_turn(
            s,
            request_id.clone(),
            key,
            agency,
            conversation,
            turn,
            include_usage,
        )
    } else {
        let out = rt
            .api_turn(&key, conversation, turn, None)
            .await
            .map_err(|e| runtime_error(e, request_id))?;
        axum::Json(completion(&agency, &out, prefill.as_deref())).into_response()
    };
    if let Some(v) = conversation_header {
        response.headers_mut().insert(CONVERSATION_HEADER, v);
    }
    Ok(response)
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

/// Refuses what an agency cannot do, by parameter. Returns whether usage goes in the stream.
fn check(r: &ChatRequest, stream: bool) -> Result<bool, OpenAiError> {
    if let Some((name, _)) = r
        .other
        .iter()
        .find(|(k, v)| types::REFUSED.contains(&k.as_str()) && !v.is_null())
    {
        let why = match name.as_str() {
            "functions" | "function_call" => {
                "it is deprecated; declare the same functions in `tools` (and use `tool_choice`)"
            }
            _ => "an agency answers with text from its manager; audio is not available",
        };
        return Err(OpenAiError::invalid(
            format!("`{name}` is not supported: {why}."),
            Some(name),
        ));
    }
    if let Some(name) = r.other.keys().find(|k| {
        ![types::IGNORED, types::REFUSED, types::TOOLS]
            .iter()
            .any(|list| list.contains(&k.as_str()))
    }) {
        return Err(OpenAiError::invalid(
            format!("Unrecognized request argument supplied: {name}"),
            Some(name),
        ));
    }
    if let Some(modalities) = r.other.get("modalities").and_then(|m| m.as_array())
        && modalities.iter().any(|m| m.as_str() != Some("text"))
    {
        return Err(OpenAiError::invalid(
            "Only the `text` modality is supported by an agency.",
            Some("modalities"),
        ));
    }
    if r.n.is_some_and(|n| n != 1) {
        return Err(OpenAiError::invalid(
            "Only `n: 1` is supported: an agency gives one answer.",
            Some("n"),
        ));
    }
    if r.logprobs == Some(true) {
        return Err(OpenAiError::invalid(
            "`logprobs` is not supported by an agency.",
            Some("logprobs"),
        ));
    }
    match &r.stream_options {
        Some(_) if !stream => Err(OpenAiError::invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            Some("stream_options"),
        )),
        Some(o) => Ok(o.include_usage),
        None => Ok(false),
    }
}

/// The messages as a conversation turn: system messages, the transcript so far (with the
/// calls of the client's tools and their results), the new messages (what follows the last
/// assistant message: the user's, and the results of its calls), and a last assistant message
/// without calls as the prefill. Tool messages are checked as OpenAI checks them: each answers
/// a call of the assistant message before it, and every call is answered before anything else.
/// A request `continuing` a stored conversation (the Responses API's `previous_response_id`)
/// need not hold a user message: the conversation has them.
fn chat_turn(messages: Vec<types::ChatMessage>, continuing: bool) -> Result<ChatTurn, OpenAiError> {
    if messages.is_empty() {
        return Err(OpenAiError::invalid(
            "`messages` must hold at least one message.",
            Some("messages"),
        ));
    }
    let mut system = Vec::new();
    let mut rest: Vec<ChatMessage> = Vec::new();
    // The calls of the last assistant message not answered yet: (id, name).
    let mut open: Vec<(String, String)> = Vec::new();
    let unanswered = |open: &[(String, String)]| {
        OpenAiError::invalid(
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.iter()
                    .map(|(id, _)| id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some("messages"),
        )
    };
    for (i, m) in messages.into_iter().enumerate() {
        let param = format!("messages[{i}]");
        let calls = match (m.role.as_str(), m.other.get("tool_calls")) {
            ("assistant", Some(calls)) => {
                tools::history_calls(calls, &format!("{param}.tool_calls"))?
            }
            _ => Vec::new(),
        };
        let mut images = Vec::new();
        let text = match m.content {
            None if !calls.is_empty() => String::new(),
            None => {
                return Err(OpenAiError::invalid(
                    format!("{param} has no content."),
                    Some(&param),
                ));
            }
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => parts
                .iter()
                .enumerate()
                .map(|(j, part)| {
                    part_text(part, &m.role, &format!("{param}.content[{j}]"), &mut images)
                })
                .collect::<Result<Vec<_>, _>>()?
                .join("\n"),
        };
        if m.role != "tool" && !open.is_empty() {
            return Err(unanswered(&open));
        }
        match m.role.as_str() {
            "system" | "developer" => system.push(text),
            "user" => rest.push(ChatMessage {
                images,
                ..ChatMessage::new(Role::User, text)
            }),
            "assistant" if calls.is_empty() => rest.push(ChatMessage::new(Role::Assistant, text)),
            "assistant" => {
                open = calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                rest.push(ChatMessage::calls(text, calls));
            }
            "tool" => {
                let id = m.other.get("tool_call_id").and_then(|v| v.as_str());
                let Some(at) = id.and_then(|id| open.iter().position(|(open, _)| open == id))
                else {
                    return Err(OpenAiError::invalid(
                        format!(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' ({param}.tool_call_id)."
                        ),
                        Some(&format!("{param}.tool_call_id")),
                    ));
                };
                let (id, name) = open.remove(at);
                rest.push(ChatMessage::result(id, name, text));
            }
            other => {
                return Err(OpenAiError::invalid(
                    format!(
                        "{param}: role `{other}` is not supported (use system, developer, user, assistant or tool)."
                    ),
                    Some(&param),
                ));
            }
        }
    }
    if !open.is_empty() {
        return Err(unanswered(&open));
    }
    // A last assistant message is a prefill: the beginning of the answer the client wants.
    let prefill = match rest.last() {
        Some(last) if last.role == Role::Assistant => rest.pop().map(|m| m.text),
        _ => None,
    };
    if !continuing && !rest.iter().any(|m| m.role == Role::User) {
        return Err(OpenAiError::invalid(
            "`messages` must hold a user message.",
            Some("messages"),
        ));
    }
    let start = rest
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    let input = rest.split_off(start);
    if input.is_empty() {
        return Err(OpenAiError::invalid(
            "A last assistant message (a prefill) must follow the user's message, not another assistant message.",
            Some("messages"),
        ));
    }
    if input
        .iter()
        .all(|m| m.role == Role::User && m.text.trim().is_empty())
    {
        return Err(OpenAiError::invalid(
            "The user's message is empty.",
            Some("messages"),
        ));
    }
    Ok(ChatTurn {
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        history: rest,
        input,
        prefill: prefill.filter(|p| !p.trim().is_empty()),
        ..ChatTurn::default()
    })
}

/// Whether a message says "json" anywhere in its text (OpenAI asks it of `json_object`).
fn mentions_json(m: &types::ChatMessage) -> bool {
    let says = |t: &str| t.to_ascii_lowercase().contains("json");
    match &m.content {
        Some(Content::Text(t)) => says(t),
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
            .any(says),
        None => false,
    }
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

/// The longest image URL shown in full to the manager; longer ones are cut.
const MAX_IMAGE_URL: usize = 256;

/// A content part as text: a text part as it is (and an assistant's refusal), an image in a
/// user message as a short placeholder that names it in the text — `[image: URL]`, or
/// `[image: inline image]` for a `data:` URL, never copied into text (it may be megabytes) —
/// with the image itself pushed to `images` (the manager's model is sent it). Other parts
/// (audio, files) are refused by name.
fn part_text(
    part: &serde_json::Value,
    role: &str,
    param: &str,
    images: &mut Vec<String>,
) -> Result<String, OpenAiError> {
    let kind = part.get("type").and_then(|t| t.as_str());
    let field = |name: &str| part.get(name).and_then(|v| v.as_str());
    match (kind, role) {
        (Some("text"), _) => field("text").map(str::to_string).ok_or_else(|| {
            OpenAiError::invalid(format!("{param}: a text part needs `text`."), Some(param))
        }),
        (Some("refusal"), "assistant") => field("refusal").map(str::to_string).ok_or_else(|| {
            OpenAiError::invalid(
                format!("{param}: a refusal part needs `refusal`."),
                Some(param),
            )
        }),
        (Some("image_url"), "user") => {
            let image = part.get("image_url");
            let url = image
                .and_then(|i| i.get("url"))
                .or(image)
                .and_then(|u| u.as_str())
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        format!("{param}: an image_url part needs `image_url.url`."),
                        Some(param),
                    )
                })?;
            let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
            if !matches!(scheme.as_deref(), Some("https" | "http" | "data")) {
                return Err(OpenAiError::invalid(
                    format!("{param}: `image_url.url` must be an https, http or data: URL."),
                    Some(param),
                ));
            }
            images.push(url.to_string());
            Ok(image_placeholder(url))
        }
        (Some(other), _) => Err(OpenAiError::invalid(
            format!(
                "{param}: `{other}` content parts are not supported in {role} messages: an agency reads text parts, and image parts in user messages."
            ),
            Some(param),
        )),
        (None, _) => Err(OpenAiError::invalid(
            format!("{param}: a content part needs a `type`."),
            Some(param),
        )),
    }
}

/// What the manager reads for an image at `url`.
fn image_placeholder(url: &str) -> String {
    if url
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("data:"))
    {
        return "[image: inline image]".into();
    }
    match url.char_indices().nth(MAX_IMAGE_URL) {
        Some((cut, _)) => format!("[image: {}…]", &url[..cut]),
        None => format!("[image: {url}]"),
    }
}

fn finish_reason(stopped_by: StopReason) -> &'static str {
    if stopped_by == StopReason::ToolCalls {
        "tool_calls"
    } else if stopped_by.is_guard() {
        "length"
    } else {
        "stop"
    }
}

fn usage(out: &TurnOutcome) -> types::Usage {
    types::Usage {
        prompt_tokens: out.usage.prompt_tokens,
        completion_tokens: out.usage.completion_tokens,
        total_tokens: out.usage.total(),
        prompt_tokens_details: types::PromptTokensDetails::default(),
        completion_tokens_details: types::CompletionTokensDetails::default(),
    }
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

fn completion_id(out: &TurnOutcome) -> String {
    format!("chatcmpl-{}", out.turn_id.0.simple())
}

/// The completion of a turn; with a prefill, its answer is what follows the prefill.
fn completion(agency: &Agency, out: &TurnOutcome, prefill: Option<&str>) -> types::ChatCompletion {
    types::ChatCompletion {
        id: completion_id(out),
        object: "chat.completion",
        created: Utc::now().timestamp(),
        model: agency.name.clone(),
        choices: vec![types::Choice {
            index: 0,
            message: if out.tool_calls.is_empty() {
                types::AssistantMessage {
                    role: "assistant",
                    content: Some(Continuation::whole(prefill, &out.answer)),
                    refusal: None,
                    annotations: Vec::new(),
                    tool_calls: None,
                }
            } else {
                types::AssistantMessage {
                    role: "assistant",
                    content: None,
                    refusal: None,
                    annotations: Vec::new(),
                    tool_calls: Some(tools::wire_calls(&out.tool_calls, false)),
                }
            },
            logprobs: None,
            finish_reason: finish_reason(out.stopped_by),
        }],
        usage: usage(out),
        service_tier: types::SERVICE_TIER,
        system_fingerprint: fingerprint(agency),
    }
}

/// A streamed answer: the role chunk at once, keep-alive comments while the agents work, then
/// the answer's pieces, the finish chunk, the usage chunk when asked for, and `[DONE]`.
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

fn stream_turn(
    s: AppState,
    request_id: RequestId,
    key: ApiKey,
    agency: Arc<Agency>,
    conversation: Opened,
    turn: ChatTurn,
    include_usage: bool,
) -> Response {
    let mut continuation = Continuation::new(turn.prefill.as_deref());
    let mut first_token = FirstToken::new(&agency.name);
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(32);
    let id = format!("chatcmpl-{}", uuid::Uuid::now_v7().simple());
    let created = Utc::now().timestamp();
    let model = agency.name.clone();
    let system_fingerprint = fingerprint(&agency);
    let chunk = move |delta: types::Delta,
                      finish: Option<&'static str>,
                      with_usage: Option<Option<types::Usage>>| {
        let choices = match (&delta, finish, &with_usage) {
            (_, None, Some(Some(_))) => Vec::new(),
            _ => vec![types::ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish,
            }],
        };
        types::Chunk {
            id: id.clone(),
            object: "chat.completion.chunk",
            created,
            model: model.clone(),
            choices,
            usage: with_usage,
            service_tier: types::SERVICE_TIER,
            system_fingerprint: system_fingerprint.clone(),
        }
    };
    let usage_slot = move || include_usage.then_some(None);
    tokio::spawn(agency_telemetry::Span::current().run(
        async move {
            let send = |c: types::Chunk| {
                let tx = tx.clone();
                async move {
                    if let Ok(data) = serde_json::to_string(&c) {
                        let _ = tx.send(Event::default().data(data)).await;
                    }
                }
            };
            send(chunk(
                types::Delta {
                    role: Some("assistant"),
                    content: Some(String::new()),
                    tool_calls: None,
                },
                None,
                usage_slot(),
            ))
            .await;
            // The answer streams as the manager's model writes it, when it can; what did not
            // stream (all of it, with a model that does not stream) follows when the turn ends.
            let (answer_tx, mut answer_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let rt = s.rt.clone();
            let running = tokio::spawn(agency_telemetry::Span::current().run(
                async move { rt.api_turn(&key, conversation, turn, Some(answer_tx)).await }
                    .in_current_span(),
            ));
            let mut streamed = String::new();
            while let Some(piece) = answer_rx.recv().await {
                streamed.push_str(&piece);
                let piece = continuation.push(&piece);
                if piece.is_empty() {
                    continue;
                }
                first_token.seen();
                send(chunk(
                    types::Delta {
                        content: Some(piece),
                        ..types::Delta::default()
                    },
                    None,
                    usage_slot(),
                ))
                .await;
            }
            let result = running
                .await
                .unwrap_or_else(|e| Err(RuntimeError::Invalid(format!("the turn stopped: {e}"))));
            match result {
                Ok(out) => {
                    if out.tool_calls.is_empty() {
                        let rest = match out.answer.strip_prefix(streamed.as_str()) {
                            Some(rest) => rest.to_string(),
                            None => {
                                // Text streamed from a reply the agency did not keep as its answer.
                                tracing::warn!(
                                    "a streamed answer was replaced; sending the final answer after it"
                                );
                                format!("\n\n{}", out.answer)
                            }
                        };
                        let rest = continuation.push(&rest) + &continuation.finish();
                        if !rest.is_empty() {
                            first_token.seen();
                        }
                        for piece in rest.split_inclusive(char::is_whitespace) {
                            send(chunk(
                                types::Delta {
                                    content: Some(piece.to_string()),
                                    ..types::Delta::default()
                                },
                                None,
                                usage_slot(),
                            ))
                            .await;
                        }
                    } else {
                        // The turn paused on the client's tools: each call whole in one delta.
                        send(chunk(
                            types::Delta {
                                tool_calls: Some(tools::wire_calls(&out.tool_calls, true)),
                                ..types::Delta::default()
                            },
                            None,
                            usage_slot(),
                        ))
                        .await;
                    }
                    send(chunk(
                        types::Delta::default(),
                        Some(finish_reason(out.stopped_by)),
                        usage_slot(),
                    ))
                    .await;
                    if include_usage {
                        send(chunk(
                            types::Delta::default(),
                            None,
                            Some(Some(usage(&out))),
                        ))
                        .await;
                    }
                }
                Err(e) => {
                    let body = runtime_error(e, &request_id).body();
                    let _ = tx.send(Event::default().data(body.to_string())).await;
                }
            }
            let _ = tx.send(Event::default().data("[DONE]")).await;
        }
        // The turn outlives the response's head: it logs under the request's id too.
        .in_current_span(),
    ));
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(crate::counted(events))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}
