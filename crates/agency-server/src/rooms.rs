//! Roundtable rooms over HTTP: the user's rooms, their agents and messages, and a live stream
//! of everything that happens in one.

use std::convert::Infallible;

use agency_core::room::DefinitionKind;
use agency_core::{DefinitionId, ParticipantId, RoomId, RoomMessageId};
use agency_runtime::rooms::{NewBot, NewParticipant, Posted};
use agency_runtime::{Event, RuntimeError};
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{self, KeepAlive, Sse};
use futures::{Stream, StreamExt};

use crate::auth::{Account, Session};
use crate::documented::{Documented, documented};
use crate::events::RoomEvent;
use crate::{ApiError, AppState, wire};

/// Every route here, as its handler's `#[utoipa::path]` declares it.
pub fn routes() -> Documented {
    documented![
        list_rooms,
        create_room,
        get_room,
        delete_room,
        post_message,
        set_included,
        add_participant,
        set_enabled,
        remove_participant,
        retry,
        list_bots,
        register_bot,
        unregister_bot,
        list_definitions,
        create_definition,
        update_definition,
        delete_definition,
        events,
    ]
}

fn room_id(id: &str) -> Result<RoomId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("no room `{id}`")))
}

/// A definition named in a body: a malformed id is a problem of that field.
fn definition_ref(field: &str, id: Option<&str>) -> Result<Option<DefinitionId>, ApiError> {
    id.map(|id| {
        id.parse().map_err(|_| {
            ApiError::from(RuntimeError::field(
                field,
                format!("`{id}` is not the id of a saved definition"),
            ))
        })
    })
    .transpose()
}

fn definition_id(id: &str) -> Result<DefinitionId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("no saved role or personality `{id}`")))
}

fn participant_id(id: &str) -> Result<ParticipantId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("no agent `{id}` in this room")))
}

async fn detail(s: &AppState, owner: &str, room: RoomId) -> Result<wire::RoomDetail, ApiError> {
    let (room, participants, messages) = s.rt.rooms().detail(owner, room).await?;
    Ok(wire::RoomDetail {
        room: wire::Room::from(&room),
        participants: participants.iter().map(wire::Participant::from).collect(),
        messages: messages.iter().map(wire::RoomMessage::from).collect(),
    })
}

/// The user's rooms, newest first.
#[utoipa::path(get, path = "/api/rooms", tag = "rooms", responses((status = 200, body = Vec<wire::Room>)))]
pub async fn list_rooms(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::Room>>, ApiError> {
    let rooms = s.rt.rooms().list(&session.owner()).await?;
    Ok(Json(rooms.iter().map(wire::Room::from).collect()))
}

/// Makes a room; with `agency` (an id or name of the user's), its agents join.
#[utoipa::path(post, path = "/api/rooms", tag = "rooms", request_body = wire::NewRoom,
    responses((status = 201, body = wire::RoomDetail), (status = 400), (status = 404, description = "No such agency")))]
pub async fn create_room(
    State(s): State<AppState>,
    Account(session): Account,
    body: Result<Json<wire::NewRoom>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::RoomDetail>), ApiError> {
    let Json(new) = body?;
    let owner = session.owner();
    let agency = match new.agency.as_deref() {
        Some(a) => Some(s.rt.agencies().get(&owner, a).await?.id),
        None => None,
    };
    let (room, _) = s.rt.rooms().create(&owner, &new.name, agency).await?;
    Ok((
        StatusCode::CREATED,
        Json(detail(&s, &owner, room.id).await?),
    ))
}

/// A room with its agents and every message, in order.
#[utoipa::path(get, path = "/api/rooms/{room}", tag = "rooms", params(("room" = String, Path)),
    responses((status = 200, body = wire::RoomDetail), (status = 404)))]
pub async fn get_room(
    State(s): State<AppState>,
    session: Session,
    Path(room): Path<String>,
) -> Result<Json<wire::RoomDetail>, ApiError> {
    Ok(Json(detail(&s, &session.owner(), room_id(&room)?).await?))
}

/// Deletes the room with its messages.
#[utoipa::path(delete, path = "/api/rooms/{room}", tag = "rooms", params(("room" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn delete_room(
    State(s): State<AppState>,
    Account(session): Account,
    Path(room): Path<String>,
) -> Result<StatusCode, ApiError> {
    s.rt.rooms()
        .delete(&session.owner(), room_id(&room)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn posted(mut p: Posted, wait: bool) -> wire::Posted {
    use secrecy::ExposeSecret;
    let answering = p.answering.iter().map(ToString::to_string).collect();
    let caller_key = p.caller_key.take().map(|k| k.expose_secret().to_string());
    if wait {
        let (message, answers) = p.answers().await;
        wire::Posted {
            message: wire::RoomMessage::from(&message),
            answering,
            answers: Some(answers.iter().map(wire::RoomMessage::from).collect()),
            caller_key,
        }
    } else {
        let message = wire::RoomMessage::from(&p.message);
        // The answers go on without us: they are stored and published as they arrive.
        p.answers.detach_all();
        wire::Posted {
            message,
            answering,
            answers: None,
            caller_key,
        }
    }
}

/// Posts the person's message (at most 5,000 characters). The agents it @mentions (and the
/// author of the message it replies to) answer it, else every enabled agent that is not a
/// bot, in parallel; their answers arrive on the room's events, or in this answer with
/// `?wait=true`. A command goes to the room's utility bot; `/register` answers the new bot's
/// caller key here, once.
#[utoipa::path(post, path = "/api/rooms/{room}/messages", tag = "rooms", request_body = wire::PostRoomMessage,
    params(("room" = String, Path), wire::Wait),
    responses((status = 201, body = wire::Posted), (status = 400, description = "Empty, or over 5,000 characters: nothing stored"), (status = 404), (status = 422, description = "`reply_to` names no message of the room")))]
pub async fn post_message(
    State(s): State<AppState>,
    Account(session): Account,
    Path(room): Path<String>,
    wait: Result<Query<wire::Wait>, QueryRejection>,
    body: Result<Json<wire::PostRoomMessage>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::Posted>), ApiError> {
    let Query(wait) = wait?;
    let Json(body) = body?;
    let reply_to = match body.reply_to.as_deref() {
        None => None,
        Some(id) => Some(id.parse::<RoomMessageId>().map_err(|_| {
            ApiError::from(RuntimeError::field(
                "reply_to",
                format!("`{id}` is not a message id"),
            ))
        })?),
    };
    let p =
        s.rt.rooms()
            .post(&session.owner(), room_id(&room)?, &body.text, reply_to)
            .await?;
    Ok((StatusCode::CREATED, Json(posted(p, wait.wait).await)))
}

/// The room's webhook bots.
#[utoipa::path(get, path = "/api/rooms/{room}/bots", tag = "rooms", params(("room" = String, Path)),
    responses((status = 200, body = Vec<wire::Participant>), (status = 404)))]
pub async fn list_bots(
    State(s): State<AppState>,
    session: Session,
    Path(room): Path<String>,
) -> Result<Json<Vec<wire::Participant>>, ApiError> {
    let bots = s.rt.rooms().bots(&session.owner(), room_id(&room)?).await?;
    Ok(Json(bots.iter().map(wire::Participant::from).collect()))
}

/// Registers a webhook bot in the room (what `/register` does): it answers when a message
/// tags it or replies to it. Its caller key is in this answer, and never again.
#[utoipa::path(post, path = "/api/rooms/{room}/bots", tag = "rooms", request_body = wire::NewBot,
    params(("room" = String, Path)),
    responses((status = 201, body = wire::RegisteredBot), (status = 404), (status = 422, description = "A bad or taken username, an endpoint that is not an http(s) URL or that this server does not call")))]
pub async fn register_bot(
    State(s): State<AppState>,
    Account(session): Account,
    Path(room): Path<String>,
    body: Result<Json<wire::NewBot>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::RegisteredBot>), ApiError> {
    use secrecy::ExposeSecret;
    let Json(b) = body?;
    let (bot, key) =
        s.rt.rooms()
            .register_bot(
                &session.owner(),
                room_id(&room)?,
                NewBot {
                    username: b.username,
                    endpoint: b.endpoint,
                    emulates: b.emulates,
                },
            )
            .await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::RegisteredBot {
            bot: wire::Participant::from(&bot),
            caller_key: key.expose_secret().to_string(),
        }),
    ))
}

/// Removes the room's bot `username`; its messages stay.
#[utoipa::path(delete, path = "/api/rooms/{room}/bots/{username}", tag = "rooms",
    params(("room" = String, Path), ("username" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn unregister_bot(
    State(s): State<AppState>,
    Account(session): Account,
    Path((room, username)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    s.rt.rooms()
        .unregister_bot(&session.owner(), room_id(&room)?, &username)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Includes a message in future contexts, or leaves it out.
#[utoipa::path(patch, path = "/api/rooms/{room}/messages/{message}", tag = "rooms", request_body = wire::SetIncluded,
    params(("room" = String, Path), ("message" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn set_included(
    State(s): State<AppState>,
    Account(session): Account,
    Path((room, message)): Path<(String, String)>,
    body: Result<Json<wire::SetIncluded>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(body) = body?;
    let message: RoomMessageId = message
        .parse()
        .map_err(|_| ApiError::NotFound(format!("no message `{message}` in this room")))?;
    s.rt.rooms()
        .set_included(&session.owner(), room_id(&room)?, message, body.included)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Adds an agent, enabled, last.
#[utoipa::path(post, path = "/api/rooms/{room}/participants", tag = "rooms", request_body = wire::NewParticipant,
    params(("room" = String, Path)),
    responses((status = 201, body = wire::Participant), (status = 404), (status = 422, description = "A bad or taken name, a model no provider serves")))]
pub async fn add_participant(
    State(s): State<AppState>,
    Account(session): Account,
    Path(room): Path<String>,
    body: Result<Json<wire::NewParticipant>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::Participant>), ApiError> {
    let Json(p) = body?;
    let p =
        s.rt.rooms()
            .add_participant(
                &session.owner(),
                room_id(&room)?,
                NewParticipant {
                    name: p.name,
                    model: p.model,
                    role: p.role,
                    role_id: definition_ref("role_id", p.role_id.as_deref())?,
                    personality: p.personality,
                    personality_id: definition_ref("personality_id", p.personality_id.as_deref())?,
                    instructions: p.instructions,
                    tools: p.tools,
                },
            )
            .await?;
    Ok((StatusCode::CREATED, Json(wire::Participant::from(&p))))
}

/// Enables or disables an agent.
#[utoipa::path(patch, path = "/api/rooms/{room}/participants/{agent}", tag = "rooms", request_body = wire::SetEnabled,
    params(("room" = String, Path), ("agent" = String, Path)),
    responses((status = 200, body = wire::Participant), (status = 404)))]
pub async fn set_enabled(
    State(s): State<AppState>,
    Account(session): Account,
    Path((room, agent)): Path<(String, String)>,
    body: Result<Json<wire::SetEnabled>, JsonRejection>,
) -> Result<Json<wire::Participant>, ApiError> {
    let Json(body) = body?;
    let p =
        s.rt.rooms()
            .set_enabled(
                &session.owner(),
                room_id(&room)?,
                participant_id(&agent)?,
                body.enabled,
            )
            .await?;
    Ok(Json(wire::Participant::from(&p)))
}

/// Removes an agent; its messages stay, with its name.
#[utoipa::path(delete, path = "/api/rooms/{room}/participants/{agent}", tag = "rooms",
    params(("room" = String, Path), ("agent" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn remove_participant(
    State(s): State<AppState>,
    Account(session): Account,
    Path((room, agent)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    s.rt.rooms()
        .remove_participant(&session.owner(), room_id(&room)?, participant_id(&agent)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Has one agent answer the person's latest message again (after it failed).
#[utoipa::path(post, path = "/api/rooms/{room}/participants/{agent}/retry", tag = "rooms",
    params(("room" = String, Path), ("agent" = String, Path), wire::Wait),
    responses((status = 201, body = wire::Posted), (status = 404)))]
pub async fn retry(
    State(s): State<AppState>,
    Account(session): Account,
    Path((room, agent)): Path<(String, String)>,
    wait: Result<Query<wire::Wait>, QueryRejection>,
) -> Result<(StatusCode, Json<wire::Posted>), ApiError> {
    let Query(wait) = wait?;
    let p =
        s.rt.rooms()
            .retry(&session.owner(), room_id(&room)?, participant_id(&agent)?)
            .await?;
    Ok((StatusCode::CREATED, Json(posted(p, wait.wait).await)))
}

/// Everything that happens in the room, as server-sent events: `message` (stored: the
/// person's, an answer, or a failure), `agent_started`, `delta` (an answer's text as it
/// streams), `included`, `participants` (the agents changed: read the room again). The schema
/// `RoomEvent` gives each event's name and data.
#[utoipa::path(get, path = "/api/rooms/{room}/events", tag = "rooms", params(("room" = String, Path)),
    responses((status = 200, content_type = "text/event-stream", description = "Events, as they happen"), (status = 404)))]
pub async fn events(
    State(s): State<AppState>,
    session: Session,
    Path(room): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<sse::Event, Infallible>>>, ApiError> {
    let room =
        s.rt.rooms()
            .owned(&session.owner(), room_id(&room)?)
            .await?;
    let stream = crate::conversations::stream_of(s.rt.subscribe()).filter_map(move |event| {
        let out = match event {
            Event::Room { room: r, change } if r == room.id => RoomEvent::from(&change).sse(),
            _ => None,
        };
        std::future::ready(out.map(Ok))
    });
    Ok(Sse::new(crate::counted(stream)).keep_alive(KeepAlive::default()))
}

/// Your reusable roles and personalities, roles first, by name.
#[utoipa::path(get, path = "/api/definitions", tag = "rooms",
    responses((status = 200, body = Vec<wire::Definition>)))]
pub async fn list_definitions(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::Definition>>, ApiError> {
    let all = s.rt.rooms().definitions(&session.owner()).await?;
    Ok(Json(all.iter().map(wire::Definition::from).collect()))
}

/// Saves a reusable role or personality, for room agents to point to.
#[utoipa::path(post, path = "/api/definitions", tag = "rooms", request_body = wire::NewDefinition,
    responses((status = 201, body = wire::Definition), (status = 422, description = "A bad kind, a taken or bad name, an empty or too long text")))]
pub async fn create_definition(
    State(s): State<AppState>,
    Account(session): Account,
    body: Result<Json<wire::NewDefinition>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::Definition>), ApiError> {
    let Json(d) = body?;
    let kind = DefinitionKind::parse(&d.kind)
        .ok_or_else(|| ApiError::from(RuntimeError::field("kind", "`role` or `personality`")))?;
    let d =
        s.rt.rooms()
            .create_definition(&session.owner(), kind, &d.name, &d.text)
            .await?;
    Ok((StatusCode::CREATED, Json(wire::Definition::from(&d))))
}

/// Renames or rewrites one; the agents pointing to it use the new text from their next answer.
#[utoipa::path(put, path = "/api/definitions/{id}", tag = "rooms", request_body = wire::DefinitionEdit,
    params(("id" = String, Path)),
    responses((status = 200, body = wire::Definition), (status = 404), (status = 422)))]
pub async fn update_definition(
    State(s): State<AppState>,
    Account(session): Account,
    Path(id): Path<String>,
    body: Result<Json<wire::DefinitionEdit>, JsonRejection>,
) -> Result<Json<wire::Definition>, ApiError> {
    let Json(d) = body?;
    let d =
        s.rt.rooms()
            .update_definition(&session.owner(), definition_id(&id)?, &d.name, &d.text)
            .await?;
    Ok(Json(wire::Definition::from(&d)))
}

/// Deletes one; the agents pointing to it keep its text as their own.
#[utoipa::path(delete, path = "/api/definitions/{id}", tag = "rooms",
    params(("id" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn delete_definition(
    State(s): State<AppState>,
    Account(session): Account,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    s.rt.rooms()
        .delete_definition(&session.owner(), definition_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
