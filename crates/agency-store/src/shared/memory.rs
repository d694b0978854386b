//! Agents' memories and plans: the SQL and the rows, converted to and from the domain
//! explicitly.

use agency_core::memory::{ChatOrigin, Memory, MemoryId, MemoryKind};
use agency_core::plan::{Action, Plan, PlanId, PlanStatus, Task, TaskId, TaskStatus};
use agency_core::{AgencyId, AgentId, ConversationId, TurnId};
use chrono::{DateTime, Utc};

use crate::{Result, StoreError};

pub(crate) const INSERT_MEMORY: &str = "INSERT INTO memories (id, agency_id, agent_id, kind, content, importance, created_at, conversation_id, turn_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
pub(crate) const INSERT_SOURCE: &str =
    "INSERT INTO memory_sources (memory_id, source_id, position) VALUES ($1, $2, $3)";
pub(crate) const MEMORY_BY_ID: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at, conversation_id, turn_id FROM memories WHERE id = $1";
pub(crate) const SOURCES_OF: &str =
    "SELECT source_id FROM memory_sources WHERE memory_id = $1 ORDER BY position";
/// The newest `$4` memories of an agent since `$3`, newest first.
pub(crate) const MEMORIES_SINCE: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at, conversation_id, turn_id FROM memories WHERE agency_id = $1 AND agent_id = $2 AND created_at > $3 ORDER BY created_at DESC, id DESC LIMIT $4";
/// The observations a conversation's chat messages led to, oldest first.
pub(crate) const MEMORIES_OF_CONVERSATION: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at, conversation_id, turn_id FROM memories WHERE conversation_id = $1 ORDER BY created_at, id";

/// Plans: the plan row is written whole (inserted, or updated in place); its tasks and their
/// actions are replaced.
pub(crate) const UPSERT_PLAN: &str = "INSERT INTO plans (id, agency_id, agent_id, reflection_id, status, active, pddl, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (id) DO UPDATE SET reflection_id = excluded.reflection_id, status = excluded.status, active = excluded.active, pddl = excluded.pddl, updated_at = excluded.updated_at";
pub(crate) const DELETE_PLAN_ACTIONS: &str =
    "DELETE FROM plan_actions WHERE task_id IN (SELECT id FROM plan_tasks WHERE plan_id = $1)";
pub(crate) const DELETE_PLAN_TASKS: &str = "DELETE FROM plan_tasks WHERE plan_id = $1";
pub(crate) const INSERT_PLAN_TASK: &str = "INSERT INTO plan_tasks (id, plan_id, position, description, status) VALUES ($1, $2, $3, $4, $5)";
pub(crate) const INSERT_PLAN_ACTION: &str =
    "INSERT INTO plan_actions (task_id, position, name, parameters) VALUES ($1, $2, $3, $4)";
pub(crate) const ACTIVE_PLAN: &str = "SELECT id, agency_id, agent_id, reflection_id, status, active, created_at, updated_at FROM plans WHERE agency_id = $1 AND agent_id = $2 AND active";
pub(crate) const PLAN_TASKS: &str =
    "SELECT id, description, status FROM plan_tasks WHERE plan_id = $1 ORDER BY position";
pub(crate) const PLAN_ACTIONS: &str = "SELECT a.task_id, a.name, a.parameters FROM plan_actions a JOIN plan_tasks t ON t.id = a.task_id WHERE t.plan_id = $1 ORDER BY t.position, a.position";

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct MemoryRow {
    pub id: uuid::Uuid,
    pub agency_id: uuid::Uuid,
    pub agent_id: i64,
    pub kind: String,
    pub content: String,
    pub importance: f64,
    pub created_at: DateTime<Utc>,
    pub conversation_id: Option<uuid::Uuid>,
    pub turn_id: Option<uuid::Uuid>,
}

impl MemoryRow {
    pub(crate) fn of(m: &Memory) -> Self {
        Self {
            id: m.id.0,
            agency_id: m.agency_id.0,
            agent_id: i64::from(m.agent.get()),
            kind: m.kind.as_str().to_string(),
            content: m.content.clone(),
            importance: m.importance,
            created_at: m.created_at,
            conversation_id: m.origin.map(|o| o.conversation.0),
            turn_id: m.origin.map(|o| o.turn.0),
        }
    }

    pub(crate) fn into_memory(self, sources: Vec<uuid::Uuid>) -> Result<Memory> {
        let agent = u32::try_from(self.agent_id)
            .ok()
            .and_then(AgentId::new)
            .ok_or_else(|| StoreError::Corrupt(format!("memory {}: agent id", self.id)))?;
        let kind = MemoryKind::parse(&self.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("memory {}: kind", self.id)))?;
        Ok(Memory {
            id: MemoryId(self.id),
            agency_id: AgencyId(self.agency_id),
            agent,
            kind,
            content: self.content,
            importance: self.importance,
            sources: sources.into_iter().map(MemoryId).collect(),
            origin: match (self.conversation_id, self.turn_id) {
                (Some(conversation), Some(turn)) => Some(ChatOrigin {
                    conversation: ConversationId(conversation),
                    turn: TurnId(turn),
                }),
                _ => None,
            },
            created_at: self.created_at,
        })
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct PlanRow {
    pub id: uuid::Uuid,
    pub agency_id: uuid::Uuid,
    pub agent_id: i64,
    pub reflection_id: Option<uuid::Uuid>,
    pub status: String,
    pub active: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct TaskRow {
    pub id: uuid::Uuid,
    pub description: String,
    pub status: String,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ActionRow {
    pub task_id: uuid::Uuid,
    pub name: String,
    pub parameters: String,
}

/// A plan's rows as written: the plan, its tasks `(id, position, description, status)` and
/// their actions `(task, position, name, parameters as JSON)`.
pub(crate) struct PlanRows {
    pub plan: PlanRow,
    pub pddl: String,
    pub tasks: Vec<(uuid::Uuid, i64, String, &'static str)>,
    pub actions: Vec<(uuid::Uuid, i64, String, String)>,
}

impl PlanRows {
    pub(crate) fn of(p: &Plan) -> Self {
        let mut actions = Vec::new();
        for t in &p.tasks {
            for (position, a) in (0i64..).zip(&t.actions) {
                actions.push((
                    t.id.0,
                    position,
                    a.name.clone(),
                    serde_json::to_string(&a.parameters).unwrap_or_else(|_| "[]".into()),
                ));
            }
        }
        Self {
            plan: PlanRow {
                id: p.id.0,
                agency_id: p.agency_id.0,
                agent_id: i64::from(p.agent.get()),
                reflection_id: p.reflection.map(|r| r.0),
                status: p.status.as_str().to_string(),
                active: p.active,
                created_at: p.created_at,
                updated_at: p.updated_at,
            },
            pddl: p.pddl(),
            tasks: (0i64..)
                .zip(&p.tasks)
                .map(|(position, t)| (t.id.0, position, t.description.clone(), t.status.as_str()))
                .collect(),
            actions,
        }
    }
}

pub(crate) fn plan_of(row: PlanRow, tasks: Vec<TaskRow>, actions: Vec<ActionRow>) -> Result<Plan> {
    let bad = |what: &str| StoreError::Corrupt(format!("plan {}: {what}", row.id));
    let agent = u32::try_from(row.agent_id)
        .ok()
        .and_then(AgentId::new)
        .ok_or_else(|| bad("agent id"))?;
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        let mut task_actions = Vec::new();
        for a in actions.iter().filter(|a| a.task_id == t.id) {
            let parameters: Vec<String> =
                serde_json::from_str(&a.parameters).map_err(|_| bad("action parameters"))?;
            task_actions.push(Action {
                name: a.name.clone(),
                parameters,
            });
        }
        out.push(Task {
            id: TaskId(t.id),
            description: t.description,
            status: TaskStatus::parse(&t.status).ok_or_else(|| bad("task status"))?,
            actions: task_actions,
        });
    }
    Ok(Plan {
        id: PlanId(row.id),
        agency_id: AgencyId(row.agency_id),
        agent,
        reflection: row.reflection_id.map(MemoryId),
        status: PlanStatus::parse(&row.status).ok_or_else(|| bad("status"))?,
        active: row.active,
        tasks: out,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}
