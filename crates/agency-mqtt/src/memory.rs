//! Observations (`DATA/observation/{agentId}` and the team-wide `DATA/observation`): each is
//! stored as a memory of its agent, rated by the agent's model, and announced with its id on
//! `EVT/observation_result/{agentId}`; a reflection it triggers on
//! `EVT/reflection_result/{agentId}`; the plan that reflection makes or adjusts on
//! `EVT/plan_new/{agentId}` or `EVT/plan_update/{agentId}`, distributed to the team on
//! `CMD/plan_task` and `CMD/plan_action`.

use super::{Bridge, json, same_agent, unknown_agent};
use crate::{MqttError, topic, wire};
use agency_core::{Agency, Agent};
use agency_runtime::memory::{Observed, PlanChange};

impl Bridge {
    /// An observation for the agent the topic names, else the one the payload names, else
    /// (team-wide, no `agent_id`) for every agent of the team. Errors go to the agent's error
    /// topic; what was stored before an error stays stored.
    pub(super) async fn observation(
        &self,
        agency: &Agency,
        team: &str,
        topic_agent: Option<&str>,
        payload: &[u8],
    ) -> Result<(), MqttError> {
        let body: wire::ObservationIn = json(payload)?;
        let named = body
            .agent_id
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let agents: Vec<&Agent> = match (topic_agent, named) {
            (Some(agent), _) => {
                same_agent(named, agent)?;
                vec![
                    agency
                        .agent_by_handle(agent)
                        .ok_or_else(|| unknown_agent(team, agent))?,
                ]
            }
            (None, Some(agent)) => vec![
                agency
                    .agent_by_handle(agent)
                    .ok_or_else(|| unknown_agent(team, agent))?,
            ],
            (None, None) => agency.agents.iter().collect(),
        };
        let content = body
            .content
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| MqttError::InvalidPayload("`content` is missing or empty".into()))?;
        for agent in agents {
            let handle = agent.handle_or_name();
            match self
                .rt
                .memory()
                .observe(agency.id, agent.id, &content)
                .await
            {
                Ok(observed) => self.observed(team, handle, &observed).await,
                Err(e) => self.error(team, handle, &e.into()).await,
            }
        }
        Ok(())
    }

    /// What an observation of `agent` led to: `EVT/observation_result`, and the reflection and
    /// plan it triggered, if it did.
    pub(super) async fn observed(&self, team: &str, agent: &str, observed: &Observed) {
        let o = &observed.observation;
        self.publish(
            topic::observation_result(team, agent),
            &wire::ObservationResult {
                agent_id: agent.to_string(),
                importance: o.importance,
                observation_id: o.id.to_string(),
                timestamp: wire::time(o.created_at),
            },
        )
        .await;
        if let Some(r) = &observed.reflection {
            self.publish(
                topic::reflection_result(team, agent),
                &wire::ReflectionResult {
                    agent_id: agent.to_string(),
                    importance: r.importance,
                    reflection_id: r.id.to_string(),
                    timestamp: wire::time(r.created_at),
                },
            )
            .await;
        }
        if let Some(change) = &observed.plan {
            self.announce_plan(team, agent, change).await;
        }
    }

    /// `EVT/plan_new` or `EVT/plan_update`, then the plan distributed to the team on
    /// `CMD/plan_task` (its PDDL) and `CMD/plan_action` (its tasks).
    async fn announce_plan(&self, team: &str, agent: &str, change: &PlanChange) {
        let plan = &change.plan;
        let now = wire::time(plan.updated_at);
        let (event_topic, distribution) = if change.new {
            (topic::plan_new(team, agent), "new")
        } else {
            (topic::plan_update(team, agent), "adjusted")
        };
        self.publish(
            event_topic,
            &wire::PlanEvent {
                active: plan.active,
                agent_id: agent.to_string(),
                plan_id: plan.id.to_string(),
                status: plan.status.as_str().to_string(),
                timestamp: now.clone(),
            },
        )
        .await;
        self.publish(
            topic::plan_task(team),
            &wire::PlanTaskCmd {
                active: plan.active,
                pddl_actions: plan.pddl(),
                plan_id: plan.id.to_string(),
                source_agent_id: agent.to_string(),
                status: distribution.to_string(),
                timestamp: now.clone(),
            },
        )
        .await;
        self.publish(
            topic::plan_action(team),
            &wire::PlanActionCmd {
                plan_id: plan.id.to_string(),
                source_agent_id: agent.to_string(),
                status: distribution.to_string(),
                tasks: plan.tasks.iter().map(wire::PlanTask::from).collect(),
                timestamp: now,
            },
        )
        .await;
    }
}
