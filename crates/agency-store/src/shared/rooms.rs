//! Rooms' rows and SQL, shared by both backends.

use agency_core::room::{
    Author, Bot, Definition, DefinitionKind, Participant, Room, RoomMessage, Speaker,
};
use agency_core::tool::ToolGrants;
use agency_core::{AgencyId, DefinitionId, ModelRef, ParticipantId, RoomId, RoomMessageId};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::corrupt;
use crate::StoreError;

pub(crate) const INSERT_ROOM: &str =
    "INSERT INTO rooms (id, owner, name, agency_id, created_at) VALUES ($1, $2, $3, $4, $5)";
pub(crate) const ROOM: &str =
    "SELECT id, owner, name, agency_id, created_at FROM rooms WHERE id = $1";
pub(crate) const ROOMS_OF_OWNER: &str = "SELECT id, owner, name, agency_id, created_at FROM rooms \
     WHERE owner = $1 ORDER BY created_at DESC, id DESC";
pub(crate) const DELETE_ROOM: &str = "DELETE FROM rooms WHERE id = $1";
pub(crate) const PUT_PARTICIPANT: &str = "INSERT INTO room_participants \
     (id, room_id, name, name_key, model, role, personality, instructions, enabled, position, \
     colour, bot_endpoint, bot_emulates, role_id, personality_id, tools) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, name_key = excluded.name_key, \
     model = excluded.model, role = excluded.role, personality = excluded.personality, \
     instructions = excluded.instructions, enabled = excluded.enabled, \
     position = excluded.position, colour = excluded.colour, \
     bot_endpoint = excluded.bot_endpoint, bot_emulates = excluded.bot_emulates, \
     role_id = excluded.role_id, personality_id = excluded.personality_id, \
     tools = excluded.tools";
pub(crate) const DELETE_PARTICIPANT: &str =
    "DELETE FROM room_participants WHERE room_id = $1 AND id = $2";
/// A participant pointing to a definition reads the definition's text.
pub(crate) const PARTICIPANTS: &str = "SELECT p.id, p.room_id, p.name, p.model, \
     COALESCE(r.text, p.role) AS role, COALESCE(q.text, p.personality) AS personality, \
     p.instructions, p.enabled, \
     p.position, p.colour, p.bot_endpoint, p.bot_emulates, p.role_id, p.personality_id, \
     p.tools \
     FROM room_participants p \
     LEFT JOIN room_definitions r ON r.id = p.role_id \
     LEFT JOIN room_definitions q ON q.id = p.personality_id \
     WHERE p.room_id = $1 ORDER BY p.position, p.name_key";
pub(crate) const PUT_DEFINITION: &str = "INSERT INTO room_definitions \
     (id, owner, kind, name, name_key, text, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, name_key = excluded.name_key, \
     text = excluded.text";
pub(crate) const DEFINITIONS: &str = "SELECT id, owner, kind, name, text, created_at \
     FROM room_definitions WHERE owner = $1 ORDER BY kind, name_key";
pub(crate) const DEFINITION: &str =
    "SELECT id, owner, kind, name, text, created_at FROM room_definitions WHERE id = $1";
/// Before a definition goes, the agents pointing to it keep its text as their own.
pub(crate) const KEEP_ROLE_TEXT: &str = "UPDATE room_participants SET role = \
     (SELECT text FROM room_definitions WHERE id = $1), role_id = NULL WHERE role_id = $1";
pub(crate) const KEEP_PERSONALITY_TEXT: &str = "UPDATE room_participants SET personality = \
     (SELECT text FROM room_definitions WHERE id = $1), personality_id = NULL \
     WHERE personality_id = $1";
pub(crate) const DELETE_DEFINITION: &str = "DELETE FROM room_definitions WHERE id = $1";
/// The room's next seq is taken in the statement itself.
pub(crate) const ADD_MESSAGE: &str = "INSERT INTO room_messages \
     (room_id, seq, id, kind, participant_id, author_name, text, included, created_at, \
     reply_to, tagged) \
     VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM room_messages WHERE room_id = $1), \
     $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq";
pub(crate) const START_ANSWER: &str = "INSERT INTO room_answering \
     (room_id, message_id, participant_id, process_id) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (room_id, message_id, participant_id) DO UPDATE SET process_id = excluded.process_id";
pub(crate) const END_ANSWER: &str = "DELETE FROM room_answering \
     WHERE room_id = $1 AND message_id = $2 AND participant_id = $3";
pub(crate) const INTERRUPTED_ANSWERS: &str = "SELECT a.room_id, a.message_id, a.participant_id \
     FROM room_answering a LEFT JOIN processes p ON p.id = a.process_id \
     WHERE (a.process_id IS NULL OR a.process_id <> $1) \
     AND (p.seen_at IS NULL OR p.seen_at < $2)";
pub(crate) const SET_INCLUDED: &str =
    "UPDATE room_messages SET included = $1 WHERE room_id = $2 AND id = $3";
pub(crate) const MESSAGES: &str = "SELECT room_id, seq, id, kind, participant_id, author_name, \
     text, included, created_at, reply_to, tagged FROM room_messages WHERE room_id = $1 \
     ORDER BY seq";

pub(crate) const MESSAGE: &str = "SELECT room_id, seq, id, kind, participant_id, author_name, \
     text, included, created_at, reply_to, tagged FROM room_messages WHERE room_id = $1 \
     AND id = $2";

#[derive(sqlx::FromRow)]
pub(crate) struct RoomRow {
    pub id: Uuid,
    pub owner: String,
    pub name: String,
    pub agency_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

impl From<RoomRow> for Room {
    fn from(r: RoomRow) -> Self {
        Room {
            id: RoomId(r.id),
            owner: r.owner,
            name: r.name,
            agency: r.agency_id.map(AgencyId),
            created_at: r.created_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ParticipantRow {
    pub id: Uuid,
    pub room_id: Uuid,
    pub name: String,
    pub model: String,
    pub role: Option<String>,
    pub personality: Option<String>,
    pub instructions: Option<String>,
    pub enabled: bool,
    pub position: i64,
    pub colour: String,
    pub bot_endpoint: Option<String>,
    pub bot_emulates: Option<String>,
    pub role_id: Option<Uuid>,
    pub personality_id: Option<Uuid>,
    /// A JSON array of `server/tool` grants.
    pub tools: String,
}

/// A participant's tools as stored: a JSON array.
pub(crate) fn tools_column(p: &Participant) -> String {
    serde_json::to_string(&p.tools.0).unwrap_or_else(|_| "[]".into())
}

/// A participant's role and personality as stored: the id of a definition (its own text then
/// empty), or its own text.
pub(crate) fn persona_columns(
    p: &Participant,
) -> (Option<&str>, Option<Uuid>, Option<&str>, Option<Uuid>) {
    fn own(id: Option<DefinitionId>, text: &Option<String>) -> Option<&str> {
        match id {
            Some(_) => None,
            None => text.as_deref(),
        }
    }
    (
        own(p.role_id, &p.role),
        p.role_id.map(|d| d.0),
        own(p.personality_id, &p.personality),
        p.personality_id.map(|d| d.0),
    )
}

#[derive(sqlx::FromRow)]
pub(crate) struct DefinitionRow {
    pub id: Uuid,
    pub owner: String,
    pub kind: String,
    pub name: String,
    pub text: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<DefinitionRow> for Definition {
    type Error = StoreError;
    fn try_from(r: DefinitionRow) -> Result<Self, StoreError> {
        Ok(Definition {
            id: DefinitionId(r.id),
            kind: DefinitionKind::parse(&r.kind)
                .ok_or_else(|| corrupt(format!("definition kind {}", r.kind)))?,
            owner: r.owner,
            name: r.name,
            text: r.text,
            created_at: r.created_at,
        })
    }
}

pub(crate) fn definition_taken(d: &Definition) -> StoreError {
    StoreError::Conflict(format!(
        "you have a {} named `{}` already",
        d.kind.as_str(),
        d.name
    ))
}

/// A participant's speaker as stored: the model column (empty for a bot) and the bot's.
pub(crate) fn speaker_columns(p: &Participant) -> (String, Option<&str>, Option<&str>) {
    match &p.speaker {
        Speaker::Model(m) => (m.to_string(), None, None),
        Speaker::Bot(b) => (String::new(), Some(&b.endpoint), b.emulates.as_deref()),
    }
}

impl TryFrom<ParticipantRow> for Participant {
    type Error = StoreError;
    fn try_from(r: ParticipantRow) -> Result<Self, StoreError> {
        let speaker = match r.bot_endpoint {
            Some(endpoint) => Speaker::Bot(Bot {
                endpoint,
                emulates: r.bot_emulates,
            }),
            None => Speaker::Model(ModelRef::parse(&r.model).ok_or_else(|| corrupt(&r.model))?),
        };
        Ok(Participant {
            id: ParticipantId(r.id),
            room: RoomId(r.room_id),
            speaker,
            name: r.name,
            role: r.role,
            role_id: r.role_id.map(DefinitionId),
            personality: r.personality,
            personality_id: r.personality_id.map(DefinitionId),
            instructions: r.instructions,
            tools: ToolGrants(
                serde_json::from_str(&r.tools)
                    .map_err(|_| corrupt(format!("participant tools {}", r.tools)))?,
            ),
            enabled: r.enabled,
            position: r.position,
            colour: r.colour,
        })
    }
}

/// A message's author as stored: its kind, participant and name.
pub(crate) fn author_columns(a: &Author) -> (&'static str, Option<Uuid>, Option<&str>) {
    match a {
        Author::Person => ("person", None, None),
        Author::Agent { id, name } => ("agent", Some(id.0), Some(name)),
        Author::Error { id, name } => ("error", Some(id.0), Some(name)),
        Author::Utility => ("utility", None, None),
    }
}

/// Tagged participants as stored: a JSON array of ids.
pub(crate) fn tagged_column(tagged: &[ParticipantId]) -> String {
    serde_json::Value::from(tagged.iter().map(ToString::to_string).collect::<Vec<_>>()).to_string()
}

fn parse_tagged(text: &str) -> Result<Vec<ParticipantId>, StoreError> {
    let ids: Vec<String> =
        serde_json::from_str(text).map_err(|_| corrupt(format!("tagged participants `{text}`")))?;
    ids.iter()
        .map(|id| {
            Uuid::parse_str(id)
                .map(ParticipantId)
                .map_err(|_| corrupt(format!("tagged participant `{id}`")))
        })
        .collect()
}

#[derive(sqlx::FromRow)]
pub(crate) struct RoomMessageRow {
    pub room_id: Uuid,
    pub seq: i64,
    pub id: Uuid,
    pub kind: String,
    pub participant_id: Option<Uuid>,
    pub author_name: Option<String>,
    pub text: String,
    pub included: bool,
    pub created_at: DateTime<Utc>,
    pub reply_to: Option<Uuid>,
    pub tagged: String,
}

impl TryFrom<RoomMessageRow> for RoomMessage {
    type Error = StoreError;
    fn try_from(r: RoomMessageRow) -> Result<Self, StoreError> {
        let agent = || match (r.participant_id, r.author_name.clone()) {
            (Some(id), Some(name)) => Ok((ParticipantId(id), name)),
            _ => Err(corrupt(format!("room message {} has no author", r.id))),
        };
        let author = match r.kind.as_str() {
            "person" => Author::Person,
            "agent" => {
                let (id, name) = agent()?;
                Author::Agent { id, name }
            }
            "error" => {
                let (id, name) = agent()?;
                Author::Error { id, name }
            }
            "utility" => Author::Utility,
            other => return Err(corrupt(format!("room message kind {other}"))),
        };
        Ok(RoomMessage {
            id: RoomMessageId(r.id),
            room: RoomId(r.room_id),
            seq: r.seq,
            author,
            text: r.text,
            included: r.included,
            reply_to: r.reply_to.map(RoomMessageId),
            tagged: parse_tagged(&r.tagged)?,
            created_at: r.created_at,
        })
    }
}

pub(crate) fn name_taken(p: &Participant) -> StoreError {
    StoreError::Conflict(format!("the room has an agent named `{}` already", p.name))
}
