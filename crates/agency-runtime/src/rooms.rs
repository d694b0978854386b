//! Roundtable rooms: a person's message is stored, then each agent that answers it (see
//! [`agency_core::room::responders`]) is called at once, in parallel; each answer is stored and
//! published the moment it arrives, and a failure is stored in the agent's place without
//! holding up the others. The core decides who answers and what each one sees.

use std::sync::Arc;

use agency_core::room::{self, Author, Participant, Room, RoomMessage};
use agency_core::{
    Agency, AgencyId, Agent, AgentId, ConversationId, Limits, Message, MessageId, MessageKind,
    ModelRef, ParticipantId, Protocol, Role, RoomId, RoomMessageId, Roster, Sampling,
};
use agency_providers::{ModelRequest, Providers};
use chrono::Utc;
use tokio::task::JoinSet;

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
    pub role: Option<String>,
    pub personality: Option<String>,
    pub instructions: Option<String>,
}

/// A person's message, stored, and the agents answering it.
pub struct Posted {
    pub message: RoomMessage,
    pub answering: Vec<ParticipantId>,
    /// The answers (or failures), each as stored; await them or drop them (they go on).
    pub answers: JoinSet<RoomMessage>,
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

impl Runtime {
    /// Makes a room; with an agency, its agents join (enabled, in its order).
    pub async fn create_room(
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
                let a = self.owned(owner, id).await?;
                a.agents
                    .iter()
                    .zip(0i64..)
                    .map(|(agent, position)| Participant {
                        id: ParticipantId::new(),
                        room: room.id,
                        name: agent.name.clone(),
                        model: agent.model.clone(),
                        role: agent.role.clone(),
                        personality: None,
                        instructions: instructions_of(agent),
                        enabled: true,
                        position,
                        colour: colour(position),
                    })
                    .collect()
            }
        };
        self.store.create_room(&room, &participants).await?;
        Ok((room, participants))
    }

    /// The owner's room; another owner's looks as if it did not exist.
    pub async fn owned_room(&self, owner: &str, id: RoomId) -> Result<Room, RuntimeError> {
        self.store
            .room(id)
            .await?
            .filter(|r| r.owner == owner)
            .ok_or(RuntimeError::RoomNotFound(id))
    }

    /// Deletes the owner's room with its agents and messages.
    pub async fn delete_room(&self, owner: &str, id: RoomId) -> Result<(), RuntimeError> {
        let room = self.owned_room(owner, id).await?;
        self.store.delete_room(room.id).await?;
        Ok(())
    }

    /// The providers a room's agents use: its agency's (with its own), else the server's.
    async fn room_providers(&self, room: &Room) -> Result<Arc<Providers>, RuntimeError> {
        match room.agency {
            Some(a) => match self.current_agency(a, false).await {
                Ok(view) => Ok(view.providers),
                Err(RuntimeError::AgencyNotFound(_)) => Ok(self.providers.clone()),
                Err(e) => Err(e),
            },
            None => Ok(self.providers.clone()),
        }
    }

    /// Adds an agent to the owner's room, enabled, last.
    pub async fn add_participant(
        &self,
        owner: &str,
        room: RoomId,
        new: NewParticipant,
    ) -> Result<Participant, RuntimeError> {
        let room = self.owned_room(owner, room).await?;
        let name = new.name.trim().to_string();
        let valid_name = name.chars().next().is_some_and(|c| c.is_alphabetic())
            && name.chars().count() <= 64
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            return Err(RuntimeError::field(
                "name",
                "a letter, then letters, digits, `_`, `-` or `.` (at most 64): @mentions name it",
            ));
        }
        let model = ModelRef::parse(&new.model).ok_or_else(|| {
            RuntimeError::field("model", "write `provider/model`, e.g. `openai/gpt-4o`")
        })?;
        if !self.room_providers(&room).await?.serves(&model) {
            return Err(RuntimeError::field(
                "model",
                format!("no provider serves `{}`", new.model.trim()),
            ));
        }
        let existing = self.store.participants(room.id).await?;
        let position = existing.iter().map(|p| p.position + 1).max().unwrap_or(0);
        let p = Participant {
            id: ParticipantId::new(),
            room: room.id,
            name,
            model,
            role: optional(new.role),
            personality: optional(new.personality),
            instructions: optional(new.instructions),
            enabled: true,
            position,
            colour: colour(position),
        };
        self.store.put_participant(&p).await.map_err(|e| match e {
            agency_store::StoreError::Conflict(m) => RuntimeError::field("name", m),
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
        let room = self.owned_room(owner, room).await?;
        let p = self
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
        self.store.put_participant(&p).await?;
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
        self.store.delete_participant(room.id, p.id).await?;
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
        let room = self.owned_room(owner, room).await?;
        if !self.store.set_included(room.id, message, included).await? {
            return Err(RuntimeError::NotFound(format!(
                "room {} has no message {message}",
                room.id
            )));
        }
        self.publish_room(room.id, RoomChange::Included { message, included });
        Ok(())
    }

    /// Stores the person's message, then has the agents it asks answer it, in parallel.
    pub async fn post_to_room(
        self: &Arc<Self>,
        owner: &str,
        room: RoomId,
        text: &str,
    ) -> Result<Posted, RuntimeError> {
        let text = room::check_text(text).map_err(RuntimeError::Invalid)?;
        let room = self.owned_room(owner, room).await?;
        let participants = self.store.participants(room.id).await?;
        let message = self
            .store
            .add_room_message(RoomMessage {
                id: RoomMessageId::new(),
                room: room.id,
                seq: 0,
                author: Author::Person,
                text: text.to_string(),
                included: true,
                created_at: Utc::now(),
            })
            .await?;
        self.publish_room(room.id, RoomChange::Message(message.clone()));
        let answering = room::responders(text, &participants);
        let answers = self
            .answer(&room, participants, &answering, message.seq)
            .await?;
        Ok(Posted {
            message,
            answering,
            answers,
        })
    }

    /// Has one agent answer the room's latest message of the person again (after a failure).
    pub async fn retry(
        self: &Arc<Self>,
        owner: &str,
        room: RoomId,
        agent: ParticipantId,
    ) -> Result<Posted, RuntimeError> {
        let (room, _) = self.participant(owner, room, agent).await?;
        let messages = self.store.room_messages(room.id).await?;
        let last = messages
            .iter()
            .rev()
            .find(|m| m.author == Author::Person)
            .cloned()
            .ok_or_else(|| RuntimeError::Invalid("there is no message to answer yet".into()))?;
        let participants = self.store.participants(room.id).await?;
        let answers = self.answer(&room, participants, &[agent], last.seq).await?;
        Ok(Posted {
            message: last,
            answering: vec![agent],
            answers,
        })
    }

    /// Starts `who`'s answers to the room as it stood at `upto` (the person's message).
    async fn answer(
        self: &Arc<Self>,
        room: &Room,
        participants: Vec<Participant>,
        who: &[ParticipantId],
        upto: i64,
    ) -> Result<JoinSet<RoomMessage>, RuntimeError> {
        let mut answers = JoinSet::new();
        if who.is_empty() {
            return Ok(answers);
        }
        let providers = self.room_providers(room).await?;
        let mut history = self.store.room_messages(room.id).await?;
        history.retain(|m| m.seq <= upto);
        let history = Arc::new(history);
        let participants = Arc::new(participants);
        for id in who {
            let Some(agent) = participants.iter().find(|p| p.id == *id).cloned() else {
                continue;
            };
            let (rt, providers, history, participants, room) = (
                self.clone(),
                providers.clone(),
                history.clone(),
                participants.clone(),
                room.clone(),
            );
            answers.spawn(async move {
                rt.one_answer(&room, &agent, &participants, &history, &providers)
                    .await
            });
        }
        Ok(answers)
    }

    /// One agent's answer, stored (or its failure, stored in its place) and published.
    async fn one_answer(
        &self,
        room: &Room,
        agent: &Participant,
        participants: &[Participant],
        history: &[RoomMessage],
        providers: &Providers,
    ) -> RoomMessage {
        self.publish_room(room.id, RoomChange::AgentStarted(agent.id));
        let result = match providers.resolve(&agent.model) {
            None => Err(format!("no provider serves `{}`", agent.model)),
            Some(model) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                let request = model_request(room, agent, participants, history, tx);
                let call = model.complete(request);
                tokio::pin!(call);
                loop {
                    tokio::select! {
                        done = &mut call => break done.map(|c| c.text).map_err(|e| e.to_string()),
                        Some(text) = rx.recv() => {
                            self.publish_room(room.id, RoomChange::Delta { agent: agent.id, text });
                        }
                    }
                }
            }
        };
        let author = |ok: bool| {
            let (id, name) = (agent.id, agent.name.clone());
            if ok {
                Author::Agent { id, name }
            } else {
                Author::Error { id, name }
            }
        };
        let message = match result {
            Ok(text) => RoomMessage {
                id: RoomMessageId::new(),
                room: room.id,
                seq: 0,
                author: author(true),
                text,
                included: true,
                created_at: Utc::now(),
            },
            Err(error) => {
                tracing::warn!(room = %room.id, agent = %agent.name, %error, "a room agent failed");
                RoomMessage {
                    id: RoomMessageId::new(),
                    room: room.id,
                    seq: 0,
                    author: author(false),
                    text: error,
                    included: false,
                    created_at: Utc::now(),
                }
            }
        };
        let stored = match self.store.add_room_message(message.clone()).await {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(room = %room.id, error = %e, "cannot store a room answer");
                RoomMessage {
                    author: author(false),
                    text: format!("the answer could not be stored: {e}"),
                    included: false,
                    ..message
                }
            }
        };
        self.publish_room(room.id, RoomChange::Message(stored.clone()));
        stored
    }

    fn publish_room(&self, room: RoomId, change: RoomChange) {
        self.publish(|| Event::Room { room, change });
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

fn colour(position: i64) -> String {
    let i = usize::try_from(position).unwrap_or(0) % room::COLOURS.len();
    room::COLOURS[i].to_string()
}

/// A model call for a room agent: a one-agent agency speaking plain chat, whose context is
/// the agent's room context.
fn model_request(
    room: &Room,
    agent: &Participant,
    participants: &[Participant],
    history: &[RoomMessage],
    deltas: tokio::sync::mpsc::UnboundedSender<String>,
) -> ModelRequest {
    let id = AgentId::first_free(1, |_| false);
    let agency = Agency {
        id: AgencyId(room.id.0),
        owner: room.owner.clone(),
        name: room.name.clone(),
        handle: None,
        protocol: Protocol::Plain,
        manager: id,
        limits: Limits::default(),
        providers: Vec::new(),
        agents: vec![Agent {
            id,
            name: agent.name.clone(),
            handle: None,
            role: agent.role.clone(),
            model: agent.model.clone(),
            sampling: Sampling::default(),
            blocks: Vec::new(),
            memory: Default::default(),
        }],
        version: None,
    };
    let context = room::context(agent, participants, history)
        .into_iter()
        .zip(0i64..)
        .map(|((role, text), seq)| Message {
            id: MessageId::new(),
            conversation_id: ConversationId(room.id.0),
            turn_id: None,
            seq,
            agent: Some(id),
            kind: match role {
                Role::System => MessageKind::System,
                Role::Assistant => MessageKind::Reply,
                Role::User => MessageKind::Input,
            },
            linked: None,
            from: None,
            to: Some(id),
            text,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: Utc::now(),
        })
        .collect();
    ModelRequest {
        roster: Arc::new(Roster::new([(id, agent.name.clone())])),
        agency: Arc::new(agency),
        agent: id,
        context: Arc::new(context),
        deltas: Some(deltas),
        on_retry: None,
    }
}
