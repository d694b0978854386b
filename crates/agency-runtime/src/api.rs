//! Chat Completions over conversations. The API is stateless — every request resends the
//! history — while an agency's agents keep their own contexts. A request whose earlier messages
//! equal the visible transcript (the client's system message, user messages and answers) of
//! one of its key's conversations continues that conversation; any other starts a new one.

use std::sync::Arc;

use agency_core::{Agency, ApiKey, ConversationId, Role};
use agency_store::ApiThread;
use sha2::{Digest, Sha256};
use tokio::sync::OwnedMutexGuard;

use crate::turn::Session;
use crate::{Runtime, RuntimeError, TurnOutcome};

/// One Chat Completions request, as the conversation sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatTurn {
    /// The client's system messages, joined: appended to the manager's system prompt.
    pub system: Option<String>,
    /// The visible transcript before the new message: user messages and answers, in order.
    pub history: Vec<(Role, String)>,
    /// The new user messages, as sent (usually one): the manager gets them joined.
    pub input: Vec<String>,
    /// A conversation the client named (`x-agency-conversation`); its history is then the
    /// server's.
    pub conversation: Option<ConversationId>,
    /// How the answer should begin (a client's last assistant message, a "prefill"): the
    /// manager is asked, after the new message, to begin its answer with it. Not part of the
    /// transcript: the client's next request holds the answer instead.
    pub prefill: Option<String>,
}

/// The new message as the manager reads it: the user's messages, and the prefill asked for.
fn manager_input(input: &[String], prefill: Option<&str>) -> String {
    let text = input.join("\n\n");
    match prefill {
        Some(prefill) => format!("{text}\n\n(Begin your answer with exactly: {prefill})"),
        None => text,
    }
}

/// A stable digest of a visible transcript.
pub fn transcript_hash(system: Option<&str>, turns: &[(Role, String)]) -> String {
    let mut h = Sha256::new();
    let mut field = |s: &str| {
        h.update((s.len() as u64).to_be_bytes());
        h.update(s.as_bytes());
    };
    field(system.unwrap_or(""));
    for (role, text) in turns {
        field(role.as_str());
        field(text);
    }
    crate::hex::encode(&h.finalize())
}

/// A conversation a request will take its turn in, locked for it (one turn at a time).
pub struct Opened {
    id: ConversationId,
    guard: OwnedMutexGuard<Option<Session>>,
}

impl Opened {
    pub fn id(&self) -> ConversationId {
        self.id
    }
}

/// The transcript of a request before its answer: recorded, with the answer, when the turn
/// answers, in the same write.
pub(crate) struct Thread {
    key: uuid::Uuid,
    system: Option<String>,
    before: Vec<(Role, String)>,
}

impl Thread {
    pub(crate) fn answered(mut self, conversation: ConversationId, answer: &str) -> ApiThread {
        self.before.push((Role::Assistant, answer.to_string()));
        ApiThread {
            key: self.key,
            hash: transcript_hash(self.system.as_deref(), &self.before),
            conversation,
        }
    }
}

impl Runtime {
    /// The conversation a request continues (or names), or a new one for it, kept in memory
    /// until the turn's first write.
    pub async fn api_conversation(
        &self,
        key: &ApiKey,
        agency: &Agency,
        turn: &ChatTurn,
    ) -> Result<Opened, RuntimeError> {
        let system = turn.system.as_deref();
        let known = match turn.conversation {
            Some(id) => match self.store.conversation(id).await? {
                Some(c) if c.agency_id == agency.id => Some(id),
                _ => return Err(RuntimeError::ConversationNotFound(id)),
            },
            None if turn.history.is_empty() => None,
            None => {
                self.store
                    .api_thread(key.id, &transcript_hash(system, &turn.history))
                    .await?
            }
        };
        Ok(match known {
            Some(id) => Opened {
                id,
                guard: self.lock_conversation(id).await?,
            },
            None => self.open_conversation(agency, system).await,
        })
    }

    /// A new conversation kept in memory until its first turn writes it (with that turn's
    /// first write), whose manager's system prompt ends with `manager_system` (a client's own
    /// system message, as spec 000 has it; no other agent sees it).
    async fn open_conversation(&self, agency: &Agency, manager_system: Option<&str>) -> Opened {
        let (conversation, session) = Session::fresh(ConversationId::new(), agency, manager_system);
        // A new id: its lock is free.
        let mut guard = self.session_slot(conversation.id).lock_owned().await;
        *guard = Some(session);
        Opened {
            id: conversation.id,
            guard,
        }
    }

    /// Runs the request's turn in the conversation and remembers the transcript, so that the
    /// next request continues it.
    pub async fn api_turn(
        self: &Arc<Self>,
        key: &ApiKey,
        opened: Opened,
        turn: ChatTurn,
        answer: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<TurnOutcome, RuntimeError> {
        // Named by its id, the conversation's transcript is the server's, not the request's.
        let mut before = if turn.conversation.is_some() && turn.history.is_empty() {
            self.visible_transcript(opened.id).await?
        } else {
            turn.history
        };
        before.extend(turn.input.iter().map(|text| (Role::User, text.clone())));
        let thread = Thread {
            key: key.id,
            system: turn.system,
            before,
        };
        crate::turn::run(
            self.clone(),
            opened.guard,
            manager_input(&turn.input, turn.prefill.as_deref()),
            answer,
            Some(thread),
        )
        .await
    }

    /// The user's messages and the answers of the conversation so far.
    async fn visible_transcript(
        &self,
        conversation: ConversationId,
    ) -> Result<Vec<(Role, String)>, RuntimeError> {
        Ok(self
            .store
            .messages(conversation)
            .await?
            .into_iter()
            .filter_map(|m| match m.kind {
                agency_core::MessageKind::Input => Some((Role::User, m.text)),
                agency_core::MessageKind::Answer => Some((Role::Assistant, m.text)),
                _ => None,
            })
            .collect())
    }

    /// Both: one Chat Completions request.
    pub async fn chat_completion(
        self: &Arc<Self>,
        key: &ApiKey,
        agency: &Agency,
        turn: ChatTurn,
    ) -> Result<TurnOutcome, RuntimeError> {
        let opened = self.api_conversation(key, agency, &turn).await?;
        self.api_turn(key, opened, turn, None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefill_follows_the_new_message() {
        let input = ["a haiku".to_string(), "about frogs".to_string()];
        assert_eq!(manager_input(&input, None), "a haiku\n\nabout frogs");
        assert_eq!(
            manager_input(&input, Some("Sure!")),
            "a haiku\n\nabout frogs\n\n(Begin your answer with exactly: Sure!)"
        );
    }

    #[test]
    fn hashes_tell_transcripts_apart() {
        let t = |pairs: &[(Role, &str)]| {
            pairs
                .iter()
                .map(|(r, s)| (*r, s.to_string()))
                .collect::<Vec<_>>()
        };
        let a = transcript_hash(None, &t(&[(Role::User, "hi"), (Role::Assistant, "hello")]));
        assert_eq!(
            a,
            transcript_hash(None, &t(&[(Role::User, "hi"), (Role::Assistant, "hello")]))
        );
        assert_ne!(
            a,
            transcript_hash(
                Some("be brief"),
                &t(&[(Role::User, "hi"), (Role::Assistant, "hello")])
            )
        );
        assert_ne!(
            a,
            transcript_hash(None, &t(&[(Role::User, "hih"), (Role::Assistant, "ello")])),
            "fields are delimited"
        );
        assert_ne!(
            a,
            transcript_hash(None, &t(&[(Role::Assistant, "hi"), (Role::User, "hello")]))
        );
    }
}
