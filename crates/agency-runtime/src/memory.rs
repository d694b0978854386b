//! The memory cycle of spec 002: an agent observes, its model rates how important each
//! observation is, and once the decayed importance of what it observed since it last reflected
//! passes its threshold, its model writes insights from those observations: a reflection,
//! linked to them. A reflection may lead to a plan: the model proposes tasks with actions
//! (PDDL ground actions); the agent's active plan is made, or adjusted.
//!
//! Every step is one model call of the agent's own model through the agency's providers
//! ([`agency_providers::Model::complete_task`]); the built-in rules model answers them
//! deterministically, so the cycle runs offline.

use std::sync::Arc;

use agency_core::memory::{self, ChatOrigin, Memory, MemoryId, MemoryKind, MemoryTask};
use agency_core::plan::{self, Plan};
use agency_core::{AgencyId, AgentId, ConversationId, Message, MessageId, MessageKind, protocol};
use agency_providers::ModelRequest;
use chrono::{DateTime, Utc};

use crate::{AgencyView, Runtime, RuntimeError};

/// The longest observation taken (spec 000's message limit is far less; this bounds a prompt).
const MAX_OBSERVATION: usize = 64 * 1024;

/// Memories read to decide on a reflection: the newest (older ones have decayed anyway).
const RECENT: u32 = 200;
/// Observations a reflection is written from, at most (the newest).
const MAX_SOURCES: usize = 50;

/// What an observation led to.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The observation as stored, with the importance the agent's model gave it.
    pub observation: Memory,
    /// The reflection it triggered, if it did.
    pub reflection: Option<Memory>,
    /// The plan that reflection made or adjusted, if it called for action.
    pub plan: Option<PlanChange>,
}

/// A plan made (`new`) or adjusted by a reflection, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanChange {
    pub plan: Plan,
    pub new: bool,
}

/// Agents' memory: observations, reflections and plans (spec 005).
/// Reached through [`Runtime::memory`].
pub struct Memories<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Memories<'_> {
    /// `agent` of `agency` observes `content`: its model rates the observation (0 to 1; an
    /// answer without a number, or a failed call, counts as
    /// [`memory::FALLBACK_IMPORTANCE`]: the observation is kept either way) and it is stored.
    pub async fn observe(
        &self,
        agency: AgencyId,
        agent: AgentId,
        content: &str,
    ) -> Result<Observed, RuntimeError> {
        let view = self.rt.agencies().current(agency, true).await?;
        self.observe_in(&view, agent, content, None).await
    }

    /// `agent` of `agency` was sent `message` in a chat (turn `origin`): its model checks
    /// whether the message tells it something worth remembering ([`MemoryTask::Check`]) and,
    /// when it does, the agent observes that as [`Memories::observe`] would, the observation
    /// linked to the turn. `None` when there was nothing to observe, the agent does not observe
    /// its chats (`observe_chats`), or the check failed (the chat is not worse for it).
    pub async fn observe_chat(
        &self,
        agency: AgencyId,
        agent: AgentId,
        message: &str,
        origin: ChatOrigin,
    ) -> Result<Option<Observed>, RuntimeError> {
        let view = self.rt.agencies().current(agency, true).await?;
        if !view
            .agency
            .agent(agent)
            .is_some_and(|a| a.memory.observe_chats)
        {
            return Ok(None);
        }
        let message: String = message.trim().chars().take(MAX_OBSERVATION).collect();
        if message.is_empty() {
            return Ok(None);
        }
        let task = MemoryTask::Check { message };
        let observation = match self.ask(&view, agent, &task).await {
            Ok(answer) => memory::observation_in(&answer),
            Err(e) => {
                tracing::warn!(error = %e, "cannot check a chat message for an observation");
                None
            }
        };
        match observation {
            Some(o) => Ok(Some(self.observe_in(&view, agent, &o, Some(origin)).await?)),
            None => Ok(None),
        }
    }

    async fn observe_in(
        &self,
        view: &AgencyView,
        agent: AgentId,
        content: &str,
        origin: Option<ChatOrigin>,
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
        if view.agency.agent(agent).is_none() {
            return Err(RuntimeError::Invalid(format!(
                "the agency has no agent #{}",
                agent.get()
            )));
        }
        let task = MemoryTask::Importance {
            observation: content.to_string(),
        };
        let importance = match self.ask(view, agent, &task).await {
            Ok(answer) => memory::importance_or_fallback(&answer),
            Err(e) => {
                tracing::warn!(error = %e, "cannot rate an observation; keeping it at the fallback importance");
                memory::FALLBACK_IMPORTANCE
            }
        };
        let observation = Memory {
            id: MemoryId::new(),
            agency_id: view.agency.id,
            agent,
            kind: MemoryKind::Observation,
            content: content.to_string(),
            importance,
            sources: Vec::new(),
            origin,
            created_at: Utc::now(),
        };
        self.rt.store.save_memory(&observation).await?;
        let reflection = self.reflect_if_due(view, agent).await?;
        let plan = match &reflection {
            Some((r, sources)) => self.plan(view, agent, r, sources).await?,
            None => None,
        };
        Ok(Observed {
            observation,
            reflection: reflection.map(|(r, _)| r),
            plan,
        })
    }

    /// Reflects when the decayed importance of the observations since the agent's last
    /// reflection passes its threshold. A failed model call writes no reflection: the
    /// observations stay unreflected, so the next observation tries again.
    async fn reflect_if_due(
        &self,
        view: &AgencyView,
        agent: AgentId,
    ) -> Result<Option<(Memory, Vec<Memory>)>, RuntimeError> {
        let Some(a) = view.agency.agent(agent) else {
            return Ok(None);
        };
        let policy = a.memory.policy();
        let recent = self
            .rt
            .store
            .memories_since(view.agency.id, agent, DateTime::UNIX_EPOCH, RECENT)
            .await?;
        // Newest first: the observations up to the last reflection.
        let pending: Vec<Memory> = recent
            .into_iter()
            .take_while(|m| m.kind == MemoryKind::Observation)
            .collect();
        if !policy.should_reflect(&pending, Utc::now()) {
            return Ok(None);
        }
        let mut sources: Vec<Memory> = pending.into_iter().take(MAX_SOURCES).collect();
        sources.reverse();
        let task = MemoryTask::Reflect {
            memories: sources
                .iter()
                .map(|m| (m.importance, m.content.clone()))
                .collect(),
        };
        let insights = match self.ask(view, agent, &task).await {
            Ok(text) if !text.trim().is_empty() => text.trim().to_string(),
            Ok(_) => {
                tracing::warn!(
                    agent = agent.get(),
                    "the model wrote an empty reflection; not stored"
                );
                return Ok(None);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot reflect now; the next observation tries again");
                return Ok(None);
            }
        };
        let reflection = Memory {
            id: MemoryId::new(),
            agency_id: view.agency.id,
            agent,
            kind: MemoryKind::Reflection,
            content: insights,
            // As important as the most important thing it was written from.
            importance: sources.iter().map(|m| m.importance).fold(0.0, f64::max),
            sources: sources.iter().map(|m| m.id).collect(),
            origin: None,
            created_at: Utc::now(),
        };
        self.rt.store.save_memory(&reflection).await?;
        Ok(Some((reflection, sources)))
    }

    /// Asks the agent's model whether the reflection calls for action; if it proposes tasks,
    /// the agent's active plan is adjusted with them, or a new one made. An answer that is not
    /// a plan, or a failed call, changes nothing.
    async fn plan(
        &self,
        view: &AgencyView,
        agent: AgentId,
        reflection: &Memory,
        sources: &[Memory],
    ) -> Result<Option<PlanChange>, RuntimeError> {
        let task = MemoryTask::Plan {
            reflection: reflection.content.clone(),
            memories: sources
                .iter()
                .map(|m| (m.importance, m.content.clone()))
                .collect(),
        };
        let tasks = match self.ask(view, agent, &task).await {
            Ok(answer) => match plan::parse_tasks(&answer) {
                Ok(tasks) => tasks,
                Err(e) => {
                    tracing::warn!(error = %e, agent = agent.get(), "the model's plan could not be read; no plan");
                    return Ok(None);
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot plan now");
                return Ok(None);
            }
        };
        if tasks.is_empty() {
            return Ok(None);
        }
        let now = Utc::now();
        let change = match self.rt.store.active_plan(view.agency.id, agent).await? {
            Some(mut plan) => {
                plan.adjust(reflection.id, tasks, now);
                PlanChange { plan, new: false }
            }
            None => PlanChange {
                plan: Plan::new(view.agency.id, agent, reflection.id, tasks, now),
                new: true,
            },
        };
        self.rt.store.save_plan(&change.plan).await?;
        Ok(Some(change))
    }

    /// The agent's active plan.
    pub async fn active_plan(
        &self,
        agency: AgencyId,
        agent: AgentId,
    ) -> Result<Option<Plan>, RuntimeError> {
        Ok(self.rt.store.active_plan(agency, agent).await?)
    }

    /// `agency`'s memory `id`; another agency's is `None`, as if it did not exist.
    pub async fn get(
        &self,
        agency: AgencyId,
        id: MemoryId,
    ) -> Result<Option<Memory>, RuntimeError> {
        Ok(self
            .rt
            .store
            .memory(id)
            .await?
            .filter(|m| m.agency_id == agency))
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
        // A context of its own: the task is not part of any conversation.
        let conversation = ConversationId::new();
        let now = Utc::now();
        let message = |seq, kind, text: String| Message {
            images: Vec::new(),
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
            tool: None,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: now,
        };
        let request = ModelRequest {
            answer_schema: None,
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
            tools: Arc::default(),
            tool_use: Default::default(),
            deltas: None,
            on_retry: None,
        };
        let span = crate::observe::memory_span(&view.agency, &a.name, task);
        let observer = crate::observe::ModelCallObserver::agent(
            &span,
            &view.agency,
            agent,
            &request.context,
            view.providers.price(&a.model),
        );
        let asking = crate::call::Asking::Task(request, task);
        let (done, _) = span
            .run(crate::call::model(
                &view.providers,
                &a.model,
                &observer,
                asking,
            ))
            .await;
        let done = done.map_err(|e| failed(e.to_string()))?;
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
