//! Webhook bots in rooms (spec 003): registering them, their caller keys, calling them, and
//! the utility bot's commands.

use agency_core::room::{self, Author, Bot, Command, Participant, Room, RoomMessage, Speaker};
use agency_core::{ParticipantId, RoomId, RoomMessageId};
use agency_providers::Providers;
use agency_providers::bot::{BotConversation, BotMessage, BotRequest, BotUser};
use chrono::Utc;
use secrecy::SecretString;
use tokio::task::JoinSet;

use super::{NewBot, Posted, RoomChange, Rooms, newcomer, optional};
use crate::RuntimeError;

impl Rooms<'_> {
    /// Registers a webhook bot in the owner's room (spec 003): it answers when tagged or
    /// replied to. Returns it with its caller key, which the caller shows once.
    pub async fn register_bot(
        &self,
        owner: &str,
        room: RoomId,
        new: NewBot,
    ) -> Result<(Participant, SecretString), RuntimeError> {
        let room = self.owned(owner, room).await?;
        let name = room::check_name(new.username.trim_start_matches('@'))
            .map_err(|e| RuntimeError::field("username", e))?
            .to_string();
        let endpoint = new.endpoint.trim();
        let bots = self
            .setting(&room)
            .await?
            .providers
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
    pub async fn bots(&self, owner: &str, room: RoomId) -> Result<Vec<Participant>, RuntimeError> {
        let room = self.owned(owner, room).await?;
        let mut ps = self.rt.store.participants(room.id).await?;
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
            .bots(owner, room)
            .await?
            .into_iter()
            .find(|p| p.name.eq_ignore_ascii_case(username))
            .ok_or_else(|| RuntimeError::NotFound(format!("the room has no bot `@{username}`")))?;
        self.rt.store.delete_participant(room, bot.id).await?;
        self.publish_room(room, RoomChange::Participants);
        Ok(bot)
    }

    /// A bot's caller key: derived from the master key, the room and the bot, so it is
    /// stored nowhere and the same every time. A bot registered again gets a new one.
    fn caller_key(&self, bot: &Participant) -> Result<SecretString, RuntimeError> {
        let source = self.rt.master_key().ok_or_else(|| {
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

    /// The utility bot carries out `command` and answers `message` with what it did (or what
    /// was wrong).
    pub(super) async fn utility(
        &self,
        owner: &str,
        room: &Room,
        message: RoomMessage,
        command: Result<Command, room::CommandError>,
    ) -> Result<Posted, RuntimeError> {
        let mut caller_key = None;
        let text = match command {
            Err(usage) => usage.to_string(),
            Ok(Command::Help) => room::COMMANDS_HELP.to_string(),
            Ok(Command::Bots) => room::replies::bots(&self.bots(owner, room.id).await?),
            Ok(Command::Unregister { username }) => {
                match self.unregister_bot(owner, room.id, &username).await {
                    Ok(bot) => room::replies::unregistered(&bot),
                    Err(RuntimeError::NotFound(m)) => room::replies::no_such_bot(&m),
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
                        let text = room::replies::registered(&bot, key.expose_secret());
                        caller_key = Some(key);
                        text
                    }
                    Err(RuntimeError::Validation(errors)) => room::replies::not_valid(&errors),
                    Err(RuntimeError::Invalid(m)) => room::replies::not_registered(&m),
                    Err(e) => return Err(e),
                }
            }
        };
        let answer = self.utility_says(room, &message, text).await?;
        let mut answers = JoinSet::new();
        answers.spawn(std::future::ready(answer));
        Ok(Posted {
            message,
            answering: Vec::new(),
            answers,
            caller_key,
        })
    }

    /// The utility bot's reply to `message` (never in anyone's context), stored and told.
    pub(super) async fn utility_says(
        &self,
        room: &Room,
        message: &RoomMessage,
        text: String,
    ) -> Result<RoomMessage, RuntimeError> {
        let said = self
            .rt
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
        self.publish_room(room.id, RoomChange::Message(said.clone()));
        Ok(said)
    }

    /// A bot's answer to `asking`: its webhook called with the spec's request.
    pub(super) async fn bot_answer(
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
