//! Roundtable rooms: a person's message is stored, then each agent that answers it (see
//! [`agency_core::room::responders`]) is called at once, in parallel; each answer is stored and
//! published the moment it arrives, and a failure is stored in the agent's place without
//! holding up the others. The core decides who answers and what each one sees.

use std::sync::Arc;

use agency_core::room::{
    self, Author, Bot, Command, Definition, DefinitionKind, Participant, Room, RoomMessage, Speaker,
};
use agency_core::{
    Agency, AgencyId, Agent, AgentId, ConversationId, DefinitionId, Limits, Message, MessageId,
    MessageKind, ModelRef, ParticipantId, Protocol, Role, RoomId, RoomMessageId, Roster, Sampling,
};
use agency_providers::bot::{BotConversation, BotMessage, BotRequest, BotUser};
use agency_providers::{ModelRequest, Providers};
use chrono::Utc;
use secrecy::SecretString;
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
    /// Its own role, or (`role_id`) a reusable one it points to; not both.
    pub role: Option<String>,
    pub role_id: Option<DefinitionId>,
    /// Its own personality, or a reusable one; not both.
    pub personality: Option<String>,
    pub personality_id: Option<DefinitionId>,
    pub instructions: Option<String>,
}

/// A bot as the person registers it.
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
                        speaker: Speaker::Model(agent.model.clone()),
                        role: agent.role.clone(),
                        role_id: None,
                        personality: None,
                        personality_id: None,
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

    /// The owner's rooms, newest first.
    pub async fn rooms(&self, owner: &str) -> Result<Vec<Room>, RuntimeError> {
        Ok(self.store.rooms(owner).await?)
    }

    /// The owner's room with its agents (in display order) and its messages (in order).
    pub async fn room_detail(
        &self,
        owner: &str,
        id: RoomId,
    ) -> Result<(Room, Vec<Participant>, Vec<RoomMessage>), RuntimeError> {
        let room = self.owned_room(owner, id).await?;
        let participants = self.store.participants(id).await?;
        let messages = self.store.room_messages(id).await?;
        Ok((room, participants, messages))
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
        let name = room::check_name(&new.name)
            .map_err(|e| RuntimeError::field("name", e))?
            .to_string();
        let model = ModelRef::parse(&new.model).ok_or_else(|| {
            RuntimeError::field("model", "write `provider/model`, e.g. `openai/gpt-4o`")
        })?;
        if !self.room_providers(&room).await?.serves(&model) {
            return Err(RuntimeError::field(
                "model",
                format!("no provider serves `{}`", new.model.trim()),
            ));
        }
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
            ..newcomer(&room, name, Speaker::Model(model))
        };
        self.join(&room, p, "name").await
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
            (None, Some(id)) => match self.store.definition(id).await? {
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
        Ok(self.store.definitions(owner).await?)
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
        self.store.delete_definition(d.id).await?;
        Ok(())
    }

    async fn owned_definition(
        &self,
        owner: &str,
        id: DefinitionId,
    ) -> Result<Definition, RuntimeError> {
        self.store
            .definition(id)
            .await?
            .filter(|d| d.owner == owner)
            .ok_or_else(|| RuntimeError::NotFound(format!("no saved role or personality {id}")))
    }

    async fn put_definition(&self, d: &Definition) -> Result<(), RuntimeError> {
        self.store.put_definition(d).await.map_err(|e| match e {
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
        let existing = self.store.participants(room.id).await?;
        p.position = existing.iter().map(|p| p.position + 1).max().unwrap_or(0);
        p.colour = colour(p.position);
        self.store.put_participant(&p).await.map_err(|e| match e {
            agency_store::StoreError::Conflict(m) => RuntimeError::field(field, m),
            other => other.into(),
        })?;
        self.publish_room(room.id, RoomChange::Participants);
        Ok(p)
    }

    /// Registers a webhook bot in the owner's room (spec 003): it answers when tagged or
    /// replied to. Returns it with its caller key, which the caller shows once.
    pub async fn register_bot(
        &self,
        owner: &str,
        room: RoomId,
        new: NewBot,
    ) -> Result<(Participant, SecretString), RuntimeError> {
        let room = self.owned_room(owner, room).await?;
        let name = room::check_name(new.username.trim_start_matches('@'))
            .map_err(|e| RuntimeError::field("username", e))?
            .to_string();
        let endpoint = new.endpoint.trim();
        let bots = self
            .room_providers(&room)
            .await?
            .bots()
            .cloned()
            .ok_or_else(|| RuntimeError::Invalid("this server cannot make HTTP calls".into()))?;
        let url = bots
            .check_endpoint(endpoint)
            .await
            .map_err(|e| RuntimeError::field("endpoint", e.to_string()))?;
        let bot = Bot {
            endpoint: url.to_string(),
            emulates: optional(new.emulates),
        };
        let p = self
            .join(&room, newcomer(&room, name, Speaker::Bot(bot)), "username")
            .await?;
        let key = self.caller_key(&p)?;
        Ok((p, key))
    }

    /// The bots of the owner's room.
    pub async fn room_bots(
        &self,
        owner: &str,
        room: RoomId,
    ) -> Result<Vec<Participant>, RuntimeError> {
        let room = self.owned_room(owner, room).await?;
        let mut ps = self.store.participants(room.id).await?;
        ps.retain(|p| p.bot().is_some());
        Ok(ps)
    }

    /// Removes the bot named `username` from the owner's room.
    pub async fn unregister_bot(
        &self,
        owner: &str,
        room: RoomId,
        username: &str,
    ) -> Result<Participant, RuntimeError> {
        let username = username.trim().trim_start_matches('@');
        let bot = self
            .room_bots(owner, room)
            .await?
            .into_iter()
            .find(|p| p.name.eq_ignore_ascii_case(username))
            .ok_or_else(|| RuntimeError::NotFound(format!("the room has no bot `@{username}`")))?;
        self.store.delete_participant(room, bot.id).await?;
        self.publish_room(room, RoomChange::Participants);
        Ok(bot)
    }

    /// A bot's caller key: derived from the master key, the room and the bot, so it is
    /// stored nowhere and the same every time. A bot registered again gets a new one.
    fn caller_key(&self, bot: &Participant) -> Result<SecretString, RuntimeError> {
        let source = self.master_key().ok_or_else(|| {
            RuntimeError::Invalid(
                "this server has no master key, so it cannot make caller keys for bots".into(),
            )
        })?;
        let master = crate::secrets::MasterKey::load_or_create(source)?;
        let bytes = master.derive(&format!("agency bot caller key\0{}\0{}", bot.room, bot.id));
        Ok(SecretString::from(format!(
            "ck_{}",
            crate::hex::encode(&bytes)
        )))
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

    /// Stores the person's message, then has the agents it asks answer it, in parallel. A
    /// command (`/register`, ...) goes to the room's utility bot instead, and neither it nor
    /// the answer goes into anyone's context.
    pub async fn post_to_room(
        self: &Arc<Self>,
        owner: &str,
        room: RoomId,
        text: &str,
        reply_to: Option<RoomMessageId>,
    ) -> Result<Posted, RuntimeError> {
        let text = room::check_text(text).map_err(RuntimeError::Invalid)?;
        let room = self.owned_room(owner, room).await?;
        let participants = self.store.participants(room.id).await?;
        let replied = match reply_to {
            None => None,
            Some(id) => Some(
                self.store
                    .room_messages(room.id)
                    .await?
                    .into_iter()
                    .find(|m| m.id == id)
                    .ok_or_else(|| {
                        RuntimeError::field("reply_to", format!("the room has no message {id}"))
                    })?,
            ),
        };
        let command = room::command(text);
        let message = self
            .store
            .add_room_message(RoomMessage {
                id: RoomMessageId::new(),
                room: room.id,
                seq: 0,
                author: Author::Person,
                text: text.to_string(),
                included: command.is_none(),
                reply_to,
                tagged: room::mentioned(text, &participants),
                created_at: Utc::now(),
            })
            .await?;
        self.publish_room(room.id, RoomChange::Message(message.clone()));
        if let Some(command) = command {
            return self.utility(owner, &room, message, command).await;
        }
        let answering = room::responders(text, replied.as_ref(), &participants);
        let answers = self
            .answer(&room, participants, &answering, &message)
            .await?;
        Ok(Posted {
            message,
            answering,
            answers,
            caller_key: None,
        })
    }

    /// The utility bot carries out `command` and answers `message` with what it did (or what
    /// was wrong).
    async fn utility(
        &self,
        owner: &str,
        room: &Room,
        message: RoomMessage,
        command: Result<Command, String>,
    ) -> Result<Posted, RuntimeError> {
        let mut caller_key = None;
        let text = match command {
            Err(usage) => usage,
            Ok(Command::Help) => room::COMMANDS_HELP.to_string(),
            Ok(Command::Bots) => {
                let bots = self.room_bots(owner, room.id).await?;
                if bots.is_empty() {
                    "No bots are registered in this room. `/register <username> <endpoint> \
                     [emulated name]` adds one."
                        .to_string()
                } else {
                    let lines: Vec<String> = bots
                        .iter()
                        .filter_map(|p| {
                            let bot = p.bot()?;
                            let who = bot
                                .emulates
                                .as_deref()
                                .map(|e| format!(" (emulating {e})"))
                                .unwrap_or_default();
                            Some(format!("@{}{who} at {}", p.name, bot.endpoint))
                        })
                        .collect();
                    format!("Bots in this room:\n{}", lines.join("\n"))
                }
            }
            Ok(Command::Unregister { username }) => {
                match self.unregister_bot(owner, room.id, &username).await {
                    Ok(bot) => format!("Unregistered @{}.", bot.name),
                    Err(RuntimeError::NotFound(m)) => format!("{m}; `/bots` lists them."),
                    Err(e) => return Err(e),
                }
            }
            Ok(Command::Register {
                username,
                endpoint,
                emulates,
            }) => {
                let new = NewBot {
                    username,
                    endpoint,
                    emulates,
                };
                match self.register_bot(owner, room.id, new).await {
                    Ok((bot, key)) => {
                        use secrecy::ExposeSecret;
                        let last: String = {
                            let k: Vec<char> = key.expose_secret().chars().collect();
                            k[k.len().saturating_sub(4)..].iter().collect()
                        };
                        caller_key = Some(key);
                        format!(
                            "Registered @{}: tag it or reply to it and I call {} with the \
                             header X-CALLER-KEY. Its caller key (ending in …{last}) was shown \
                             once, to whoever registered it.",
                            bot.name,
                            bot.bot().map(|b| b.endpoint.as_str()).unwrap_or_default(),
                        )
                    }
                    Err(RuntimeError::Validation(errors)) => {
                        let problems: Vec<String> = errors
                            .0
                            .iter()
                            .map(|e| format!("{}: {}", e.path, e.message))
                            .collect();
                        format!("I could not register it. {}", problems.join("; "))
                    }
                    Err(RuntimeError::Invalid(m)) => format!("I could not register it: {m}"),
                    Err(e) => return Err(e),
                }
            }
        };
        let answer = self
            .store
            .add_room_message(RoomMessage {
                id: RoomMessageId::new(),
                room: room.id,
                seq: 0,
                author: Author::Utility,
                text,
                included: false,
                reply_to: Some(message.id),
                tagged: Vec::new(),
                created_at: Utc::now(),
            })
            .await?;
        self.publish_room(room.id, RoomChange::Message(answer.clone()));
        let mut answers = JoinSet::new();
        answers.spawn(std::future::ready(answer));
        Ok(Posted {
            message,
            answering: Vec::new(),
            answers,
            caller_key,
        })
    }

    /// Has one agent answer again (after a failure): the message its last failure answered,
    /// else the person's latest message.
    pub async fn retry(
        self: &Arc<Self>,
        owner: &str,
        room: RoomId,
        agent: ParticipantId,
    ) -> Result<Posted, RuntimeError> {
        let (room, _) = self.participant(owner, room, agent).await?;
        let messages = self.store.room_messages(room.id).await?;
        let failed_on = messages
            .iter()
            .rev()
            .find(|m| matches!(&m.author, Author::Error { id, .. } if *id == agent))
            .and_then(|m| m.reply_to);
        let asking = messages
            .iter()
            .rev()
            .find(|m| match failed_on {
                Some(id) => m.id == id,
                None => m.author == Author::Person && m.included,
            })
            .cloned()
            .ok_or_else(|| RuntimeError::Invalid("there is no message to answer yet".into()))?;
        let participants = self.store.participants(room.id).await?;
        let answers = self.answer(&room, participants, &[agent], &asking).await?;
        Ok(Posted {
            message: asking,
            answering: vec![agent],
            answers,
            caller_key: None,
        })
    }

    /// Starts `who`'s answers to `asking`, with the room as it stood then.
    async fn answer(
        self: &Arc<Self>,
        room: &Room,
        participants: Vec<Participant>,
        who: &[ParticipantId],
        asking: &RoomMessage,
    ) -> Result<JoinSet<RoomMessage>, RuntimeError> {
        let mut answers = JoinSet::new();
        if who.is_empty() {
            return Ok(answers);
        }
        let providers = self.room_providers(room).await?;
        let mut history = self.store.room_messages(room.id).await?;
        history.retain(|m| m.seq <= asking.seq);
        let history = Arc::new(history);
        let answering: Vec<Participant> = who
            .iter()
            .filter_map(|id| participants.iter().find(|p| p.id == *id).cloned())
            .collect();
        // Recorded before any call starts: a crash from here on leaves its mark (see
        // `Runtime::recover_rooms`).
        let ids: Vec<ParticipantId> = answering.iter().map(|p| p.id).collect();
        self.store.start_answers(room.id, asking.id, &ids).await?;
        let participants = Arc::new(participants);
        for agent in answering {
            let (rt, providers, history, participants, room, asking) = (
                self.clone(),
                providers.clone(),
                history.clone(),
                participants.clone(),
                room.clone(),
                asking.clone(),
            );
            answers.spawn(async move {
                rt.publish_room(room.id, RoomChange::AgentStarted(agent.id));
                let (result, reply_to, tagged) = match &agent.speaker {
                    Speaker::Model(model) => {
                        let text = rt
                            .model_answer(&room, &agent, model, &participants, &history, &providers)
                            .await;
                        (text, None, Vec::new())
                    }
                    Speaker::Bot(bot) => {
                        let text = rt
                            .bot_answer(
                                &room,
                                (&agent, bot),
                                &asking,
                                &participants,
                                &history,
                                &providers,
                            )
                            .await;
                        let tagged = room::reply_tags(&asking, &history, agent.id);
                        (text, Some(asking.id), tagged)
                    }
                };
                rt.store_answer(&room, &agent, asking.id, result, reply_to, tagged)
                    .await
            });
        }
        Ok(answers)
    }

    /// A model agent's answer, its deltas published as they stream.
    async fn model_answer(
        &self,
        room: &Room,
        agent: &Participant,
        model: &ModelRef,
        participants: &[Participant],
        history: &[RoomMessage],
        providers: &Providers,
    ) -> Result<String, String> {
        let Some(answerer) = providers.resolve(model) else {
            return Err(format!("no provider serves `{model}`"));
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let request = model_request(room, agent, model, participants, history, tx);
        let call = answerer.complete(request);
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

    /// A bot's answer to `asking`: its webhook called with the spec's request.
    async fn bot_answer(
        &self,
        room: &Room,
        (agent, bot): (&Participant, &Bot),
        asking: &RoomMessage,
        participants: &[Participant],
        history: &[RoomMessage],
        providers: &Providers,
    ) -> Result<String, String> {
        let client = providers
            .bots()
            .ok_or_else(|| "this server cannot make HTTP calls".to_string())?;
        let key = self.caller_key(agent).map_err(|e| e.to_string())?;
        let call = room::bot_call(agent.id, asking, history, participants);
        let request = bot_request(room, agent.id, &call);
        client
            .call(&bot.endpoint, &key, &request, None)
            .await
            .map_err(|e| format!("@{} could not answer: {e}", agent.name))
    }

    /// Stores an agent's answer (or its failure, in its place) and publishes it.
    async fn store_answer(
        &self,
        room: &Room,
        agent: &Participant,
        asked: RoomMessageId,
        result: Result<String, String>,
        reply_to: Option<RoomMessageId>,
        tagged: Vec<ParticipantId>,
    ) -> RoomMessage {
        let author = |ok: bool| {
            let (id, name) = (agent.id, agent.name.clone());
            if ok {
                Author::Agent { id, name }
            } else {
                Author::Error { id, name }
            }
        };
        let ok = result.is_ok();
        let text = result.unwrap_or_else(|error| {
            tracing::warn!(room = %room.id, agent = %agent.name, %error, "a room agent failed");
            error
        });
        let message = RoomMessage {
            id: RoomMessageId::new(),
            room: room.id,
            seq: 0,
            author: author(ok),
            text,
            included: ok,
            reply_to,
            tagged: if ok { tagged } else { Vec::new() },
            created_at: Utc::now(),
        };
        let stored = match self.store.add_room_answer(message.clone(), asked).await {
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

    /// On start: every answer a crash interrupted (recorded as started, never stored) becomes
    /// a failure in its agent's place, answering the message it was asked, so the person sees
    /// what happened and can Retry. Returns how many. Only the process that runs rooms may
    /// call this, before it answers anyone: another's answers in flight would look the same.
    pub async fn recover_rooms(&self) -> Result<usize, RuntimeError> {
        let interrupted = self.store.interrupted_answers().await?;
        let mut recovered = 0;
        for (room_id, asked, agent) in interrupted {
            let Some(room) = self.store.room(room_id).await? else {
                continue;
            };
            let participants = self.store.participants(room_id).await?;
            let Some(agent) = participants.iter().find(|p| p.id == agent) else {
                continue;
            };
            let text = format!(
                "{} was answering when the server stopped; the answer was lost. Retry asks again.",
                agent.name
            );
            self.store_answer(&room, agent, asked, Err(text), Some(asked), Vec::new())
                .await;
            recovered += 1;
        }
        Ok(recovered)
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
        enabled: true,
        position: 0,
        colour: String::new(),
    }
}

fn colour(position: i64) -> String {
    let i = usize::try_from(position).unwrap_or(0) % room::COLOURS.len();
    room::COLOURS[i].to_string()
}

/// A model call for a room agent: its room context as plain chat.
fn model_request(
    room: &Room,
    agent: &Participant,
    model: &ModelRef,
    participants: &[Participant],
    history: &[RoomMessage],
    deltas: tokio::sync::mpsc::UnboundedSender<String>,
) -> ModelRequest {
    let chat = room::context(agent, participants, history);
    let mut request = plain_chat_request(&room.owner, &agent.name, agent.role.clone(), model, chat);
    request.deltas = Some(deltas);
    request
}

/// A model call outside any routed conversation: one agent of a one-agent agency speaking
/// plain chat (no addressing), whose context is `chat` (system prompt first). Rooms and
/// evaluations call models this way.
pub fn plain_chat_request(
    owner: &str,
    name: &str,
    role: Option<String>,
    model: &ModelRef,
    chat: Vec<(Role, String)>,
) -> ModelRequest {
    let id = AgentId::first_free(1, |_| false);
    let scope = uuid::Uuid::now_v7();
    let agency = Agency {
        id: AgencyId(scope),
        owner: owner.to_string(),
        name: name.to_string(),
        handle: None,
        protocol: Protocol::Plain,
        manager: id,
        limits: Limits::default(),
        providers: Vec::new(),
        agents: vec![Agent {
            id,
            name: name.to_string(),
            handle: None,
            role,
            model: model.clone(),
            sampling: Sampling::default(),
            blocks: Vec::new(),
            memory: Default::default(),
        }],
        version: None,
    };
    let context = chat
        .into_iter()
        .zip(0i64..)
        .map(|((role, text), seq)| Message {
            id: MessageId::new(),
            conversation_id: ConversationId(scope),
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
        roster: Arc::new(Roster::new([(id, name.to_string())])),
        agency: Arc::new(agency),
        agent: id,
        context: Arc::new(context),
        deltas: None,
        on_retry: None,
    }
}

/// A bot's request in its wire format: the person is named by the room owner's id, agents by
/// their participant ids, and the bot's own messages are from `BOT`.
fn bot_request(room: &Room, bot: ParticipantId, call: &room::BotCall<'_>) -> BotRequest {
    let message = |m: &RoomMessage| BotMessage {
        from: match &m.author {
            Author::Agent { id, .. } if *id == bot => "BOT".to_string(),
            Author::Agent { id, .. } | Author::Error { id, .. } => id.to_string(),
            Author::Person => room.owner.clone(),
            Author::Utility => room::UTILITY.to_string(),
        },
        tagged: m.tagged.iter().map(ToString::to_string).collect(),
        id: m.id.to_string(),
        text: m.text.clone(),
        timestamp: m
            .created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    };
    BotRequest {
        context: call.context.iter().map(|m| message(m)).collect(),
        conversation: call
            .conversation
            .iter()
            .map(|x| BotConversation {
                id: x.id.to_string(),
                messages: x.messages.iter().map(|m| message(m)).collect(),
            })
            .collect(),
        message: message(call.message),
        users: call
            .users
            .iter()
            .map(|p| BotUser {
                id: p.id.to_string(),
                username: p.name.clone(),
            })
            .collect(),
    }
}
