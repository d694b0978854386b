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
//!   (the user's messages, its own answers, its calls of the client's tools and their results,
//!   in order); the other agents start fresh.
//!
//! A turn whose manager called the client's tools pauses, and records the transcript up to
//! those calls; a request whose new messages are their results, and whose history is that
//! transcript, **resumes** the paused turn (see `crate::turn`).

use std::sync::Arc;

use agency_core::tool::{ToolCall, ToolPart, ToolUse};
use agency_core::{Agency, ApiKey, ChatMessage, ConversationId, Role, Tool};
pub use agency_store::ApiResponse;
use agency_store::ApiThread;
use sha2::{Digest, Sha256};

use crate::session::{Session, TurnInput};
use crate::{Runtime, RuntimeError, TurnOutcome};

/// A client's answer to an approval its turn paused on: which, approve or not, and why.
pub type ApprovalAnswer = (agency_core::ApprovalId, bool, Option<String>);

/// One Chat Completions request, as the conversation sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatTurn {
    /// The client's system messages, joined: appended to the manager's system prompt.
    pub system: Option<String>,
    /// The transcript before the new messages: user messages, answers, calls of the client's
    /// tools and their results, in order.
    pub history: Vec<ChatMessage>,
    /// The new messages, as sent: results of the client's tools the last assistant message
    /// called, and user messages (usually one; the manager gets them joined).
    pub input: Vec<ChatMessage>,
    /// A conversation the client named (`x-agency-conversation`); its history is then the
    /// server's.
    pub conversation: Option<ConversationId>,
    /// A conversation as it stood after one of its turns (a Responses API request's
    /// `previous_response_id`): continued when that is its latest turn, else forked there.
    pub after: Option<(ConversationId, u32)>,
    /// How the answer should begin (a client's last assistant message, a "prefill"): the
    /// manager is asked, after the new message, to begin its answer with it. Not part of the
    /// transcript: the client's next request holds the answer instead.
    pub prefill: Option<String>,
    /// The end user the request names (`user`, `safety_identifier`): its transcripts are
    /// matched only with that end user's.
    pub end_user: Option<String>,
    /// The client's tools: the manager may call them beside its own (a call pauses the turn).
    pub tools: Vec<Tool>,
    /// How the manager may use them.
    pub tool_use: ToolUse,
    /// What the answer must be (JSON, of a schema), when the client asks.
    pub format: Option<crate::format::ResponseFormat>,
    /// Answers to the approvals the turn `after` names paused on (the Responses API's
    /// `mcp_approval_response` items): id, approve, reason. They resume that turn.
    pub approvals: Vec<ApprovalAnswer>,
    /// Whether the client answers approvals in its next request (the Responses API's
    /// approval items, A2A's input required, MCP's `input_required`): a turn whose calls wait
    /// for a person then pauses on them, instead of waiting for an answer given elsewhere.
    pub pause_on_approvals: bool,
}

impl ChatTurn {
    /// The new user messages' text, joined.
    fn user_text(&self) -> String {
        self.input
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The images of the new user messages, in order.
    fn images(&self) -> Vec<String> {
        self.input
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.images.iter().cloned())
            .collect()
    }

    /// The new tool results: (call id, text), in order.
    fn results(&self) -> Vec<(String, String)> {
        self.input
            .iter()
            .filter_map(|m| match &m.tool {
                Some(ToolPart::Result(r)) => Some((r.call_id.clone(), m.text.clone())),
                _ => None,
            })
            .collect()
    }
}

/// The new message as the manager reads it: the user's messages, and the prefill asked for.
fn manager_input(text: String, prefill: Option<&str>) -> String {
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
    turns: &[ChatMessage],
) -> String {
    let mut h = Hasher::new(end_user, system);
    for said in turns {
        h.push(said);
    }
    h.digest()
}

/// The digests of `turns`' prefixes that end with an assistant message (an answer, or calls
/// of the client's tools), each with its length and whether it ends with calls: what
/// [`transcript_hash`] gives for each, in one pass over the history.
fn answer_hashes(
    end_user: Option<&str>,
    system: Option<&str>,
    turns: &[ChatMessage],
) -> Vec<(usize, String, bool)> {
    let mut h = Hasher::new(end_user, system);
    let mut out = Vec::new();
    for (i, said) in turns.iter().enumerate() {
        h.push(said);
        if said.role == Role::Assistant {
            let calls = said.tool.as_ref().is_some_and(|t| !t.calls().is_empty());
            out.push((i + 1, h.digest(), calls));
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

    /// A message: its role and text, then (only when it has them, so that digests of plain
    /// transcripts stay as they were) its calls' ids and names, or the call its result answers.
    fn push(&mut self, said: &ChatMessage) {
        self.field(said.role.as_str());
        self.field(&said.text);
        // A length no text field can have marks each part.
        let mark = (u64::MAX - 1).to_be_bytes();
        match &said.tool {
            None => {}
            Some(ToolPart::Calls(calls)) => {
                for call in calls {
                    self.0.update(mark);
                    self.field(&call.id);
                    self.field(&call.name);
                }
            }
            Some(ToolPart::Result(r)) => {
                self.0.update(mark);
                self.field(&r.call_id);
            }
        }
    }

    /// The digest so far (the hasher goes on).
    fn digest(&self) -> String {
        crate::hex::encode(&self.0.clone().finalize())
    }
}

/// A conversation a request will take its turn in, locked for it (one turn at a time).
pub(crate) struct Opened {
    id: ConversationId,
    guard: crate::lock::Locked,
}

impl Opened {
    pub(crate) fn id(&self) -> ConversationId {
        self.id
    }

    /// The conversation's lock, for its turn.
    pub(crate) fn into_guard(self) -> crate::lock::Locked {
        self.guard
    }
}

/// The transcript of a request before its answer: recorded, with the answer, when the turn
/// answers, in the same write.
pub(crate) struct Thread {
    key: uuid::Uuid,
    end_user: Option<String>,
    system: Option<String>,
    before: Vec<ChatMessage>,
}

impl Thread {
    /// The end user the request named.
    pub(crate) fn end_user(&self) -> Option<&str> {
        self.end_user.as_deref()
    }

    /// The transcript with `last`, the answer (or the calls of the client's tools) of turn
    /// `turn`, as recorded.
    pub(crate) fn ended(
        mut self,
        conversation: ConversationId,
        turn: u32,
        last: ChatMessage,
    ) -> ApiThread {
        self.before.push(last);
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

/// What an API request adds to its turn.
pub(crate) struct ApiTurn {
    /// The key that asked (its budgets pay for the turn).
    pub key: ApiKey,
    /// Its transcript, recorded with the answer (or the calls it pauses on).
    pub thread: Thread,
    /// The client's tools, the manager's beside its own, and how it may use them.
    pub tools: Arc<Vec<Tool>>,
    pub tool_use: ToolUse,
    /// What the answer must be.
    pub format: Option<crate::format::ResponseFormat>,
    /// Calls waiting for a person pause the turn (see [`ChatTurn::pause_on_approvals`]).
    pub pause_on_approvals: bool,
}

/// An API request's turn as the turn is given it: the manager's input (the user's messages,
/// or the results of the client's tools, with their images) and what the request adds.
pub(crate) struct ApiInput {
    pub input: TurnInput,
    pub api: ApiTurn,
}

/// Where a request's history leads (see the module's documentation).
enum Found {
    New,
    Continue(ConversationId),
    /// The history ends with the calls of the client's tools a turn of this conversation
    /// paused on, when it still waits for them.
    Resume(ConversationId),
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
    pub(crate) async fn api_conversation(
        &self,
        key: &ApiKey,
        agency: &Agency,
        turn: &ChatTurn,
    ) -> Result<Opened, RuntimeError> {
        let system = turn.system.as_deref();
        let found = match (turn.conversation, turn.after) {
            (Some(id), _) => match self.store.conversation(id).await? {
                Some(c) if c.agency_id == agency.id => Found::Continue(id),
                _ => return Err(RuntimeError::ConversationNotFound(id)),
            },
            (None, Some((id, after))) => match self.store.conversation(id).await? {
                Some(c) if c.agency_id == agency.id => {
                    let last = self.store.last_turn(id).await?.map_or(0, |t| t.number);
                    if after >= last {
                        Found::Continue(id)
                    } else {
                        Found::Fork {
                            conversation: id,
                            turn: after,
                            rest: turn.history.len(),
                        }
                    }
                }
                _ => return Err(RuntimeError::ConversationNotFound(id)),
            },
            (None, None) => self.find(key, turn, false).await?,
        };
        let found = match found {
            Found::Resume(id) => {
                let guard = self.lock_conversation(id).await?;
                if waits_for(guard.session(), agency.manager, turn) {
                    return Ok(Opened { id, guard });
                }
                // Its calls were answered since (a retried request): as any other history.
                drop(guard);
                self.find(key, turn, true).await?
            }
            found => found,
        };
        let history = &turn.history;
        Ok(match found {
            Found::Continue(id) | Found::Resume(id) => Opened {
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
                Opened {
                    id,
                    guard: crate::lock::Locked::new_conversation(self.session_slot(id), session)
                        .await,
                }
            }
            Found::New => {
                let mut opened = self.open_conversation(agency, system).await;
                if let Some(session) = opened.guard.session_mut() {
                    session.seed(history.clone());
                }
                opened
            }
        })
    }

    /// The conversation a request's history resumes, continues or forks, looked up at each
    /// of its assistant messages in one query; at answers only with `answers_only`.
    async fn find(
        &self,
        key: &ApiKey,
        turn: &ChatTurn,
        answers_only: bool,
    ) -> Result<Found, RuntimeError> {
        let history = &turn.history;
        let ends = answer_hashes(turn.end_user.as_deref(), turn.system.as_deref(), history);
        // Calls are looked up only at the history's end (those it goes on after were answered).
        let last = ends.len();
        let ends: Vec<(usize, String, bool)> = ends
            .into_iter()
            .enumerate()
            .filter(|(i, (_, _, calls))| !calls || (!answers_only && i + 1 == last))
            .map(|(_, end)| end)
            .collect();
        let hashes: Vec<String> = ends.iter().map(|(_, h, _)| h.clone()).collect();
        let matches = self.store.api_threads(key.id, &hashes).await?;
        let longest = ends
            .iter()
            .rev()
            .filter_map(|(end, hash, calls)| {
                matches
                    .iter()
                    .find(|m| m.hash == *hash)
                    .map(|m| (history.len() - end, *calls, m))
            })
            // Calls of a turn the conversation went on after cannot be resumed.
            .find(|(rest, calls, m)| !calls || (*rest == 0 && m.turn == m.last_turn));
        Ok(match longest {
            None => Found::New,
            // The calls a paused turn made, answered by the request: it resumes.
            Some((_, true, m)) => Found::Resume(m.conversation),
            Some((rest, false, m)) => match (rest, m) {
                (0, m) if m.turn == 0 || m.turn == m.last_turn => Found::Continue(m.conversation),
                (rest, m) => Found::Fork {
                    conversation: m.conversation,
                    turn: if m.turn == 0 { m.last_turn } else { m.turn },
                    rest,
                },
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
        Opened {
            id: conversation.id,
            guard: crate::lock::Locked::new_conversation(
                self.session_slot(conversation.id),
                session,
            )
            .await,
        }
    }

    /// What the request's turn in the conversation `opened` is given: the manager's input,
    /// and what the turn records, so that the next request continues it.
    pub(crate) async fn api_input(
        &self,
        key: &ApiKey,
        opened: ConversationId,
        turn: ChatTurn,
    ) -> Result<ApiInput, RuntimeError> {
        let mut text = manager_input(turn.user_text(), turn.prefill.as_deref());
        // The format goes with the user's message (results resuming a turn bring none: the
        // manager was told with the message that began it).
        if let Some(format) = turn.format.as_ref().filter(|_| !text.trim().is_empty()) {
            text = format!("{text}\n\n{}", format.instructions());
        }
        let (results, images) = (turn.results(), turn.images());
        let by = if turn.approvals.is_empty() {
            String::new()
        } else {
            format!("API key {}", key.name)
        };
        let approvals = turn
            .approvals
            .iter()
            .map(|(id, approve, reason)| {
                let answer = agency_core::approval::Answer {
                    approve: *approve,
                    reason: reason.clone(),
                    arguments: None,
                    by: by.clone(),
                };
                (*id, answer)
            })
            .collect();
        // Named by its id, the conversation's transcript is the server's, not the request's.
        let pinned = turn.conversation.is_some() || turn.after.is_some();
        let mut before = if pinned && turn.history.is_empty() {
            self.visible_transcript(opened).await?
        } else {
            turn.history
        };
        before.extend(turn.input);
        Ok(ApiInput {
            input: TurnInput {
                text,
                results,
                images,
                face: None,
                key: None,
                approvals,
            },
            api: ApiTurn {
                key: key.clone(),
                thread: Thread {
                    key: key.id,
                    end_user: turn.end_user,
                    system: turn.system,
                    before,
                },
                tools: Arc::new(turn.tools),
                tool_use: turn.tool_use,
                format: turn.format,
                pause_on_approvals: turn.pause_on_approvals,
            },
        })
    }

    /// The user's messages and the answers of the conversation so far.
    async fn visible_transcript(
        &self,
        conversation: ConversationId,
    ) -> Result<Vec<ChatMessage>, RuntimeError> {
        Ok(self
            .store
            .messages(conversation)
            .await?
            .into_iter()
            .filter_map(|m| match m.kind {
                agency_core::MessageKind::Input => Some(ChatMessage::new(Role::User, m.text)),
                agency_core::MessageKind::Answer => Some(ChatMessage::new(Role::Assistant, m.text)),
                _ => None,
            })
            .collect())
    }

    /// One Chat Completions request of `key`, awaited whole.
    pub async fn chat_completion(
        self: &Arc<Self>,
        key: &ApiKey,
        agency: &Agency,
        turn: ChatTurn,
    ) -> Result<TurnOutcome, RuntimeError> {
        let request = crate::TurnRequest {
            caller: crate::Caller::Key(key.clone()),
            ask: crate::Ask::Chat {
                agency: Arc::new(agency.clone()),
                turn: Box::new(turn),
            },
            stream_text: false,
            progress: false,
            face: agency_core::Face::ChatCompletions,
        };
        self.begin(request).await?.outcome().await
    }
}

/// Whether the session's manager waits for exactly the results the request brings.
fn waits_for(session: Option<&Session>, manager: agency_core::AgentId, turn: &ChatTurn) -> bool {
    let Some((_, calls)) = session.and_then(|s| s.waiting_calls(manager, &[])) else {
        return false;
    };
    let results = turn.results();
    calls.len() == results.len()
        && calls
            .iter()
            .all(|c: &ToolCall| results.iter().any(|(id, _)| *id == c.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefill_follows_the_new_message() {
        let input = "a haiku\n\nabout frogs".to_string();
        assert_eq!(manager_input(input.clone(), None), "a haiku\n\nabout frogs");
        assert_eq!(
            manager_input(input, Some("Sure!")),
            "a haiku\n\nabout frogs\n\n(Begin your answer with exactly: Sure!)"
        );
    }

    #[test]
    fn hashes_tell_transcripts_apart() {
        let t = |pairs: &[(Role, &str)]| {
            pairs
                .iter()
                .map(|(r, s)| ChatMessage::new(*r, *s))
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
                ),
                false
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

    #[test]
    fn calls_and_results_are_part_of_a_transcript_and_plain_ones_hash_as_before() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            arguments: "{}".into(),
        };
        let with = |id: &str| {
            vec![
                ChatMessage::new(Role::User, "weather?"),
                ChatMessage::calls("", vec![call(id)]),
                ChatMessage::result(id, "get_weather", "sunny"),
            ]
        };
        assert_ne!(
            transcript_hash(None, None, &with("a")),
            transcript_hash(None, None, &with("b"))
        );
        assert_ne!(
            transcript_hash(None, None, &with("a")[..2]),
            transcript_hash(
                None,
                None,
                &[
                    ChatMessage::new(Role::User, "weather?"),
                    ChatMessage::new(Role::Assistant, "")
                ]
            ),
            "calls are not an empty answer"
        );
        let ends = answer_hashes(None, None, &with("a"));
        assert_eq!(ends.len(), 1);
        assert_eq!((ends[0].0, ends[0].2), (2, true));
        // A digest recorded before tools existed: the same bytes as then.
        let mut h = Sha256::new();
        for field in ["", "user", "hi"] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        assert_eq!(
            transcript_hash(None, None, &[ChatMessage::new(Role::User, "hi")]),
            crate::hex::encode(&h.finalize())
        );
    }
}
