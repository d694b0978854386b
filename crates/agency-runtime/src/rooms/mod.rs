//! Roundtable rooms: a person's message is stored, then each agent that answers it (see
//! [`agency_core::room::responders`]) is called at once, in parallel; each answer is stored and
//! published the moment it arrives, and a failure is stored in the agent's place without
//! holding up the others. The core decides who answers and what each one sees.

use std::sync::Arc;

use agency_core::room::{
    self, Definition, DefinitionKind, Participant, Room, RoomMessage, Speaker,
};
use agency_core::tool::{self, ToolGrants};
use agency_core::{AgencyId, Agent, DefinitionId, ModelRef, ParticipantId, RoomId, RoomMessageId};
use agency_providers::Providers;
use chrono::Utc;
use secrecy::SecretString;
use tokio::task::JoinSet;

use crate::tools::Scope;
use crate::{Event, Runtime, RuntimeError};

/// What changed in a room, as [`Event::Room`] carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum RoomChange {
    /// A message was stored: the person's, an agent's answer, or an agent's failure.
    Message(RoomMessage),
    /// An agent's model was called.
    AgentStarted(ParticipantId),
    /// Text of an agent's answer as its model streams it.
    Delta { agent: ParticipantId, text: String },
    /// An agent's model called a tool (`server/tool`) while answering.
    ToolCalled { agent: ParticipantId, tool: String },
    /// That tool's result came back (an error result, or not).
    ToolDone {
        agent: ParticipantId,
        tool: String,
        is_error: bool,
    },
    Included {
        message: RoomMessageId,
        included: bool,
    },
    /// Agents were added, removed, enabled or disabled.
    Participants,
}

/// An agent as the person adds it.
#[derive(Clone, Debug, Default)]
pub struct NewParticipant {
    pub name: String,
    /// `provider/model`.
    pub model: String,
    /// Its own role, or (`role_id`) a reusable one it points to; not both.
    pub role: Option<String>,
    pub role_id: Option<DefinitionId>,
    /// Its own personality, or a reusable one; not both.
    pub personality: Option<String>,
    pub personality_id: Option<DefinitionId>,
    pub instructions: Option<String>,
    /// The tools its model may call while it answers: `server/tool` or `server/*`.
    pub tools: Vec<String>,
}

/// What a room's agents answer with (see `Rooms::setting`).
struct Setting {
    providers: Arc<Providers>,
    agency: Option<Arc<agency_core::Agency>>,
    /// The agency's budget, which its room's model calls are paid from too.
    payer: Option<Arc<crate::spend::Payer>>,
}

impl Setting {
    /// Where the room's agents' tool names are resolved.
    fn scope<'a>(&'a self, room: &'a Room) -> Scope<'a> {
        match &self.agency {
            Some(a) => a.as_ref().into(),
            None => Scope {
                owner: &room.owner,
                servers: &[],
            },
        }
    }
}
#[derive(Clone, Debug, Default)]
pub struct NewBot {
    pub username: String,
    pub endpoint: String,
    /// The name of the person it emulates.
    pub emulates: Option<String>,
}

/// A person's message, stored, and the agents answering it.
pub struct Posted {
    pub message: RoomMessage,
    pub answering: Vec<ParticipantId>,
    /// The answers (or failures), each as stored; await them or drop them (they go on). A
    /// command's answer from the utility bot is among them.
    pub answers: JoinSet<RoomMessage>,
    /// The caller key of a bot the message registered: shown to the person once, here, and
    /// stored nowhere (the utility bot's stored answer holds only its last characters).
    pub caller_key: Option<SecretString>,
}

impl Posted {
    /// Waits for every answer, in the order they arrived.
    pub async fn answers(mut self) -> (RoomMessage, Vec<RoomMessage>) {
        let mut out = Vec::new();
        while let Some(done) = self.answers.join_next().await {
            if let Ok(m) = done {
                out.push(m);
            }
        }
        (self.message, out)
    }
}

const ROOM_NAME_MAX: usize = 100;

fn optional(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

mod answering;
pub use answering::{ALIVE_EVERY, DEAD_AFTER};
mod bots;

/// Roundtable rooms: their agents, bots, saved roles and messages, and the agents' answers.
/// Reached through [`Runtime::rooms`].
pub struct Rooms<'a> {
    pub(crate) rt: &'a Arc<Runtime>,
}

impl Rooms<'_> {
    /// Makes a room; with an agency, its agents join (enabled, in its order).
    pub async fn create(
        &self,
        owner: &str,
        name: &str,
        agency: Option<AgencyId>,
    ) -> Result<(Room, Vec<Participant>), RuntimeError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > ROOM_NAME_MAX {
            return Err(RuntimeError::Invalid(format!(
                "a room's name has 1 to {ROOM_NAME_MAX} characters"
            )));
        }
        let room = Room {
            id: RoomId::new(),
            owner: owner.to_string(),
            name: name.to_string(),
            agency,
            created_at: Utc::now(),
        };
        let participants = match agency {
            None => Vec::new(),
            Some(id) => {
                let a = self.rt.agencies().owned(owner, id).await?;
                a.agents
                    .iter()
                    .zip(0i64..)
                    .map(|(agent, position)| Participant {
                        id: ParticipantId::new(),
                        room: room.id,
                        name: agent.name.clone(),
                        speaker: Speaker::Model(agent.model.clone()),
                        role: agent.role.clone(),
                        role_id: None,
                        personality: None,
                        personality_id: None,
                        instructions: instructions_of(agent),
                        tools: agent.tools.clone(),
                        enabled: true,
                        position,
                        colour: colour(position),
                    })
                    .collect()
            }
        };
        self.rt.store.create_room(&room, &participants).await?;
        Ok((room, participants))
    }

    /// The owner's room; another owner's looks as if it did not exist.
    pub async fn owned(&self, owner: &str, id: RoomId) -> Result<Room, RuntimeError> {
        self.rt
            .store
            .room(id)
            .await?
            .filter(|r| r.owner == owner)
            .ok_or(RuntimeError::RoomNotFound(id))
    }

    /// The owner's rooms, newest first.
    pub async fn list(&self, owner: &str) -> Result<Vec<Room>, RuntimeError> {
        Ok(self.rt.store.rooms(owner).await?)
    }

    /// The owner's room with its agents (in display order) and its messages (in order).
    pub async fn detail(
        &self,
        owner: &str,
        id: RoomId,
    ) -> Result<(Room, Vec<Participant>, Vec<RoomMessage>), RuntimeError> {
        let room = self.owned(owner, id).await?;
        let participants = self.rt.store.participants(id).await?;
        let messages = self.rt.store.room_messages(id).await?;
        Ok((room, participants, messages))
    }

    /// Deletes the owner's room with its agents and messages.
    pub async fn delete(&self, owner: &str, id: RoomId) -> Result<(), RuntimeError> {
        let room = self.owned(owner, id).await?;
        self.rt.store.delete_room(room.id).await?;
        Ok(())
    }

    /// The providers a room's agents use: its agency's (with its own), else the server's.
    /// What a room's agents answer with: its agency's providers and MCP servers, or (a room
    /// without an agency, or whose agency is gone) the server's providers and the operator's
    /// and built-in servers.
    async fn setting(&self, room: &Room) -> Result<Setting, RuntimeError> {
        let unbound = || Setting {
            providers: self.rt.providers.clone(),
            agency: None,
            payer: None,
        };
        match room.agency {
            Some(a) => match self.rt.agencies().current(a, false).await {
                Ok(view) => Ok(Setting {
                    providers: view.providers,
                    payer: crate::spend::Payer::of(None, None, &view.agency),
                    agency: Some(view.agency),
                }),
                Err(RuntimeError::AgencyNotFound(_)) => Ok(unbound()),
                Err(e) => Err(e),
            },
            None => Ok(unbound()),
        }
    }

    /// Adds an agent to the owner's room, enabled, last.
    pub async fn add_participant(
        &self,
        owner: &str,
        room: RoomId,
        new: NewParticipant,
    ) -> Result<Participant, RuntimeError> {
        let room = self.owned(owner, room).await?;
        let name = room::check_name(&new.name)
            .map_err(|e| RuntimeError::field("name", e))?
            .to_string();
        let model = ModelRef::parse(&new.model).ok_or_else(|| {
            RuntimeError::field("model", "write `provider/model`, e.g. `openai/gpt-4o`")
        })?;
        let setting = self.setting(&room).await?;
        if !setting.providers.serves(&model) {
            return Err(RuntimeError::field(
                "model",
                format!("no provider serves `{}`", new.model.trim()),
            ));
        }
        let tools = self.room_tools(setting.scope(&room), new.tools).await?;
        let (role, role_id) = self
            .persona(owner, DefinitionKind::Role, new.role, new.role_id)
            .await?;
        let (personality, personality_id) = self
            .persona(
                owner,
                DefinitionKind::Personality,
                new.personality,
                new.personality_id,
            )
            .await?;
        let p = Participant {
            role,
            role_id,
            personality,
            personality_id,
            instructions: optional(new.instructions),
            tools,
            ..newcomer(&room, name, Speaker::Model(model))
        };
        self.join(&room, p, "name").await
    }

    /// A new agent's tools, each one its room's servers list (or a whole server, `server/*`).
    async fn room_tools(
        &self,
        scope: Scope<'_>,
        names: Vec<String>,
    ) -> Result<ToolGrants, RuntimeError> {
        let mut grants = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let name = name.trim().to_string();
            let problem = match tool::split(&name) {
                None => Some(format!("`{name}` is not `server/tool` or `server/*`")),
                Some((server, tool)) => match self.rt.tools.listed(scope, server).await {
                    None => Some(format!("no MCP server is named `{server}`")),
                    Some(Err(e)) => {
                        Some(format!("the tools of `{server}` could not be listed: {e}"))
                    }
                    Some(Ok(listed)) => (tool != "*" && !listed.iter().any(|t| t.name == name))
                        .then(|| format!("`{server}` lists no tool `{tool}`")),
                },
            };
            if let Some(problem) = problem {
                return Err(RuntimeError::field(&format!("tools[{i}]"), problem));
            }
            if !grants.contains(&name) {
                grants.push(name);
            }
        }
        Ok(ToolGrants(grants))
    }

    /// A role or personality as a new agent is given it: its own text, or the owner's
    /// definition of that kind it points to (whose text it then reads).
    async fn persona(
        &self,
        owner: &str,
        kind: DefinitionKind,
        text: Option<String>,
        id: Option<DefinitionId>,
    ) -> Result<(Option<String>, Option<DefinitionId>), RuntimeError> {
        let field = kind.as_str();
        match (optional(text), id) {
            (Some(_), Some(_)) => Err(RuntimeError::field(
                field,
                format!("write a {field} or point to a saved one, not both"),
            )),
            (text, None) => Ok((text, None)),
            (None, Some(id)) => match self.rt.store.definition(id).await? {
                Some(d) if d.owner == owner && d.kind == kind => Ok((Some(d.text), Some(id))),
                _ => Err(RuntimeError::field(
                    &format!("{field}_id"),
                    format!("you have no saved {field} {id}"),
                )),
            },
        }
    }

    /// The owner's reusable roles and personalities.
    pub async fn definitions(&self, owner: &str) -> Result<Vec<Definition>, RuntimeError> {
        Ok(self.rt.store.definitions(owner).await?)
    }

    /// Saves a reusable role or personality.
    pub async fn create_definition(
        &self,
        owner: &str,
        kind: DefinitionKind,
        name: &str,
        text: &str,
    ) -> Result<Definition, RuntimeError> {
        let (name, text) = checked_definition(name, text)?;
        let d = Definition {
            id: DefinitionId::new(),
            owner: owner.to_string(),
            kind,
            name: name.to_string(),
            text: text.to_string(),
            created_at: Utc::now(),
        };
        self.put_definition(&d).await?;
        Ok(d)
    }

    /// Renames or rewrites one: every agent pointing to it reads the new text from its next
    /// answer on.
    pub async fn update_definition(
        &self,
        owner: &str,
        id: DefinitionId,
        name: &str,
        text: &str,
    ) -> Result<Definition, RuntimeError> {
        let d = self.owned_definition(owner, id).await?;
        let (name, text) = checked_definition(name, text)?;
        let d = Definition {
            name: name.to_string(),
            text: text.to_string(),
            ..d
        };
        self.put_definition(&d).await?;
        Ok(d)
    }

    /// Deletes one; the agents pointing to it keep its text as their own.
    pub async fn delete_definition(
        &self,
        owner: &str,
        id: DefinitionId,
    ) -> Result<(), RuntimeError> {
        let d = self.owned_definition(owner, id).await?;
        self.rt.store.delete_definition(d.id).await?;
        Ok(())
    }

    async fn owned_definition(
        &self,
        owner: &str,
        id: DefinitionId,
    ) -> Result<Definition, RuntimeError> {
        self.rt
            .store
            .definition(id)
            .await?
            .filter(|d| d.owner == owner)
            .ok_or_else(|| RuntimeError::NotFound(format!("no saved role or personality {id}")))
    }

    async fn put_definition(&self, d: &Definition) -> Result<(), RuntimeError> {
        self.rt.store.put_definition(d).await.map_err(|e| match e {
            agency_store::StoreError::Conflict(m) => RuntimeError::field("name", m),
            other => other.into(),
        })
    }

    /// Stores `p`, a newcomer to `room`, last; a taken name is an error of the field `field`.
    async fn join(
        &self,
        room: &Room,
        mut p: Participant,
        field: &str,
    ) -> Result<Participant, RuntimeError> {
        let existing = self.rt.store.participants(room.id).await?;
        p.position = existing.iter().map(|p| p.position + 1).max().unwrap_or(0);
        p.colour = colour(p.position);
        self.rt
            .store
            .put_participant(&p)
            .await
            .map_err(|e| match e {
                agency_store::StoreError::Conflict(m) => RuntimeError::field(field, m),
                other => other.into(),
            })?;
        self.publish_room(room.id, RoomChange::Participants);
        Ok(p)
    }

    /// The owner's room's agent.
    async fn participant(
        &self,
        owner: &str,
        room: RoomId,
        id: ParticipantId,
    ) -> Result<(Room, Participant), RuntimeError> {
        let room = self.owned(owner, room).await?;
        let p = self
            .rt
            .store
            .participants(room.id)
            .await?
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(|| RuntimeError::NotFound(format!("room {} has no agent {id}", room.id)))?;
        Ok((room, p))
    }

    /// Enables or disables an agent: a disabled one receives nothing until enabled again (or
    /// mentioned), then gets the whole included history.
    pub async fn set_enabled(
        &self,
        owner: &str,
        room: RoomId,
        id: ParticipantId,
        enabled: bool,
    ) -> Result<Participant, RuntimeError> {
        let (room, p) = self.participant(owner, room, id).await?;
        let p = Participant { enabled, ..p };
        self.rt.store.put_participant(&p).await?;
        self.publish_room(room.id, RoomChange::Participants);
        Ok(p)
    }

    /// Removes an agent; its messages stay, with its name.
    pub async fn remove_participant(
        &self,
        owner: &str,
        room: RoomId,
        id: ParticipantId,
    ) -> Result<(), RuntimeError> {
        let (room, p) = self.participant(owner, room, id).await?;
        self.rt.store.delete_participant(room.id, p.id).await?;
        self.publish_room(room.id, RoomChange::Participants);
        Ok(())
    }

    /// Includes a message in future contexts, or leaves it out.
    pub async fn set_included(
        &self,
        owner: &str,
        room: RoomId,
        message: RoomMessageId,
        included: bool,
    ) -> Result<(), RuntimeError> {
        let room = self.owned(owner, room).await?;
        if !self
            .rt
            .store
            .set_included(room.id, message, included)
            .await?
        {
            return Err(RuntimeError::NotFound(format!(
                "room {} has no message {message}",
                room.id
            )));
        }
        self.publish_room(room.id, RoomChange::Included { message, included });
        Ok(())
    }

    fn publish_room(&self, room: RoomId, change: RoomChange) {
        self.rt.publish(|| Event::Room { room, change });
    }
}

/// An agency's agent's instructions as text (its rules make no sense in a room).
fn instructions_of(agent: &Agent) -> Option<String> {
    let text: Vec<&str> = agent
        .blocks
        .iter()
        .filter_map(|b| match b {
            agency_core::Block::Text(t) => Some(t.as_str()),
            agency_core::Block::Rule(_) => None,
        })
        .collect();
    (!text.is_empty()).then(|| text.join("\n\n"))
}

/// A definition's name and text, or each problem at its field.
fn checked_definition<'a>(
    name: &'a str,
    text: &'a str,
) -> Result<(&'a str, &'a str), RuntimeError> {
    room::check_definition(name, text).map_err(|problems| {
        RuntimeError::Validation(agency_core::ValidationErrors(
            problems
                .into_iter()
                .map(|(path, message)| agency_core::ValidationError {
                    path: path.to_string(),
                    message,
                })
                .collect(),
        ))
    })
}

/// A participant about to join `room`: enabled, with nothing but its name and speaker (its
/// place and colour are given as it joins).
fn newcomer(room: &Room, name: String, speaker: Speaker) -> Participant {
    Participant {
        id: ParticipantId::new(),
        room: room.id,
        name,
        speaker,
        role: None,
        role_id: None,
        personality: None,
        personality_id: None,
        instructions: None,
        tools: ToolGrants::default(),
        enabled: true,
        position: 0,
        colour: String::new(),
    }
}

fn colour(position: i64) -> String {
    let i = usize::try_from(position).unwrap_or(0) % room::COLOURS.len();
    room::COLOURS[i].to_string()
}
