//! Every agency is an A2A v1.0 agent (issue 34): its agent card at
//! `/api/agency/{agency}/a2a/.well-known/agent-card.json`, and the protocol's operations at the
//! base URL `/api/agency/{agency}/a2a` over both HTTP bindings — JSON-RPC (`POST` to the base
//! URL, [`jsonrpc`]) and HTTP+JSON (`/message:send`, `/tasks/{id}`, …, [`rest`]).
//!
//! A face on the runtime's one pipeline: the translator ([`send`]) reads a message into a
//! `TurnRequest` with the key as its caller and begins it ([`agency_runtime::Runtime::begin`]);
//! the runtime keeps the task ([`agency_runtime::tasks`]); the encoder ([`encode`]) writes the
//! task and the turn's events as A2A's. A task's context is the conversation it runs in.

mod card;
mod encode;
mod error;
mod jsonrpc;
mod rest;
mod types;

use std::sync::Arc;

use agency_core::{Agency, ApiKey, ChatMessage, ConversationId, Role};
use agency_runtime::api::{ApprovalAnswer, ChatTurn};
use agency_runtime::tasks::{TaskQuery, TaskRecord, TaskState, TaskUpdate};
use agency_runtime::{Ask, Caller, TurnEvent, TurnRequest};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc::UnboundedReceiver;

pub use error::A2aError;
use error::Kind;
use types::{ListTasksRequest, ListTasksResponse, Message, SendMessageRequest};

use crate::AppState;
use crate::auth::{Key, KeyRefused};

/// The header a client names the protocol's version in.
pub const VERSION_HEADER: &str = "a2a-version";
/// The default and the largest page of `ListTasks`.
const PAGE: i64 = 50;
/// The longest text a message may carry, all parts together.
const MAX_TEXT: usize = 1024 * 1024;

pub fn routes() -> Router<AppState> {
    let base = "/api/agency/{agency}/a2a";
    Router::new()
        .route(base, post(jsonrpc::handle))
        .route(
            &format!("{base}/.well-known/agent-card.json"),
            get(card::card),
        )
        .route(&format!("{base}/message:send"), post(rest::send))
        .route(&format!("{base}/message:stream"), post(rest::stream))
        .route(&format!("{base}/tasks"), get(rest::list))
        .route(
            &format!("{base}/tasks/{{task}}"),
            get(rest::task_get).post(rest::task_post),
        )
        .route(
            &format!("{base}/{{*rest}}"),
            axum::routing::any(rest::unknown),
        )
        .layer(DefaultBodyLimit::max(crate::openai::MAX_BODY))
}

/// A request let in: its key, and the agency (published) the path names.
pub(crate) struct Admitted {
    key: ApiKey,
    agency: Arc<Agency>,
}

/// The key first (401, 429 as the `Authenticator` says), then the agency the path names (by
/// id or name; another's does not exist).
async fn admit(
    s: &AppState,
    selector: &str,
    key: Result<Key, KeyRefused>,
) -> Result<Admitted, A2aError> {
    let Key(key) = key.map_err(|KeyRefused(e)| A2aError::from(e))?;
    let agency = s.rt.agencies().published(key.agency_id).await?;
    if selector != agency.name && selector != agency.id.to_string() {
        return Err(A2aError::new(
            Kind::TaskNotFound,
            format!("No agency `{selector}` for this key."),
        ));
    }
    Ok(Admitted { key, agency })
}

/// The version the request asks for must be 1.x: none means 0.3, which this face does not
/// speak.
fn check_version(headers: &HeaderMap) -> Result<(), A2aError> {
    let asked = headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let ok = asked.is_some_and(|v| v == "1" || v.split('.').next() == Some("1"));
    if ok {
        return Ok(());
    }
    Err(A2aError::new(
        Kind::VersionNotSupported,
        format!(
            "A2A version '{}' is not supported: send `A2A-Version: {}`.",
            asked.unwrap_or("0.3"),
            types::VERSION
        ),
    ))
}

/// A task id as the client gave it.
fn task_id(id: &str) -> Result<uuid::Uuid, A2aError> {
    id.trim().parse().map_err(|_| A2aError::task_not_found(id))
}

/// The text (and images) of a client's message; other parts are refused.
fn read_message(message: &Message) -> Result<ChatMessage, A2aError> {
    if !matches!(message.role.as_str(), "ROLE_USER" | "user") {
        return Err(A2aError::invalid(
            "`message.role` must be ROLE_USER: an agency answers its user's messages.",
        ));
    }
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for (i, part) in message.parts.iter().enumerate() {
        let media = part.media_type.as_deref().unwrap_or("");
        if let Some(text) = &part.text {
            texts.push(text.clone());
        } else if let Some(data) = &part.data {
            texts.push(data.to_string());
        } else if let Some(url) = part.url.as_ref().filter(|_| media.starts_with("image/")) {
            images.push(url.clone());
        } else if let Some(raw) = part.raw.as_ref().filter(|_| media.starts_with("image/")) {
            images.push(format!("data:{media};base64,{raw}"));
        } else {
            return Err(A2aError::new(
                Kind::ContentTypeNotSupported,
                format!(
                    "`message.parts[{i}]`: an agency reads text, data and images (a url or raw part with an image/* mediaType)."
                ),
            ));
        }
    }
    let text = texts.join("\n\n");
    if text.trim().is_empty() && images.is_empty() {
        return Err(A2aError::invalid("`message.parts` holds no text."));
    }
    if text.len() > MAX_TEXT {
        return Err(A2aError::invalid(format!(
            "The message is longer than {} KiB.",
            MAX_TEXT >> 10
        )));
    }
    let mut chat = ChatMessage::new(Role::User, text);
    chat.images = images;
    Ok(chat)
}

/// A message sent, its task begun: what both `SendMessage` and `SendStreamingMessage` start
/// with.
struct Sent {
    task: TaskRecord,
    events: UnboundedReceiver<TurnEvent>,
}

/// The translator: a `SendMessageRequest` → the key's turn, begun through the pipeline, and
/// its task kept by the runtime.
async fn send(
    s: &AppState,
    a: &Admitted,
    request: SendMessageRequest,
    stream: bool,
) -> Result<Sent, A2aError> {
    let message = request
        .message
        .ok_or_else(|| A2aError::invalid("`message` is required."))?;
    if request
        .configuration
        .as_ref()
        .is_some_and(|c| c.task_push_notification_config.is_some())
    {
        return Err(A2aError::new(
            Kind::PushNotificationNotSupported,
            "This agent sends no push notifications: stream the task, or subscribe to it.",
        ));
    }
    let context = match message.context_id.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => Some(c.parse::<ConversationId>().map_err(|_| {
            A2aError::new(
                Kind::TaskNotFound,
                format!("No context `{c}` for this agency."),
            )
        })?),
        None => None,
    };
    let resumes = match message.task_id.as_deref().filter(|t| !t.is_empty()) {
        Some(id) => Some(paused(s, a, id, context).await?),
        None => None,
    };
    // A task paused on approvals takes their answers and goes on; any other message is the
    // user's.
    let turn = match resumes.as_ref().filter(|t| !t.approvals.is_empty()) {
        Some(task) => ChatTurn {
            conversation: Some(task.conversation),
            after: task.turn.map(|n| (task.conversation, n)),
            approvals: answers(&message, task)?,
            end_user: end_user(&message),
            pause_on_approvals: true,
            ..ChatTurn::default()
        },
        None => ChatTurn {
            conversation: resumes.as_ref().map(|t| t.conversation).or(context),
            end_user: end_user(&message),
            input: vec![read_message(&message)?],
            pause_on_approvals: true,
            ..ChatTurn::default()
        },
    };
    let said = turn
        .input
        .first()
        .map(|m| m.text.clone())
        .unwrap_or_default();
    let request = TurnRequest {
        caller: Caller::Key(a.key.clone()),
        ask: Ask::Chat {
            agency: a.agency.clone(),
            turn: Box::new(turn),
        },
        stream_text: stream,
        progress: stream,
        face: agency_core::Face::A2a,
    };
    let turn = s.rt.begin(request).await?;
    let message_id = if message.message_id.is_empty() {
        uuid::Uuid::now_v7().to_string()
    } else {
        message.message_id.clone()
    };
    let (task, events) =
        s.rt.tasks()
            .run(&a.key, resumes, turn, message_id, said)
            .await?;
    Ok(Sent { task, events })
}

/// What a message to a task paused on approvals answers: a data part per call
/// (`{"approval_id", "approve", "reason"}`, or several as `{"approvals": [...]}`), and the
/// word `approve` or `deny` for the calls no data part answers.
fn answers(message: &Message, task: &TaskRecord) -> Result<Vec<ApprovalAnswer>, A2aError> {
    let how = || {
        let ids: Vec<&str> = task
            .approvals
            .iter()
            .map(|a| a.approval_id.as_str())
            .collect();
        format!(
            "Task `{}` waits for your approval of {}: reply `approve` or `deny`, or with a data part {{\"approval_id\", \"approve\": true or false, \"reason\"}} for each.",
            task.id,
            ids.join(", ")
        )
    };
    let mut out: Vec<ApprovalAnswer> = Vec::new();
    let mut words = Vec::new();
    for part in &message.parts {
        if let Some(data) = &part.data {
            let items = match data.get("approvals") {
                Some(serde_json::Value::Array(items)) => items.as_slice(),
                _ => std::slice::from_ref(data),
            };
            for item in items {
                let id = item
                    .get("approval_id")
                    .and_then(serde_json::Value::as_str)
                    .filter(|id| task.approvals.iter().any(|a| a.approval_id == id.trim()))
                    .and_then(|id| id.trim().parse().ok())
                    .ok_or_else(|| A2aError::invalid(how()))?;
                let approve = item
                    .get("approve")
                    .and_then(serde_json::Value::as_bool)
                    .ok_or_else(|| A2aError::invalid(how()))?;
                let reason = item
                    .get("reason")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string);
                out.push((id, approve, reason));
            }
        } else if let Some(text) = &part.text {
            words.push(text.trim().to_lowercase());
        } else {
            return Err(A2aError::invalid(how()));
        }
    }
    let said = words.join(" ");
    let approve = match said.trim().trim_end_matches(['.', '!']) {
        "" => None,
        "approve" | "approved" | "yes" | "y" | "ok" => Some(true),
        "deny" | "denied" | "no" | "n" => Some(false),
        _ => return Err(A2aError::invalid(how())),
    };
    if let Some(approve) = approve {
        for asked in &task.approvals {
            let Ok(id) = asked.approval_id.parse::<agency_core::ApprovalId>() else {
                continue;
            };
            if !out.iter().any(|(answered, ..)| *answered == id) {
                out.push((id, approve, None));
            }
        }
    }
    if out.is_empty() {
        return Err(A2aError::invalid(how()));
    }
    Ok(out)
}

/// The task a message names, which must wait for the client's input (in `context`, if named).
async fn paused(
    s: &AppState,
    a: &Admitted,
    id: &str,
    context: Option<ConversationId>,
) -> Result<TaskRecord, A2aError> {
    let task = s.rt.tasks().get(&a.key, task_id(id)?).await?;
    if context.is_some_and(|c| c != task.conversation) {
        return Err(A2aError::invalid(format!(
            "Task `{id}` is not of context `{}`.",
            context.map(|c| c.to_string()).unwrap_or_default()
        )));
    }
    if task.state != TaskState::InputRequired {
        return Err(A2aError::new(
            Kind::UnsupportedOperation,
            format!(
                "Task `{id}` is {}: it takes no more messages. Send a new message with its contextId to go on with the conversation.",
                encode::state_name(task.state)
            ),
        ));
    }
    Ok(task)
}

/// The end user a message names in its metadata (`user`): its conversations are its own, as
/// on the OpenAI endpoint.
fn end_user(message: &Message) -> Option<String> {
    message
        .metadata
        .as_ref()
        .and_then(|m| m.get("user"))
        .and_then(|u| u.as_str())
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
}

/// `SendMessage`: the task once its turn ended (or at once, when the client asks to return
/// immediately).
async fn send_message(
    s: &AppState,
    a: &Admitted,
    request: SendMessageRequest,
) -> Result<types::SendMessageResponse, A2aError> {
    let config = request.configuration.as_ref();
    let history = config.and_then(|c| c.history_length);
    let immediately = config.is_some_and(|c| c.return_immediately);
    let Sent {
        mut task,
        mut events,
    } = send(s, a, request, false).await?;
    if !immediately {
        // The runtime stores the task's end before it tells it: the same end, written here.
        while let Some(event) = events.recv().await {
            if task.ended_by(&event) {
                break;
            }
        }
    }
    Ok(types::SendMessageResponse {
        task: encode::task(&task, history, true),
    })
}

/// `SendStreamingMessage`: the task, a status update per hop, the answer as an artifact as it
/// is written, the final status.
async fn stream_message(
    s: &AppState,
    a: &Admitted,
    request: SendMessageRequest,
    framing: encode::Framing,
) -> Result<Response, A2aError> {
    let Sent { task, events } = send(s, a, request, true).await?;
    let mut stream = encode::TaskStream::new(task, a.agency.roster(), framing);
    let opening = stream.opening();
    let events =
        futures::stream::unfold(
            events,
            |mut rx| async move { rx.recv().await.map(|e| (e, rx)) },
        );
    let body = futures::stream::once(async move { vec![opening] })
        .chain(events.map(move |e| stream.turn_event(e)));
    Ok(sse(body))
}

/// `SubscribeToTask`: a running task joined, from whichever server runs it.
async fn subscribe(
    s: &AppState,
    a: &Admitted,
    id: &str,
    framing: encode::Framing,
) -> Result<Response, A2aError> {
    let (task, updates) =
        s.rt.tasks()
            .follow(&a.key, task_id(id)?)
            .await
            .map_err(|e| match A2aError::from(e) {
                e if e.kind == Kind::UnsupportedOperation => A2aError::new(
                    Kind::UnsupportedOperation,
                    format!("Task `{id}` has ended: there is nothing to subscribe to."),
                ),
                e => e,
            })?;
    let mut stream = encode::TaskStream::new(task, a.agency.roster(), framing);
    let opening = stream.opening();
    let body = futures::stream::once(async move { vec![opening] })
        .chain(updates.map(move |u: TaskUpdate| stream.followed(u)));
    Ok(sse(body))
}

/// `GetTask`.
async fn get_task(
    s: &AppState,
    a: &Admitted,
    id: &str,
    history: Option<i64>,
) -> Result<types::Task, A2aError> {
    let task = s.rt.tasks().get(&a.key, task_id(id)?).await?;
    Ok(encode::task(&task, history, true))
}

/// `CancelTask`.
async fn cancel_task(s: &AppState, a: &Admitted, id: &str) -> Result<types::Task, A2aError> {
    let task =
        s.rt.tasks()
            .cancel(&a.key, task_id(id)?)
            .await
            .map_err(|e| match e {
                agency_runtime::RuntimeError::Conflict(m) => {
                    A2aError::new(Kind::TaskNotCancelable, format!("{m}."))
                }
                e => A2aError::from(e),
            })?;
    Ok(encode::task(&task, None, true))
}

/// `ListTasks`: newest first; a page token is where the next page starts.
async fn list_tasks(
    s: &AppState,
    a: &Admitted,
    request: ListTasksRequest,
) -> Result<ListTasksResponse, A2aError> {
    let size = request.page_size.unwrap_or(PAGE);
    if !(1..=i64::from(agency_runtime::tasks::MAX_PAGE)).contains(&size) {
        return Err(A2aError::invalid(format!(
            "`pageSize` must be between 1 and {}.",
            agency_runtime::tasks::MAX_PAGE
        )));
    }
    let offset = match request.page_token.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => t
            .parse::<u32>()
            .map_err(|_| A2aError::invalid("`pageToken` is not one this server gave."))?,
        None => 0,
    };
    let state = match request.status.as_deref().filter(|s| !s.is_empty()) {
        Some("TASK_STATE_UNSPECIFIED") | None => None,
        Some(name) => match encode::parse_state(name) {
            Ok(Some(state)) => Some(state),
            // No task is ever in that state.
            Ok(None) => return Ok(empty_page(size)),
            Err(()) => return Err(A2aError::invalid(format!("`status`: no state `{name}`."))),
        },
    };
    let conversation = match request.context_id.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => match c.parse::<ConversationId>() {
            Ok(c) => Some(c),
            Err(_) => return Ok(empty_page(size)),
        },
        None => None,
    };
    let query = TaskQuery {
        conversation,
        state,
        offset,
        limit: u32::try_from(size).unwrap_or(1),
    };
    let (tasks, total) = s.rt.tasks().list(&a.key, &query).await?;
    let next = u64::from(offset) + tasks.len() as u64;
    let artifacts = request.include_artifacts.unwrap_or(false);
    Ok(ListTasksResponse {
        tasks: tasks
            .iter()
            .map(|t| encode::task(t, request.history_length, artifacts))
            .collect(),
        next_page_token: if next < total {
            next.to_string()
        } else {
            String::new()
        },
        page_size: size,
        total_size: i64::try_from(total).unwrap_or(i64::MAX),
    })
}

fn empty_page(size: i64) -> ListTasksResponse {
    ListTasksResponse {
        tasks: Vec::new(),
        next_page_token: String::new(),
        page_size: size,
        total_size: 0,
    }
}

/// Server-sent events, with keep-alive comments while the agents work.
fn sse(body: impl Stream<Item = Vec<SseEvent>> + Send + 'static) -> Response {
    let events = body.flat_map(|events| {
        futures::stream::iter(events.into_iter().map(Ok::<_, std::convert::Infallible>))
    });
    Sse::new(crate::counted(events))
        .keep_alive(
            KeepAlive::new()
                .interval(std::time::Duration::from_secs(10))
                .text("keep-alive"),
        )
        .into_response()
}
