//! The JSON of roundtable rooms (`rooms.rs`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::text;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRoom {
    #[schema(schema_with = text::room_name)]
    pub name: String,
    /// An agency of the user's (id or name): its agents join the room.
    #[serde(default)]
    pub agency: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Room {
    pub id: String,
    pub name: String,
    pub agency_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl From<&agency_core::room::Room> for Room {
    fn from(r: &agency_core::room::Room) -> Self {
        Self {
            id: r.id.to_string(),
            name: r.name.clone(),
            agency_id: r.agency.map(|a| a.to_string()),
            created_at: r.created_at,
        }
    }
}

/// An agent in a room: a model's, or a webhook bot.
#[derive(Serialize, ToSchema)]
pub struct Participant {
    pub id: String,
    /// What @mentions name; a bot's username.
    pub name: String,
    /// `model` or `bot`.
    pub kind: &'static str,
    /// `provider/model`, for a model's agent.
    pub model: Option<String>,
    /// For a bot: where it is called and whom it emulates (its caller key is never shown
    /// again after it was registered).
    pub bot: Option<BotInfo>,
    /// Its role: the text of the saved role `role_id` points to, if it does, else its own.
    pub role: Option<String>,
    pub role_id: Option<String>,
    /// Its personality, likewise.
    pub personality: Option<String>,
    pub personality_id: Option<String>,
    pub instructions: Option<String>,
    /// The tools its model may call while answering (`server/tool`, `server/*`).
    pub tools: Vec<String>,
    pub enabled: bool,
    pub colour: String,
}

#[derive(Serialize, ToSchema)]
pub struct BotInfo {
    pub endpoint: String,
    pub emulates: Option<String>,
}

impl From<&agency_core::room::Participant> for Participant {
    fn from(p: &agency_core::room::Participant) -> Self {
        Self {
            id: p.id.to_string(),
            name: p.name.clone(),
            kind: if p.bot().is_some() { "bot" } else { "model" },
            model: p.model().map(ToString::to_string),
            bot: p.bot().map(|b| BotInfo {
                endpoint: b.endpoint.clone(),
                emulates: b.emulates.clone(),
            }),
            role: p.role.clone(),
            role_id: p.role_id.map(|d| d.to_string()),
            personality: p.personality.clone(),
            personality_id: p.personality_id.map(|d| d.to_string()),
            instructions: p.instructions.clone(),
            tools: p.tools.0.clone(),
            enabled: p.enabled,
            colour: p.colour.clone(),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewParticipant {
    /// What @mentions name: a letter, then letters, digits, `_`, `-` or `.`.
    #[schema(schema_with = text::handle)]
    pub name: String,
    /// `provider/model`.
    pub model: String,
    /// Its own role; or `role_id`, a saved one it points to.
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    #[schema(schema_with = text::role_id)]
    pub role_id: Option<String>,
    /// Its own personality; or `personality_id`, a saved one.
    #[serde(default)]
    pub personality: Option<String>,
    #[serde(default)]
    #[schema(schema_with = text::personality_id)]
    pub personality_id: Option<String>,
    #[serde(default)]
    pub instructions: Option<String>,
    /// The tools its model may call while answering: `server/tool`, or `server/*` for every
    /// tool of a server (`GET /api/agencies/{id}/tools` lists them for a room's agency; a room
    /// without one has the built-in and the server's own).
    #[serde(default)]
    pub tools: Vec<String>,
}

/// A reusable role or personality that room agents point to.
#[derive(Serialize, ToSchema)]
pub struct Definition {
    pub id: String,
    /// `role` or `personality`.
    pub kind: &'static str,
    pub name: String,
    pub text: String,
    pub created_at: DateTime<Utc>,
}

impl From<&agency_core::room::Definition> for Definition {
    fn from(d: &agency_core::room::Definition) -> Self {
        Self {
            id: d.id.to_string(),
            kind: d.kind.as_str(),
            name: d.name.clone(),
            text: d.text.clone(),
            created_at: d.created_at,
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDefinition {
    /// `role` or `personality`.
    #[schema(schema_with = text::definition_kind)]
    pub kind: String,
    /// Unique among your definitions of its kind.
    #[schema(schema_with = text::definition_name)]
    pub name: String,
    /// At most 4,000 characters.
    #[schema(schema_with = text::definition_text)]
    pub text: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionEdit {
    #[schema(schema_with = text::definition_name)]
    pub name: String,
    #[schema(schema_with = text::definition_text)]
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct RoomMessage {
    pub id: String,
    pub seq: i64,
    /// `person`, `agent` (an answer), `error` (an agent's failure, never in a context) or
    /// `utility` (the room's utility bot answering a command).
    pub kind: &'static str,
    /// The agent's id and name, for answers and failures.
    pub agent_id: Option<String>,
    pub agent: Option<String>,
    pub text: String,
    /// A person's command for the room's utility bot (`/register`, ...), as the server reads
    /// one: the utility bot answers it, and it is never in a context.
    pub command: bool,
    pub included: bool,
    /// The id of the message this one replies to.
    pub reply_to: Option<String>,
    /// The ids of the participants it tags.
    pub tagged: Vec<String>,
    pub created_at: DateTime<Utc>,
}

impl From<&agency_core::room::RoomMessage> for RoomMessage {
    fn from(m: &agency_core::room::RoomMessage) -> Self {
        use agency_core::room::Author;
        let (kind, agent_id, agent) = match &m.author {
            Author::Person => ("person", None, None),
            Author::Agent { id, name } => ("agent", Some(id.to_string()), Some(name.clone())),
            Author::Error { id, name } => ("error", Some(id.to_string()), Some(name.clone())),
            Author::Utility => (
                "utility",
                None,
                Some(agency_core::room::UTILITY.to_string()),
            ),
        };
        Self {
            id: m.id.to_string(),
            seq: m.seq,
            kind,
            agent_id,
            agent,
            text: m.text.clone(),
            command: matches!(m.author, Author::Person)
                && agency_core::room::command(&m.text).is_some(),
            included: m.included,
            reply_to: m.reply_to.map(|r| r.to_string()),
            tagged: m.tagged.iter().map(ToString::to_string).collect(),
            created_at: m.created_at,
        }
    }
}

/// A person's message to a room.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostRoomMessage {
    /// At most 5,000 characters. `@name` tags an agent; a command (`/register`, `/bots`,
    /// `/unregister`, `/help`) goes to the room's utility bot.
    #[schema(schema_with = text::room_message)]
    pub text: String,
    /// The id of the message this one replies to: its author is asked to answer.
    #[serde(default)]
    #[schema(schema_with = text::reply_to)]
    pub reply_to: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct RoomDetail {
    pub room: Room,
    /// In display order.
    pub participants: Vec<Participant>,
    /// In order.
    pub messages: Vec<RoomMessage>,
}

/// A person's message as stored, who is answering it, and (with `?wait=true`) their answers.
#[derive(Serialize, ToSchema)]
pub struct Posted {
    pub message: RoomMessage,
    pub answering: Vec<String>,
    pub answers: Option<Vec<RoomMessage>>,
    /// When the message was `/register`: the new bot's caller key, shown this once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller_key: Option<String>,
}

/// A webhook bot to register in a room.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBot {
    /// What tags name: a letter, then letters, digits, `_`, `-` or `.`.
    #[schema(schema_with = text::handle)]
    pub username: String,
    /// Its `http(s)` URL, called with `POST` and the header `X-CALLER-KEY`.
    pub endpoint: String,
    /// The name of the person it emulates.
    #[serde(default)]
    pub emulates: Option<String>,
}

/// A registered bot and its caller key, shown this once.
#[derive(Serialize, ToSchema)]
pub struct RegisteredBot {
    pub bot: Participant,
    /// Sent to the bot in `X-CALLER-KEY` with every call, so it can tell the calls are ours.
    pub caller_key: String,
}

#[derive(Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Wait {
    /// Answer only once every agent has answered (or failed).
    #[serde(default)]
    pub wait: bool,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetIncluded {
    pub included: bool,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetEnabled {
    pub enabled: bool,
}
