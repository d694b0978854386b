//! The bots under evaluation: a webhook endpoint (called as a room would call it), or one of
//! our agents (its model asked with its instructions and the conversation so far).

use std::sync::Arc;

use agency_core::Role;
use agency_core::eval::{Transcript, TranscriptMessage, TranscriptUser};
use agency_providers::bot::{BotClient, BotMessage, BotUser, EvalRequest};
use agency_providers::{ChatMessage, ChatRequest, Model};
use secrecy::SecretString;

/// A bot to evaluate.
pub enum Contestant {
    /// A webhook bot, sent the spec's request with `X-CALLER-KEY: key`.
    Endpoint {
        label: String,
        url: String,
        key: SecretString,
        client: BotClient,
    },
    /// One of our agents, answering as the person would.
    Agent {
        label: String,
        /// Its role and instructions, as the start of its system prompt.
        instructions: String,
        model: agency_core::ModelRef,
        answerer: Arc<dyn Model>,
    },
}

impl Contestant {
    pub fn label(&self) -> &str {
        match self {
            Contestant::Endpoint { label, .. } | Contestant::Agent { label, .. } => label,
        }
    }

    /// The bot's answer in place of `transcript.messages[reply]`, given what came before it.
    pub async fn answer(
        &self,
        transcript: &Transcript,
        person: &TranscriptUser,
        reply: usize,
    ) -> Result<String, String> {
        let before = &transcript.messages[..reply];
        match self {
            Contestant::Endpoint {
                url, key, client, ..
            } => client
                .call(url, key, &request(transcript, person, before), None)
                .await
                .map_err(|e| e.to_string()),
            Contestant::Agent {
                instructions,
                answerer,
                ..
            } => {
                let request = agent_request(transcript, person, before, instructions);
                answerer
                    .chat(request)
                    .await
                    .map(|c| c.text)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// The spec's request for the reply after `before`: the last message is `message`, those
/// before it the `context`, and all of them, in order, the `conversation` (as spec 003's
/// evaluation passes it); the emulated person's own messages are the bot's (`BOT`).
pub fn request(
    transcript: &Transcript,
    person: &TranscriptUser,
    before: &[TranscriptMessage],
) -> EvalRequest {
    let wire = |m: &TranscriptMessage| BotMessage {
        from: if m.from == person.id {
            "BOT".to_string()
        } else {
            m.from.clone()
        },
        tagged: m.tagged.clone(),
        id: m.id.clone(),
        text: m.text.clone(),
        timestamp: m.timestamp.clone(),
    };
    let (last, context) = before
        .split_last()
        .map_or((None, &[][..]), |(l, c)| (Some(l), c));
    EvalRequest {
        context: context.iter().map(wire).collect(),
        conversation: before.iter().map(wire).collect(),
        message: last.map(wire).unwrap_or(BotMessage {
            from: String::new(),
            tagged: Vec::new(),
            id: String::new(),
            text: String::new(),
            timestamp: String::new(),
        }),
        users: transcript
            .users
            .iter()
            .map(|u| BotUser {
                id: u.id.clone(),
                username: u.username.clone(),
            })
            .collect(),
    }
}

/// Our agent's call: its instructions, then the conversation, the person's messages as its
/// own turns and everyone else's as user turns starting with their name.
fn agent_request(
    transcript: &Transcript,
    person: &TranscriptUser,
    before: &[TranscriptMessage],
    instructions: &str,
) -> ChatRequest {
    let name = |id: &str| {
        transcript
            .users
            .iter()
            .find(|u| u.id == id)
            .map_or(id.to_string(), |u| u.username.clone())
    };
    let mut system = format!(
        "You are {} in a group chat. Answer the next message as {} would: in their voice, in \
         plain text, without a name in front.",
        person.username, person.username
    );
    if !instructions.trim().is_empty() {
        system.push_str("\n\n");
        system.push_str(instructions.trim());
    }
    let mut chat = vec![ChatMessage::new(Role::System, system)];
    for m in before {
        if m.from == person.id {
            chat.push(ChatMessage::new(Role::Assistant, m.text.clone()));
        } else {
            chat.push(ChatMessage::new(
                Role::User,
                format!("{}: {}", name(&m.from), m.text),
            ));
        }
    }
    ChatRequest {
        messages: chat,
        ..ChatRequest::default()
    }
}
