//! Content read by id, for clients of the MQTT protocol (spec 002): its events carry only ids,
//! and the content is fetched here with the agency's API key.

use agency_core::ConversationId;
use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::auth::Key;
use crate::{ApiError, AppState, wire};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/conversations/{id}/entries", get(entries))
        .route("/api/memories/{id}", get(memory))
        .route("/api/agents/{agent}/plan", get(plan))
}

/// `GET /api/conversations/{id}/entries`: one entry per turn, in order. A conversation of
/// another agency looks as if it did not exist.
async fn entries(
    State(s): State<AppState>,
    Key(key): Key,
    Path(id): Path<String>,
) -> Result<Json<Vec<Entry>>, ApiError> {
    let agency = key.agency_id;
    let not_found = || ApiError::NotFound(format!("no conversation `{id}`"));
    let cid: ConversationId = id.parse().map_err(|_| not_found())?;
    let entries =
        s.rt.conversations()
            .entries(agency, cid)
            .await
            .map_err(|e| match e {
                agency_runtime::RuntimeError::ConversationNotFound(_) => not_found(),
                other => other.into(),
            })?;
    // Observations name their agent by handle: the agency is read only when there are some.
    let definition = match entries.iter().any(|e| !e.observations.is_empty()) {
        true => Some(s.rt.agencies().draft(agency).await?),
        false => None,
    };
    Ok(Json(
        entries
            .iter()
            .map(|e| Entry::of(e, definition.as_deref()))
            .collect(),
    ))
}

/// One entry, fields in spec 002's order: reply, prompt, response, summary, user query,
/// timestamp; then its performance (token usage, response time, hops), the tools it used and
/// the observations its message led to.
#[derive(Serialize)]
struct Entry {
    id: String,
    turn: u32,
    reply: Option<String>,
    prompt: String,
    response: Option<String>,
    summary: String,
    user_query: String,
    timestamp: DateTime<Utc>,
    token_usage: wire::Usage,
    response_time_ms: Option<u64>,
    hops: u32,
    tools: Vec<ToolUse>,
    observations: Vec<MemoryOut>,
    stopped_by: Option<&'static str>,
    error: Option<String>,
}

/// A tool call of the turn: who called what with which arguments, the start of its result,
/// and how long it took.
#[derive(Serialize)]
struct ToolUse {
    agent: String,
    name: String,
    arguments: String,
    result: Option<String>,
    is_error: bool,
    latency_ms: Option<u32>,
}

impl Entry {
    fn of(e: &agency_core::entry::Entry, agency: Option<&agency_core::Agency>) -> Self {
        Self {
            id: e.turn.to_string(),
            turn: e.number,
            reply: e.reply.clone(),
            prompt: e.prompt.clone(),
            response: e.response.clone(),
            summary: e.summary.clone(),
            user_query: e.user_query.clone(),
            timestamp: e.timestamp,
            token_usage: wire::Usage::from(e.usage),
            response_time_ms: e.response_time_ms,
            hops: e.hops,
            tools: e
                .tools
                .iter()
                .map(|t| ToolUse {
                    agent: t.agent.clone(),
                    name: t.name.clone(),
                    arguments: t.arguments.clone(),
                    result: t.result.clone(),
                    is_error: t.is_error,
                    latency_ms: t.latency_ms,
                })
                .collect(),
            observations: e
                .observations
                .iter()
                .map(|m| MemoryOut::of(m, agency))
                .collect(),
            stopped_by: e.stopped_by.map(|s| s.as_str()),
            error: e.error.clone(),
        }
    }
}

/// `GET /api/memories/{id}`: an observation or a reflection (with the memories it was written
/// from). A memory of another agency looks as if it did not exist.
async fn memory(
    State(s): State<AppState>,
    Key(key): Key,
    Path(id): Path<String>,
) -> Result<Json<MemoryOut>, ApiError> {
    let agency = key.agency_id;
    let not_found = || ApiError::NotFound(format!("no memory `{id}`"));
    let mid: agency_core::memory::MemoryId = id.trim().parse().map_err(|_| not_found())?;
    let m =
        s.rt.memory()
            .get(agency, mid)
            .await?
            .ok_or_else(not_found)?;
    let a = s.rt.agencies().draft(agency).await?;
    Ok(Json(MemoryOut::of(&m, Some(&a))))
}

/// A memory as spec 002's `Memory` node: its id, kind, content, importance, time, and for a
/// reflection the ids of its sources.
#[derive(Serialize)]
struct MemoryOut {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    agent_id: String,
    content: String,
    importance: f64,
    timestamp: DateTime<Utc>,
    sources: Vec<String>,
}

impl MemoryOut {
    fn of(m: &agency_core::memory::Memory, agency: Option<&agency_core::Agency>) -> Self {
        Self {
            id: m.id.to_string(),
            kind: m.kind.as_str(),
            agent_id: agency.and_then(|a| a.agent(m.agent)).map_or_else(
                || m.agent.get().to_string(),
                |a| a.handle_or_name().to_string(),
            ),
            content: m.content.clone(),
            importance: m.importance,
            timestamp: m.created_at,
            sources: m.sources.iter().map(ToString::to_string).collect(),
        }
    }
}

/// `GET /api/agents/{agentHandle}/plan`: the agent's active plan (of the key's agency), with
/// its tasks not cancelled and their actions; 404 when it has none.
async fn plan(
    State(s): State<AppState>,
    Key(key): Key,
    Path(handle): Path<String>,
) -> Result<Json<PlanOut>, ApiError> {
    let agency = key.agency_id;
    let a = s.rt.agencies().draft(agency).await?;
    let agent = a
        .agent_by_handle(handle.trim())
        .ok_or_else(|| ApiError::NotFound(format!("no agent `{handle}`")))?;
    let plan =
        s.rt.memory()
            .active_plan(agency, agent.id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("agent `{handle}` has no active plan")))?;
    Ok(Json(PlanOut {
        plan_id: plan.id.to_string(),
        agent_id: agent.handle_or_name().to_string(),
        active: plan.active,
        status: plan.status.as_str(),
        reflection_id: plan.reflection.map(|r| r.to_string()),
        pddl_actions: plan.pddl(),
        created_at: plan.created_at,
        updated_at: plan.updated_at,
        tasks: plan
            .current_tasks()
            .map(|t| TaskOut {
                id: t.id.to_string(),
                description: t.description.clone(),
                status: t.status.as_str(),
                actions: t
                    .actions
                    .iter()
                    .map(|a| ActionOut {
                        name: a.name.clone(),
                        parameters: a.parameters.clone(),
                        pddl: a.pddl(),
                    })
                    .collect(),
            })
            .collect(),
    }))
}

/// Spec 002's plan query: the plan, its tasks (not cancelled) and their actions.
#[derive(Serialize)]
struct PlanOut {
    plan_id: String,
    agent_id: String,
    active: bool,
    status: &'static str,
    reflection_id: Option<String>,
    pddl_actions: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    tasks: Vec<TaskOut>,
}

#[derive(Serialize)]
struct TaskOut {
    id: String,
    description: String,
    status: &'static str,
    actions: Vec<ActionOut>,
}

#[derive(Serialize)]
struct ActionOut {
    name: String,
    parameters: Vec<String>,
    pddl: String,
}
