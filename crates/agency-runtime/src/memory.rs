//! The memory cycle of spec 002: an agent observes, and its model rates how important each
//! observation is.
//!
//! Every step is one model call of the agent's own model through the agency's providers
//! ([`agency_providers::Model::complete_task`]); the built-in rules model answers them
//! deterministically, so the cycle runs offline.

use std::sync::Arc;

use agency_core::memory::{self, Memory, MemoryId, MemoryKind, MemoryTask};
use agency_core::{AgencyId, AgentId, ConversationId, Message, MessageId, MessageKind, protocol};
use agency_providers::{ModelError, ModelRequest};
use chrono::Utc;

use crate::{AgencyView, Runtime, RuntimeError};

/// The longest observation taken (spec 000's message limit is far less; this bounds a prompt).
const MAX_OBSERVATION: usize = 64 * 1024;

/// What an observation led to.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The observation as stored, with the importance the agent's model gave it.
    pub observation: Memory,
}

impl Runtime {
    /// `agent` of `agency` observes `content`: its model rates the observation (0 to 1; an
    /// answer without a number, or a failed call, counts as
    /// [`memory::FALLBACK_IMPORTANCE`]: the observation is kept either way) and it is stored.
    pub async fn observe(
        &self,
        agency: AgencyId,
        agent: AgentId,
        content: &str,
    ) -> Result<Observed, RuntimeError> {
        let content = content.trim();
        if content.is_empty() {
            return Err(RuntimeError::Invalid("the observation is empty".into()));
        }
        if content.len() > MAX_OBSERVATION {
            return Err(RuntimeError::Invalid(format!(
                "the observation is longer than {MAX_OBSERVATION} bytes"
            )));
        }
        let view = self.current_agency(agency).await?;
        if view.agency.agent(agent).is_none() {
            return Err(RuntimeError::Invalid(format!(
                "the agency has no agent #{}",
                agent.get()
            )));
        }
        let task = MemoryTask::Importance {
            observation: content.to_string(),
        };
        let importance = match self.ask(&view, agent, &task).await {
            Ok(answer) => memory::importance_or_fallback(&answer),
            Err(e) => {
                tracing::warn!(error = %e, "cannot rate an observation; keeping it at the fallback importance");
                memory::FALLBACK_IMPORTANCE
            }
        };
        let observation = Memory {
            id: MemoryId::new(),
            agency_id: agency,
            agent,
            kind: MemoryKind::Observation,
            content: content.to_string(),
            importance,
            sources: Vec::new(),
            created_at: Utc::now(),
        };
        self.store.save_memory(&observation).await?;
        Ok(Observed { observation })
    }

    /// A memory by id.
    pub async fn memory(&self, id: MemoryId) -> Result<Option<Memory>, RuntimeError> {
        Ok(self.store.memory(id).await?)
    }

    /// One memory task for `agent`'s model: its answer's text (unwrapped from the agency's
    /// reply format when the model used it).
    async fn ask(
        &self,
        view: &AgencyView,
        agent: AgentId,
        task: &MemoryTask,
    ) -> Result<String, RuntimeError> {
        let failed = |error: String| RuntimeError::Model {
            agent,
            name: view.roster.display(Some(agent)).to_string(),
            error,
        };
        let a = view
            .agency
            .agent(agent)
            .ok_or_else(|| failed("no such agent".into()))?;
        let model = view.providers.resolve(&a.model).ok_or_else(|| {
            failed(
                ModelError::UnknownModel {
                    provider: a.model.provider.clone(),
                    model: a.model.model.clone(),
                }
                .to_string(),
            )
        })?;
        // A context of its own: the task is not part of any conversation.
        let conversation = ConversationId::new();
        let now = Utc::now();
        let message = |seq, kind, text: String| Message {
            id: MessageId::new(),
            conversation_id: conversation,
            turn_id: None,
            seq,
            agent: Some(agent),
            kind,
            linked: None,
            from: None,
            to: Some(agent),
            text,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: now,
        };
        let request = ModelRequest {
            agency: view.agency.clone(),
            roster: view.roster.clone(),
            agent,
            context: Arc::new(vec![
                message(
                    0,
                    MessageKind::System,
                    memory::system_prompt(&view.agency, a),
                ),
                message(1, MessageKind::Input, task.prompt()),
            ]),
            deltas: None,
        };
        let done = model
            .complete_task(request, task)
            .await
            .map_err(|e| failed(e.to_string()))?;
        // A model held to the agency's reply format (OpenAI's structured output) wraps its
        // answer in it: take the text out.
        Ok(
            match protocol::parse_reply(view.agency.protocol, &done.text, agent, &view.roster) {
                Ok(envelopes) if !envelopes.is_empty() => envelopes
                    .into_iter()
                    .map(|e| e.text)
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => done.text,
            },
        )
    }
}
