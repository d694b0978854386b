//! Reading conversations, each for the one who may: the owner of its agency (the management
//! API, the web UI) or its agency (an API key, MQTT, the CLI). Another's conversation looks as
//! if it did not exist.

use agency_core::{
    Agency, AgencyId, Conversation, ConversationId, Message, Roster, TraceEntry, TurnRecord,
    entry::Entry,
};

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
}

impl Runtime {
    /// `owner`'s conversation `id`, with its agency.
    pub async fn conversation(
        &self,
        owner: &str,
        id: ConversationId,
    ) -> Result<Owned, RuntimeError> {
        let missing = || RuntimeError::ConversationNotFound(id);
        let conversation = self.store.conversation(id).await?.ok_or_else(missing)?;
        let agency = self
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
    pub async fn conversation_of(
        &self,
        agency: AgencyId,
        id: ConversationId,
    ) -> Result<Conversation, RuntimeError> {
        self.store
            .conversation(id)
            .await?
            .filter(|c| c.agency_id == agency)
            .ok_or(RuntimeError::ConversationNotFound(id))
    }

    /// The conversations of `owner`'s agency (id or name), newest first.
    pub async fn conversations(
        &self,
        owner: &str,
        agency: &str,
    ) -> Result<Vec<Conversation>, RuntimeError> {
        let agency = self.agency(owner, agency).await?;
        Ok(self.store.list_conversations(agency.id).await?)
    }

    /// `owner`'s conversation with its turns: usage and how each ended.
    pub async fn conversation_turns(
        &self,
        owner: &str,
        id: ConversationId,
    ) -> Result<(Conversation, Vec<TurnRecord>), RuntimeError> {
        let c = self.conversation(owner, id).await?.conversation;
        let turns = self.store.turns(id).await?;
        Ok((c, turns))
    }

    /// Turn `number` of `owner`'s conversation, with its trace.
    pub async fn turn(
        &self,
        owner: &str,
        id: ConversationId,
        number: u32,
    ) -> Result<TurnDetail, RuntimeError> {
        let c = self.conversation(owner, id).await?;
        let turn = self
            .store
            .turns(id)
            .await?
            .into_iter()
            .find(|t| t.number == number)
            .ok_or_else(|| {
                RuntimeError::NotFound(format!("conversation {id} has no turn {number}"))
            })?;
        let messages = self.store.turn_messages(id, turn.id).await?;
        // Priced as the turn was: on the agency's draft, or its published version. The trace
        // is still shown when the agency's providers cannot be built now (a key removed
        // since): without costs, as unknown.
        let agent_costs = match self
            .current_agency(c.agency.id, c.conversation.version.is_some())
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
        Ok(TurnDetail {
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
        let c = self.conversation(owner, id).await?;
        Ok((self.store.messages(id).await?, c.agency.roster()))
    }

    /// The entries of `agency`'s conversation, one per turn, in order (spec 002's content
    /// query).
    pub async fn entries(
        &self,
        agency: AgencyId,
        id: ConversationId,
    ) -> Result<Vec<Entry>, RuntimeError> {
        self.conversation_of(agency, id).await?;
        let roster = match self.store.agency(agency).await? {
            Some(a) => a.roster(),
            None => Roster::default(),
        };
        let turns = self.store.turns(id).await?;
        let messages = self.store.messages(id).await?;
        Ok(agency_core::entry::entries(&turns, &messages, &roster))
    }
}
