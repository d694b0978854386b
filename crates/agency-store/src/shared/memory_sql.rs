//! The SQL of the memory store, shared by both backends ($N placeholders work in both).

pub(crate) const INSERT_MEMORY: &str = "INSERT INTO memories (id, agency_id, agent_id, kind, content, importance, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
pub(crate) const INSERT_SOURCE: &str =
    "INSERT INTO memory_sources (memory_id, source_id, position) VALUES ($1, $2, $3)";
pub(crate) const MEMORY_BY_ID: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at FROM memories WHERE id = $1";
pub(crate) const SOURCES_OF: &str =
    "SELECT source_id FROM memory_sources WHERE memory_id = $1 ORDER BY position";
/// The newest `$4` memories of an agent since `$3`, newest first.
pub(crate) const MEMORIES_SINCE: &str = "SELECT id, agency_id, agent_id, kind, content, importance, created_at FROM memories WHERE agency_id = $1 AND agent_id = $2 AND created_at > $3 ORDER BY created_at DESC, id DESC LIMIT $4";

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
