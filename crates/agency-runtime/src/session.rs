//! A conversation held in memory between turns: every agent's context, loaded from the store
//! once, and what a new conversation or an API request's history brings before its first
//! write.

use std::collections::HashMap;
use std::sync::Arc;

use agency_core::tool::ToolResult;
use agency_core::{
    Agency, AgencyId, AgentId, ChatMessage, Conversation, ConversationId, Message, MessageId,
    MessageKind, Role, Roster, ToolCall, ToolPart, TurnId, prompt,
};
use agency_store::Store;
use chrono::Utc;

use crate::RuntimeError;

/// A conversation held in memory between turns: each agent's context, loaded once.
pub(crate) struct Session {
    pub(crate) conversation: ConversationId,
    pub(crate) agency_id: AgencyId,
    /// Whether it runs on the published versions (`Some`) or the draft (`None`).
    pub(crate) version: Option<u32>,
    pub(crate) contexts: HashMap<AgentId, Arc<Vec<Message>>>,
    pub(crate) next_seq: i64,
    pub(crate) turns: u32,
    /// A new conversation not written yet: its first write carries it.
    pub(crate) unsaved: Option<Conversation>,
    /// A client's system message for the manager's system prompt, until that is written.
    pub(crate) client_system: Option<String>,
    /// A client's history the server has not stored, for the manager's context: written with
    /// the next turn's first write.
    pub(crate) seed: Vec<ChatMessage>,
    /// Read from the store since its last turn here: that turn may have been cut short by a
    /// crash, and what it left undelivered is delivered first (`TurnEngine::recover`).
    pub(crate) from_store: bool,
}

impl Session {
    pub(crate) async fn load(
        store: &dyn Store,
        conversation: ConversationId,
    ) -> Result<Self, RuntimeError> {
        let c = store
            .conversation(conversation)
            .await?
            .ok_or(RuntimeError::ConversationNotFound(conversation))?;
        let messages = store.messages(conversation).await?;
        Ok(Self::of(&c, messages))
    }

    /// A written conversation with its messages (in `seq` order).
    pub(crate) fn of(c: &Conversation, messages: Vec<Message>) -> Self {
        let mut session = Self::empty(c);
        // Seeded history (no turn) is not a turn of its own; a resumed turn is still one.
        let turns: std::collections::HashSet<TurnId> =
            messages.iter().filter_map(|m| m.turn_id).collect();
        session.turns = u32::try_from(turns.len()).unwrap_or(u32::MAX);
        session.extend(messages);
        session.from_store = true;
        session
    }

    /// A new conversation `id` of `agency`, in memory only; `client_system` goes at the end
    /// of the manager's system prompt.
    pub(crate) fn fresh(
        id: ConversationId,
        agency: &Agency,
        client_system: Option<&str>,
    ) -> (Conversation, Self) {
        let conversation = Conversation {
            id,
            agency_id: agency.id,
            version: agency.version,
            created_at: Utc::now(),
        };
        let mut session = Self::empty(&conversation);
        session.unsaved = Some(conversation.clone());
        session.client_system = client_system
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        (conversation, session)
    }

    /// The `seq` its next message gets.
    pub(crate) fn next_seq(&self) -> i64 {
        self.next_seq
    }

    pub(crate) fn empty(c: &Conversation) -> Self {
        Self {
            conversation: c.id,
            agency_id: c.agency_id,
            version: c.version,
            contexts: HashMap::new(),
            next_seq: 0,
            turns: 0,
            unsaved: None,
            client_system: None,
            seed: Vec::new(),
            from_store: false,
        }
    }

    /// Every message of every context, in `seq` order.
    pub(crate) fn messages(&self) -> Vec<&Message> {
        let mut all: Vec<&Message> = self.contexts.values().flat_map(|c| c.iter()).collect();
        all.sort_unstable_by_key(|m| m.seq);
        all
    }

    /// Puts a client's history (user messages, answers, calls of the client's tools and their
    /// results, in order) into the manager's context with the next turn, as if its turns had
    /// happened: the user's messages, its replies answering them and the answers of the user's
    /// transcript, its replies calling tools and the results.
    pub(crate) fn seed(&mut self, history: Vec<ChatMessage>) {
        self.seed = history;
    }

    /// The seeded history as messages (see [`Session::seed`]), numbered after everything so
    /// far. Not in contexts until written.
    pub(crate) fn seeded(&mut self, agency: &Agency, roster: &Roster) -> Vec<Message> {
        let manager = agency.manager;
        let mut out: Vec<Message> = Vec::new();
        // The reply whose calls the next results answer.
        let mut calling: Option<(MessageId, Vec<ToolCall>)> = None;
        for said in std::mem::take(&mut self.seed) {
            let ChatMessage {
                role,
                text,
                tool,
                images,
            } = said;
            let mut message = |agent, kind, from, to, text, linked| {
                self.message(None, agent, kind, from, to, text, linked)
            };
            match (role, tool) {
                (Role::Assistant, Some(ToolPart::Calls(calls))) => {
                    let mut reply = message(
                        Some(manager),
                        MessageKind::Reply,
                        Some(manager),
                        None,
                        text,
                        None,
                    );
                    reply.tool = Some(ToolPart::Calls(calls.clone()));
                    calling = Some((reply.id, calls));
                    out.push(reply);
                }
                (Role::Tool, Some(ToolPart::Result(r))) => {
                    let linked = calling.as_ref().map(|(id, _)| *id);
                    let name = calling
                        .as_ref()
                        .and_then(|(_, calls)| calls.iter().find(|c| c.id == r.call_id))
                        .map_or(r.name.clone(), |c| c.name.clone());
                    let mut result = message(
                        Some(manager),
                        MessageKind::ToolResult,
                        None,
                        Some(manager),
                        text,
                        linked,
                    );
                    result.tool = Some(ToolPart::Result(ToolResult { name, ..r }));
                    out.push(result);
                }
                (Role::Assistant, _) => {
                    let framed = agency_core::protocol::format_reply(
                        agency.protocol,
                        &[agency_core::protocol::Envelope {
                            to: agency_core::Recipient::User,
                            text: text.clone(),
                        }],
                        roster,
                    );
                    let reply = message(
                        Some(manager),
                        MessageKind::Reply,
                        Some(manager),
                        None,
                        framed,
                        None,
                    );
                    let answer = message(
                        None,
                        MessageKind::Answer,
                        Some(manager),
                        None,
                        text,
                        Some(reply.id),
                    );
                    out.extend([reply, answer]);
                }
                (_, _) => {
                    let mut input = message(
                        Some(manager),
                        MessageKind::Input,
                        None,
                        Some(manager),
                        text,
                        None,
                    );
                    input.images = images;
                    out.push(input);
                }
            }
        }
        out
    }

    /// The conversation's next message (numbered, not written), of turn `turn`.
    #[allow(clippy::too_many_arguments)] // a message's fields, each named at its call
    pub(crate) fn message(
        &mut self,
        turn: Option<TurnId>,
        agent: Option<AgentId>,
        kind: MessageKind,
        from: Option<AgentId>,
        to: Option<AgentId>,
        text: String,
        linked: Option<MessageId>,
    ) -> Message {
        let seq = self.next_seq;
        self.next_seq += 1;
        Message {
            images: Vec::new(),
            id: MessageId::new(),
            conversation_id: self.conversation,
            turn_id: turn,
            seq,
            agent,
            kind,
            linked,
            from,
            to,
            text,
            tool: None,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: Utc::now(),
        }
    }

    /// Messages written (in `seq` order), into their agents' contexts.
    pub(crate) fn extend(&mut self, messages: Vec<Message>) {
        for m in messages {
            self.next_seq = self.next_seq.max(m.seq + 1);
            if let Some(agent) = m.agent {
                Arc::make_mut(self.contexts.entry(agent).or_default()).push(m);
            }
        }
    }

    /// System prompts for the agents without a context yet: every agent of a new
    /// conversation, and agents added to the agency since. Not in contexts until written.
    pub(crate) fn prompts(&mut self, agency: &Agency) -> Vec<Message> {
        let mut prompts = Vec::new();
        for agent in &agency.agents {
            if self.contexts.contains_key(&agent.id) {
                continue;
            }
            let mut text = prompt::system_prompt(agency, agent);
            if agent.id == agency.manager
                && let Some(extra) = self.client_system.take()
            {
                text = format!("{text}\n\n## From the client\n{extra}");
            }
            prompts.push(self.message(
                None,
                Some(agent.id),
                MessageKind::System,
                None,
                Some(agent.id),
                text,
                None,
            ));
        }
        prompts
    }

    /// The calls of the client's tools `manager` waits for: those of its last reply with calls
    /// (in its context, then in `unwritten`) that no result answers after it.
    pub(crate) fn waiting_calls(
        &self,
        manager: AgentId,
        unwritten: &[Message],
    ) -> Option<(MessageId, Vec<ToolCall>)> {
        let context = self
            .contexts
            .get(&manager)
            .map_or(&[][..], |c| c.as_slice());
        let all: Vec<&Message> = context
            .iter()
            .chain(unwritten.iter().filter(|m| m.agent == Some(manager)))
            .collect();
        let at = all
            .iter()
            .rposition(|m| m.kind == MessageKind::Reply && m.tool.is_some())?;
        let answered: Vec<&str> = all[at + 1..]
            .iter()
            .filter_map(|m| m.tool.as_ref().and_then(ToolPart::result))
            .map(|r| r.call_id.as_str())
            .collect();
        let calls: Vec<ToolCall> = all[at]
            .tool
            .as_ref()
            .map(ToolPart::calls)
            .unwrap_or_default()
            .iter()
            .filter(|c| !answered.contains(&c.id.as_str()))
            .cloned()
            .collect();
        (!calls.is_empty()).then(|| (all[at].id, calls))
    }

    /// The one agent of a conversation with that agent alone: the only context, not the
    /// manager's.
    pub(crate) fn solo(&self, manager: AgentId) -> Option<AgentId> {
        let mut agents = self.contexts.keys();
        match (agents.next(), agents.next()) {
            (Some(&only), None) if only != manager => Some(only),
            _ => None,
        }
    }

    /// Agents whose contexts end with something they have not answered.
    pub(crate) fn unanswered(&self) -> Vec<AgentId> {
        self.contexts
            .iter()
            .filter(|(_, c)| {
                // A reply whose calls have no results (a crash cut its tools short) is
                // unanswered too: its agent sees them as failed and goes on.
                c.last().is_some_and(|m| match m.kind {
                    MessageKind::System => false,
                    MessageKind::Reply => m.tool.as_ref().is_some_and(|t| !t.calls().is_empty()),
                    _ => true,
                })
            })
            .map(|(id, _)| *id)
            .collect()
    }
}

/// What starts a turn, or resumes a paused one: the user's message, and the results of the
/// client's tools the manager called (an API request's: call id and text).
pub(crate) struct TurnInput {
    pub text: String,
    pub results: Vec<(String, String)>,
    /// The images the user's message shows.
    pub images: Vec<String>,
    /// The face the request came by, kept with the turn's record.
    pub face: Option<agency_core::Face>,
    /// Answers to the approvals the conversation's paused turn waits for: they resume it.
    pub approvals: Vec<(agency_core::ApprovalId, agency_core::approval::Answer)>,
    /// The API key a message came with (MQTT), whose budgets its calls are paid from; an API
    /// request's key is its [`crate::api::ApiTurn`]'s.
    pub key: Option<agency_core::ApiKey>,
}

impl TurnInput {
    pub(crate) fn text(text: String) -> Self {
        Self {
            text,
            results: Vec::new(),
            images: Vec::new(),
            face: None,
            approvals: Vec::new(),
            key: None,
        }
    }
}
