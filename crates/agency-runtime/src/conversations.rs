//! Reading conversations, each for the one who may: the owner of its agency (the management
//! API, the web UI) or its agency (an API key, MQTT, the CLI). Another's conversation looks as
//! if it did not exist.

use agency_core::{
    Agency, AgencyId, Conversation, ConversationId, Message, Roster, TraceEntry, TurnRecord,
    entry::Entry,
};

use agency_store::{ApiResponse, Write};

use crate::session::Session;
use crate::{Runtime, RuntimeError};

/// A conversation of the reader's, and the agency (its draft) whose roster names its agents.
pub struct Owned {
    pub conversation: Conversation,
    pub agency: Agency,
}

/// A finished turn and its trace: who said what to whom, in order.
pub struct TurnDetail {
    pub turn: TurnRecord,
    pub trace: Vec<TraceEntry>,
    /// What each agent's model calls cost, in the order they first answered (as the turn's
    /// live answer said), at the agency's prices; `None` for an agent whose model has none.
    pub agent_costs: Vec<(agency_core::AgentId, Option<agency_core::Cost>)>,
    pub roster: Roster,
    /// The turn's calls that waited for a person: who answered what, when, with which
    /// arguments, and whether the call went out (its audit, kept with the turn).
    pub approvals: Vec<agency_core::Approval>,
}

/// Conversations: started, and read by whoever may (the owner of their agency, or the agency itself); the Responses API's stored responses.
/// Reached through [`Runtime::conversations`].
pub struct Conversations<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Conversations<'_> {
    /// `owner`'s conversation `id`, with its agency.
    pub async fn get(&self, owner: &str, id: ConversationId) -> Result<Owned, RuntimeError> {
        let missing = || RuntimeError::ConversationNotFound(id);
        let conversation = self.rt.store.conversation(id).await?.ok_or_else(missing)?;
        let agency = self
            .rt
            .store
            .agency(conversation.agency_id)
            .await?
            .filter(|a| a.owner == owner)
            .ok_or_else(missing)?;
        Ok(Owned {
            conversation,
            agency,
        })
    }

    /// The conversation `id` of `agency`.
    pub async fn of(
        &self,
        agency: AgencyId,
        id: ConversationId,
    ) -> Result<Conversation, RuntimeError> {
        self.rt
            .store
            .conversation(id)
            .await?
            .filter(|c| c.agency_id == agency)
            .ok_or(RuntimeError::ConversationNotFound(id))
    }

    /// The conversations of `owner`'s agency (id or name), newest first.
    pub async fn list(&self, owner: &str, agency: &str) -> Result<Vec<Conversation>, RuntimeError> {
        let agency = self.rt.agencies().get(owner, agency).await?;
        Ok(self.rt.store.list_conversations(agency.id).await?)
    }

    /// `owner`'s conversation with its turns: usage and how each ended.
    pub async fn turns(
        &self,
        owner: &str,
        id: ConversationId,
    ) -> Result<(Conversation, Vec<TurnRecord>), RuntimeError> {
        let c = self.get(owner, id).await?.conversation;
        let turns = self.rt.store.turns(id).await?;
        Ok((c, turns))
    }

    /// Turn `number` of `owner`'s conversation, with its trace.
    pub async fn turn(
        &self,
        owner: &str,
        id: ConversationId,
        number: u32,
    ) -> Result<TurnDetail, RuntimeError> {
        let c = self.get(owner, id).await?;
        let turn = self
            .rt
            .store
            .turns(id)
            .await?
            .into_iter()
            .find(|t| t.number == number)
            .ok_or_else(|| {
                RuntimeError::NotFound(format!("conversation {id} has no turn {number}"))
            })?;
        let messages = self.rt.store.turn_messages(id, turn.id).await?;
        // Priced as the turn was: on the agency's draft, or its published version. The trace
        // is still shown when the agency's providers cannot be built now (a key removed
        // since): without costs, as unknown.
        let agent_costs = match self
            .rt
            .agencies()
            .current(c.agency.id, c.conversation.version.is_some())
            .await
        {
            Ok(view) => agency_core::price::costs_by_caller(
                agency_core::message::model_calls(&messages),
                |agent| {
                    view.agency
                        .agent(agent)
                        .and_then(|a| view.providers.price(&a.model))
                },
            ),
            Err(e) => {
                tracing::warn!(error = %e, "cannot price a stored turn's calls");
                Vec::new()
            }
        };
        let approvals = self.rt.store.turn_approvals(turn.id).await?;
        Ok(TurnDetail {
            approvals,
            turn,
            trace: agency_core::trace(&messages),
            agent_costs,
            roster: c.agency.roster(),
        })
    }

    /// Every message of every context of `owner`'s conversation, in order, with the roster
    /// that names their agents.
    pub async fn messages(
        &self,
        owner: &str,
        id: ConversationId,
    ) -> Result<(Vec<Message>, Roster), RuntimeError> {
        let c = self.get(owner, id).await?;
        Ok((self.rt.store.messages(id).await?, c.agency.roster()))
    }

    /// The entries of `agency`'s conversation, one per turn, in order (spec 002's content
    /// query).
    pub async fn entries(
        &self,
        agency: AgencyId,
        id: ConversationId,
    ) -> Result<Vec<Entry>, RuntimeError> {
        self.of(agency, id).await?;
        let Some(agency) = self.rt.store.agency(agency).await? else {
            return Err(RuntimeError::ConversationNotFound(id));
        };
        let turns = self.rt.store.turns(id).await?;
        let messages = self.rt.store.messages(id).await?;
        let observations = self.rt.store.memories_of_conversation(id).await?;
        Ok(agency_core::entry::entries(
            &turns,
            &messages,
            &observations,
            &agency.roster(),
            (agency.manager, agency.protocol),
        ))
    }

    /// Starts a conversation: each agent's context begins with its system prompt.
    pub async fn start(&self, agency: &Agency) -> Result<Conversation, RuntimeError> {
        self.write_new(ConversationId::new(), agency).await
    }

    /// Writes a new conversation with its system prompts, and keeps its session.
    async fn write_new(
        &self,
        id: ConversationId,
        agency: &Agency,
    ) -> Result<Conversation, RuntimeError> {
        let (conversation, mut session) = Session::fresh(id, agency, None);
        let prompts = session.prompts(agency);
        let written = self
            .rt
            .store
            .write(Write {
                conversation: session.unsaved.take(),
                messages: prompts,
                ..Write::default()
            })
            .await?;
        session.extend(written.messages);
        self.keep_session(session);
        Ok(conversation)
    }

    /// Keeps a session just written in memory: no need to read it back on the first turn.
    fn keep_session(&self, session: Session) {
        if let Ok(mut slot) = self.rt.session_slot(session.conversation).try_lock_owned()
            && slot.is_none()
        {
            *slot = Some(session);
        }
    }

    /// Starts a conversation with the id a client chose (MQTT's `conversation_id`). With
    /// `entry` an agent other than the manager, it is a conversation with that agent alone:
    /// only it has a context, and it answers the user itself. An id already taken is a
    /// [`RuntimeError::Conflict`].
    pub async fn start_as(
        &self,
        agency: &Agency,
        id: ConversationId,
        entry: Option<agency_core::AgentId>,
    ) -> Result<Conversation, RuntimeError> {
        let taken = || RuntimeError::Conflict(format!("conversation {id} already exists"));
        if self.rt.store.conversation(id).await?.is_some() {
            return Err(taken());
        }
        let solo = match entry.filter(|a| *a != agency.manager) {
            Some(agent) => Some(agency.solo(agent).ok_or_else(|| {
                RuntimeError::Invalid(format!("agency `{}` has no agent {agent}", agency.name))
            })?),
            None => None,
        };
        self.write_new(id, solo.as_ref().unwrap_or(agency)).await
    }

    /// Keeps a Responses API response (its id new).
    pub async fn save_response(&self, response: &ApiResponse) -> Result<(), RuntimeError> {
        Ok(self.rt.store.put_api_response(response).await?)
    }

    /// The agency's stored response of that id.
    pub async fn response(
        &self,
        agency: agency_core::AgencyId,
        id: &str,
    ) -> Result<Option<ApiResponse>, RuntimeError> {
        Ok(self.rt.store.api_response(agency, id).await?)
    }

    /// Forgets a stored response (its conversation stays); false when there was none.
    pub async fn delete_response(
        &self,
        agency: agency_core::AgencyId,
        id: &str,
    ) -> Result<bool, RuntimeError> {
        Ok(self.rt.store.delete_api_response(agency, id).await?)
    }
}
