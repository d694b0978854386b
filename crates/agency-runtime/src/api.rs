//! Chat Completions over conversations. The API is stateless — every request resends the
//! history — while an agency's agents keep their own contexts. Each answered turn records the
//! hash of its visible transcript (the end user, the client's system message, the user's
//! messages and the answers, up to that answer). A request's history (what precedes its new
//! message) is looked up at each of its answers, longest first:
//!
//! - all of it is the transcript of a conversation's latest turn: it **continues** that
//!   conversation;
//! - a part of it ends at an earlier answer, or at the latest one of a conversation that went
//!   on since (a regenerated or edited message, another end user on the same opening): a
//!   **fork** of that conversation as it stood after that turn — every agent's context copied,
//!   no model called — in which the rest of the history, if any, is **seeded**;
//! - nothing: a new conversation whose manager's context is **seeded** with the whole history
//!   (the user's messages and its own answers, in order); the other agents start fresh.

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
    /// The end user the request names (`user`, `safety_identifier`): its transcripts are
    /// matched only with that end user's.
    pub end_user: Option<String>,
}

/// The new message as the manager reads it: the user's messages, and the prefill asked for.
fn manager_input(input: &[String], prefill: Option<&str>) -> String {
    let text = input.join("\n\n");
    match prefill {
        Some(prefill) => format!("{text}\n\n(Begin your answer with exactly: {prefill})"),
        None => text,
    }
}

/// A stable digest of a visible transcript, of an end user when named (without one, the digest
/// is the one recorded before end users were).
pub fn transcript_hash(
    end_user: Option<&str>,
    system: Option<&str>,
    turns: &[(Role, String)],
) -> String {
    let mut h = Hasher::new(end_user, system);
    for (role, text) in turns {
        h.push(*role, text);
    }
    h.digest()
}

/// The digests of `turns`' prefixes that end with an answer, each with its length: what
/// [`transcript_hash`] gives for each, in one pass over the history.
fn answer_hashes(
    end_user: Option<&str>,
    system: Option<&str>,
    turns: &[(Role, String)],
) -> Vec<(usize, String)> {
    let mut h = Hasher::new(end_user, system);
    let mut out = Vec::new();
    for (i, (role, text)) in turns.iter().enumerate() {
        h.push(*role, text);
        if *role == Role::Assistant {
            out.push((i + 1, h.digest()));
        }
    }
    out
}

/// A transcript's digest as it is fed, length-delimited field by field.
struct Hasher(Sha256);

impl Hasher {
    fn new(end_user: Option<&str>, system: Option<&str>) -> Self {
        let mut h = Self(Sha256::new());
        if let Some(user) = end_user {
            // A length no text field can have marks the end user's field.
            h.0.update(u64::MAX.to_be_bytes());
            h.field(user);
        }
        h.field(system.unwrap_or(""));
        h
    }

    fn field(&mut self, s: &str) {
        self.0.update((s.len() as u64).to_be_bytes());
        self.0.update(s.as_bytes());
    }

    fn push(&mut self, role: Role, text: &str) {
        self.field(role.as_str());
        self.field(text);
    }

    /// The digest so far (the hasher goes on).
    fn digest(&self) -> String {
        crate::hex::encode(&self.0.clone().finalize())
    }
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
    end_user: Option<String>,
    system: Option<String>,
    before: Vec<(Role, String)>,
}

impl Thread {
    pub(crate) fn answered(
        mut self,
        conversation: ConversationId,
        turn: u32,
        answer: &str,
    ) -> ApiThread {
        self.before.push((Role::Assistant, answer.to_string()));
        ApiThread {
            key: self.key,
            hash: transcript_hash(
                self.end_user.as_deref(),
                self.system.as_deref(),
                &self.before,
            ),
            conversation,
            turn,
        }
    }
}

/// Where a request's history leads (see the module's documentation).
enum Found {
    New,
    Continue(ConversationId),
    /// Through turn `turn` of `conversation`, then `rest` of the history seeded.
    Fork {
        conversation: ConversationId,
        turn: u32,
        rest: usize,
    },
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
        let found = match turn.conversation {
            Some(id) => match self.store.conversation(id).await? {
                Some(c) if c.agency_id == agency.id => Found::Continue(id),
                _ => return Err(RuntimeError::ConversationNotFound(id)),
            },
            None => self.find(key, turn).await?,
        };
        let history = &turn.history;
        Ok(match found {
            Found::Continue(id) => Opened {
                id,
                guard: self.lock_conversation(id).await?,
            },
            Found::Fork {
                conversation,
                turn,
                rest,
            } => {
                let mut session = self.fork(conversation, turn).await?;
                session.seed(history[history.len() - rest..].to_vec());
                let id = session.conversation;
                // A new id: its lock is free.
                let mut guard = self.session_slot(id).lock_owned().await;
                *guard = Some(session);
                Opened { id, guard }
            }
            Found::New => {
                let mut opened = self.open_conversation(agency, system).await;
                if let Some(session) = opened.guard.as_mut() {
                    session.seed(history.clone());
                }
                opened
            }
        })
    }

    /// The conversation a request's history continues or forks, looked up at each of its
    /// answers in one query.
    async fn find(&self, key: &ApiKey, turn: &ChatTurn) -> Result<Found, RuntimeError> {
        let history = &turn.history;
        let ends = answer_hashes(turn.end_user.as_deref(), turn.system.as_deref(), history);
        let hashes: Vec<String> = ends.iter().map(|(_, h)| h.clone()).collect();
        let matches = self.store.api_threads(key.id, &hashes).await?;
        let longest = ends.iter().rev().find_map(|(end, hash)| {
            matches
                .iter()
                .find(|m| m.hash == *hash)
                .map(|m| (history.len() - end, m))
        });
        Ok(match longest {
            None => Found::New,
            Some((0, m)) if m.turn == 0 || m.turn == m.last_turn => Found::Continue(m.conversation),
            Some((rest, m)) => Found::Fork {
                conversation: m.conversation,
                turn: if m.turn == 0 { m.last_turn } else { m.turn },
                rest,
            },
        })
    }

    /// A copy of `conversation` as it stood after its turn `through`: its turns' records and
    /// every agent's context up to then, under new ids, written in one write, and held as a
    /// session. No model is called.
    async fn fork(
        &self,
        conversation: ConversationId,
        through: u32,
    ) -> Result<Session, RuntimeError> {
        let source = self
            .store
            .conversation(conversation)
            .await?
            .ok_or(RuntimeError::ConversationNotFound(conversation))?;
        let copy = agency_core::Conversation {
            id: ConversationId::new(),
            created_at: chrono::Utc::now(),
            ..source
        };
        let (turns, messages) = agency_core::message::fork(
            copy.id,
            &self.store.turns(conversation).await?,
            &self.store.messages_through(conversation, through).await?,
            through,
        );
        let written = self
            .store
            .write(agency_store::Write {
                conversation: Some(copy.clone()),
                messages,
                turns,
                thread: None,
            })
            .await?;
        Ok(Session::of(&copy, written.messages))
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
            end_user: turn.end_user,
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
        let a = transcript_hash(
            None,
            None,
            &t(&[(Role::User, "hi"), (Role::Assistant, "hello")]),
        );
        assert_eq!(
            a,
            transcript_hash(
                None,
                None,
                &t(&[(Role::User, "hi"), (Role::Assistant, "hello")])
            )
        );
        assert_ne!(
            a,
            transcript_hash(
                None,
                Some("be brief"),
                &t(&[(Role::User, "hi"), (Role::Assistant, "hello")])
            )
        );
        assert_ne!(
            a,
            transcript_hash(
                None,
                None,
                &t(&[(Role::User, "hih"), (Role::Assistant, "ello")])
            ),
            "fields are delimited"
        );
        assert_ne!(
            a,
            transcript_hash(
                Some("ann"),
                None,
                &t(&[(Role::User, "hi"), (Role::Assistant, "hello")])
            ),
            "an end user's transcripts are theirs"
        );
        let prefixes = answer_hashes(
            Some("ann"),
            None,
            &t(&[
                (Role::User, "hi"),
                (Role::Assistant, "hello"),
                (Role::User, "more"),
            ]),
        );
        assert_eq!(
            prefixes,
            [(
                2,
                transcript_hash(
                    Some("ann"),
                    None,
                    &t(&[(Role::User, "hi"), (Role::Assistant, "hello")])
                )
            )],
            "one digest at each answer, as the whole would have it"
        );
        assert_ne!(
            transcript_hash(Some(""), None, &[]),
            transcript_hash(None, Some(""), &t(&[(Role::User, "")])),
            "the end user's field is marked"
        );
        assert_ne!(
            a,
            transcript_hash(
                None,
                None,
                &t(&[(Role::Assistant, "hi"), (Role::User, "hello")])
            )
        );
    }
}
