//! Conversations of the user's agencies: start one (on the draft — a playground — or on the
//! published version), take turns, read every context and trace, and watch turns live.

use std::convert::Infallible;

use agency_core::{ConversationId, MessageKind};
use agency_runtime::{Caller, Event, TurnRequest};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{self, KeepAlive, Sse};
use futures::{Stream, StreamExt};

use crate::auth::{Account, Session};
use crate::documented::{Documented, documented};
use crate::events::ConversationEvent;
use crate::manage::agency_of;
use crate::{ApiError, AppState, wire};

/// Every route here, as its handler's `#[utoipa::path]` declares it.
pub fn routes() -> Documented {
    documented![
        list_conversations,
        create_conversation,
        get_conversation,
        list_messages,
        post_message,
        get_turn,
        events,
    ]
}

fn conversation_id(id: &str) -> Result<ConversationId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("no conversation `{id}`")))
}

/// Starts a conversation with the agency's draft (the default: a playground) or its published
/// version.
#[utoipa::path(post, path = "/api/agencies/{agency}/conversations", tag = "conversations",
    request_body(content = Option<wire::NewConversation>),
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 201, body = wire::Conversation), (status = 404), (status = 409, description = "Not published")))]
pub async fn create_conversation(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
    // No body, `null`, or `{"on": ...}`.
    body: Result<Option<Json<Option<wire::NewConversation>>>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::Conversation>), ApiError> {
    let on = body?.and_then(|Json(b)| b).and_then(|b| b.on);
    let draft = agency_of(&s, &session, &agency).await?;
    let agency = match on.as_deref().unwrap_or("draft") {
        "draft" => draft,
        "published" => (*s.rt.agencies().published(draft.id).await?).clone(),
        other => {
            return Err(ApiError::BadRequest(format!(
                "`on` is `draft` or `published`, not `{other}`"
            )));
        }
    };
    let c = s.rt.conversations().start(&agency).await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::Conversation::new(&c, Vec::new())),
    ))
}

/// The agency's conversations (API, playground, CLI), newest first.
#[utoipa::path(get, path = "/api/agencies/{agency}/conversations", tag = "conversations",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = Vec<wire::Conversation>), (status = 404)))]
pub async fn list_conversations(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<Vec<wire::Conversation>>, ApiError> {
    let list = s.rt.conversations().list(&session.owner(), &agency).await?;
    Ok(Json(
        list.iter()
            .map(|c| wire::Conversation::new(c, Vec::new()))
            .collect(),
    ))
}

/// A conversation with its turns: usage and how each ended.
#[utoipa::path(get, path = "/api/conversations/{id}", tag = "conversations",
    params(("id" = String, Path)),
    responses((status = 200, body = wire::Conversation), (status = 404)))]
pub async fn get_conversation(
    State(s): State<AppState>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Json<wire::Conversation>, ApiError> {
    let (c, turns) =
        s.rt.conversations()
            .turns(&session.owner(), conversation_id(&id)?)
            .await?;
    Ok(Json(wire::Conversation::new(
        &c,
        turns.iter().map(wire::Turn::from).collect(),
    )))
}

/// One turn: the user's `text` to the manager, and everything until the manager answers.
#[utoipa::path(post, path = "/api/conversations/{id}/messages", tag = "conversations",
    request_body = wire::PostMessage, params(("id" = String, Path)),
    responses((status = 200, body = wire::TurnResult), (status = 404), (status = 502, description = "The agency's models failed")))]
pub async fn post_message(
    State(s): State<AppState>,
    Account(session): Account,
    Path(id): Path<String>,
    body: Result<Json<wire::PostMessage>, JsonRejection>,
) -> Result<Json<wire::TurnResult>, ApiError> {
    let id = conversation_id(&id)?;
    let Json(body) = body?;
    let request = TurnRequest::message(Caller::Owner(session.owner()), id, body.text);
    let out = s.rt.begin(request).await?.outcome().await?;
    Ok(Json(wire::TurnResult::from(&out)))
}

/// A finished turn's trace: who said what to whom, in order.
#[utoipa::path(get, path = "/api/conversations/{id}/turns/{number}", tag = "conversations",
    params(("id" = String, Path), ("number" = u32, Path)),
    responses((status = 200, body = wire::TurnTrace), (status = 404)))]
pub async fn get_turn(
    State(s): State<AppState>,
    session: Session,
    Path((id, number)): Path<(String, String)>,
) -> Result<Json<wire::TurnTrace>, ApiError> {
    let id = conversation_id(&id)?;
    // Parsed here, not by the extractor, so that a bad number gets this API's JSON error.
    let number: u32 = number
        .parse()
        .map_err(|_| ApiError::NotFound(format!("conversation {id} has no turn `{number}`")))?;
    let detail =
        s.rt.conversations()
            .turn(&session.owner(), id, number)
            .await?;
    Ok(Json(wire::TurnTrace {
        turn: wire::Turn::from(&detail.turn),
        trace: detail
            .trace
            .iter()
            .map(|e| wire::TraceEntry::new(e, &detail.roster))
            .collect(),
        agent_costs: wire::AgentCost::list(&detail.agent_costs, &detail.roster),
        approvals: detail
            .approvals
            .iter()
            .map(|a| wire::Approval {
                agent_name: detail.roster.name(a.agent).map(str::to_string),
                ..wire::Approval::from(a)
            })
            .collect(),
    }))
}

/// Every message of every context, in order: each agent's own context as it saw it (`agent`
/// names whose context a message is in).
#[utoipa::path(get, path = "/api/conversations/{id}/messages", tag = "conversations",
    params(("id" = String, Path)),
    responses((status = 200, body = Vec<wire::Message>), (status = 404)))]
pub async fn list_messages(
    State(s): State<AppState>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Json<Vec<wire::Message>>, ApiError> {
    let (messages, roster) =
        s.rt.conversations()
            .messages(&session.owner(), conversation_id(&id)?)
            .await?;
    Ok(Json(
        messages
            .iter()
            .filter(|m| m.kind != MessageKind::System || m.agent.is_some())
            .map(|m| wire::Message::new(m, &roster))
            .collect(),
    ))
}

/// The conversation's turns as they happen, as server-sent events: `turn_started`,
/// `agent_started`, `hop` (a message reached a context, or the user), `turn_finished`,
/// `turn_failed`; each `data` is JSON. The schema `ConversationEvent` gives each event's name
/// and data.
#[utoipa::path(get, path = "/api/conversations/{id}/events", tag = "conversations",
    params(("id" = String, Path)),
    responses((status = 200, content_type = "text/event-stream", description = "Events, as they happen"), (status = 404)))]
pub async fn events(
    State(s): State<AppState>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<sse::Event, Infallible>>>, ApiError> {
    let owned =
        s.rt.conversations()
            .get(&session.owner(), conversation_id(&id)?)
            .await?;
    let (c, roster) = (owned.conversation, owned.agency.roster());
    let rx = s.rt.subscribe();
    let stream = stream_of(rx).filter_map(move |event| {
        let out = ConversationEvent::of(&event, c.id, &roster).and_then(|e| e.sse());
        std::future::ready(out.map(Ok))
    });
    Ok(Sse::new(crate::counted(stream)).keep_alive(KeepAlive::default()))
}

/// Events as a stream; a subscriber that falls behind skips what it missed.
pub(crate) fn stream_of(
    rx: tokio::sync::broadcast::Receiver<Event>,
) -> impl Stream<Item = Event> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(e) => return Some((e, rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}
