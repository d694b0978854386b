//! Plans (spec 002): what an agent means to do after a reflection. A plan has tasks; a task has
//! actions, each a PDDL ground action (`(investigate pump-3)`), so the plan also reads as a
//! PDDL plan. An agent has at most one active plan; a later reflection that calls for action
//! adjusts it: its open tasks are cancelled and the new ones added.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::memory::MemoryId;
use crate::{AgencyId, AgentId};

/// Tasks a plan takes from one answer, at most.
pub const MAX_TASKS: usize = 20;
/// Actions a task takes, at most.
pub const MAX_ACTIONS: usize = 10;
/// Parameters an action takes, at most.
pub const MAX_PARAMETERS: usize = 8;
/// Longest task description kept, in characters.
pub const MAX_DESCRIPTION: usize = 1000;

macro_rules! prefixed_id {
    ($name:ident, $prefix:literal) => {
        /// Shown as
        #[doc = concat!("`", $prefix, "{uuid}`")]
        /// (spec 002's form); read with or without the prefix.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub Uuid);

        impl $name {
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s.strip_prefix($prefix).unwrap_or(s)).map(Self)
            }
        }
    };
}

prefixed_id!(PlanId, "plan_");
prefixed_id!(TaskId, "task_");

/// `Active` when made, `Updated` once a later reflection adjusted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlanStatus {
    Active,
    Updated,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Active => "Active",
            PlanStatus::Updated => "Updated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Active" => Some(PlanStatus::Active),
            "Updated" => Some(PlanStatus::Updated),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    Pending,
    Completed,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "Pending",
            TaskStatus::Completed => "Completed",
            TaskStatus::Cancelled => "Cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Pending" => Some(TaskStatus::Pending),
            "Completed" => Some(TaskStatus::Completed),
            "Cancelled" => Some(TaskStatus::Cancelled),
            _ => None,
        }
    }
}

/// A PDDL ground action: a name and its parameters, all PDDL symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub name: String,
    pub parameters: Vec<String>,
}

impl Action {
    /// `(name p1 p2)`.
    pub fn pddl(&self) -> String {
        let mut out = format!("({}", self.name);
        for p in &self.parameters {
            out.push(' ');
            out.push_str(p);
        }
        out.push(')');
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub id: TaskId,
    pub description: String,
    pub status: TaskStatus,
    pub actions: Vec<Action>,
}

/// A task as a model proposed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskDraft {
    pub description: String,
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub id: PlanId,
    pub agency_id: AgencyId,
    pub agent: AgentId,
    /// The reflection it came from (the latest one, once adjusted).
    pub reflection: Option<MemoryId>,
    pub status: PlanStatus,
    pub active: bool,
    /// Every task it had, cancelled ones included, in order.
    pub tasks: Vec<Task>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Plan {
    pub fn new(
        agency_id: AgencyId,
        agent: AgentId,
        reflection: MemoryId,
        tasks: Vec<TaskDraft>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id: PlanId::new(),
            agency_id,
            agent,
            reflection: Some(reflection),
            status: PlanStatus::Active,
            active: true,
            tasks: tasks.into_iter().map(Task::from).collect(),
            created_at: now,
            updated_at: now,
        }
    }

    /// A later reflection's tasks replace the open ones (those are cancelled).
    pub fn adjust(&mut self, reflection: MemoryId, tasks: Vec<TaskDraft>, now: DateTime<Utc>) {
        for t in &mut self.tasks {
            if t.status == TaskStatus::Pending {
                t.status = TaskStatus::Cancelled;
            }
        }
        self.tasks.extend(tasks.into_iter().map(Task::from));
        self.reflection = Some(reflection);
        self.status = PlanStatus::Updated;
        self.updated_at = now;
    }

    /// The tasks not cancelled, in order.
    pub fn current_tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks
            .iter()
            .filter(|t| t.status != TaskStatus::Cancelled)
    }

    /// The actions of the tasks not cancelled, as a PDDL plan: one ground action a line, each
    /// task's actions after a comment naming the task.
    pub fn pddl(&self) -> String {
        let mut out = String::new();
        for t in self.current_tasks() {
            out.push_str(&format!("; {}: {}\n", t.id, one_line(&t.description)));
            for a in &t.actions {
                out.push_str(&a.pddl());
                out.push('\n');
            }
        }
        out
    }
}

impl From<TaskDraft> for Task {
    fn from(d: TaskDraft) -> Self {
        Task {
            id: TaskId::new(),
            description: d.description,
            status: TaskStatus::Pending,
            actions: d.actions,
        }
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text as a PDDL symbol: lower case, letters, digits, `-` and `_`, starting with a letter
/// (`Pump 3!` → `pump-3`; `3rd` → `x-3rd`). `None` when nothing is left.
pub fn symbol(text: &str) -> Option<String> {
    let mut out = String::new();
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    match out.chars().next() {
        None => None,
        Some(c) if c.is_ascii_alphabetic() => Some(out),
        Some(_) => Some(format!("x-{out}")),
    }
}

/// Why a model's plan could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the answer holds no JSON object")]
    NotJson,
    #[error("the plan has no `tasks` list")]
    NoTasks,
}

/// The tasks of a model's plan answer: `{"tasks": [{"description", "actions": [{"name",
/// "parameters"}]}]}` (prose or code fences around it are skipped; an action may also be a
/// string, read as `name parameter...`). Names and parameters become PDDL symbols; a task
/// without a description or an action without a name is left out; limits apply
/// ([`MAX_TASKS`], ...). An empty list means no plan.
pub fn parse_tasks(answer: &str) -> Result<Vec<TaskDraft>, PlanError> {
    let start = answer.find('{').ok_or(PlanError::NotJson)?;
    let end = answer.rfind('}').ok_or(PlanError::NotJson)?;
    if end < start {
        return Err(PlanError::NotJson);
    }
    let value: serde_json::Value =
        serde_json::from_str(&answer[start..=end]).map_err(|_| PlanError::NotJson)?;
    let tasks = value
        .get("tasks")
        .and_then(|t| t.as_array())
        .ok_or(PlanError::NoTasks)?;
    Ok(tasks
        .iter()
        .filter_map(|t| {
            let description = t.get("description").and_then(|d| d.as_str())?.trim();
            if description.is_empty() {
                return None;
            }
            let actions = t
                .get("actions")
                .and_then(|a| a.as_array())
                .map(|a| a.iter().filter_map(action).take(MAX_ACTIONS).collect())
                .unwrap_or_default();
            Some(TaskDraft {
                description: description.chars().take(MAX_DESCRIPTION).collect(),
                actions,
            })
        })
        .take(MAX_TASKS)
        .collect())
}

fn action(v: &serde_json::Value) -> Option<Action> {
    let (name, parameters): (String, Vec<String>) = match v {
        serde_json::Value::String(s) => {
            let mut words = s.split_whitespace();
            let name = words.next()?.to_string();
            (name, words.map(str::to_string).collect())
        }
        serde_json::Value::Object(o) => {
            let name = o.get("name").and_then(|n| n.as_str())?.to_string();
            let parameters = o
                .get("parameters")
                .and_then(|p| p.as_array())
                .map(|p| {
                    p.iter()
                        .filter_map(|x| match x {
                            serde_json::Value::String(s) => Some(s.clone()),
                            serde_json::Value::Number(n) => Some(n.to_string()),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            (name, parameters)
        }
        _ => return None,
    };
    Some(Action {
        name: symbol(&name)?,
        parameters: parameters
            .iter()
            .filter_map(|p| symbol(p))
            .take(MAX_PARAMETERS)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drafts() -> Vec<TaskDraft> {
        parse_tasks(
            "Here is the plan:\n```json\n{\"tasks\": [{\"description\": \"Check pump 3\", \"actions\": [{\"name\": \"Inspect\", \"parameters\": [\"Pump 3\", 2]}, \"report pump-3 manager\"]}, {\"description\": \"\"}]}\n```",
        )
        .unwrap()
    }

    #[test]
    fn a_plan_answer_reads_into_pddl_symbols() {
        let d = drafts();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].description, "Check pump 3");
        assert_eq!(
            d[0].actions.iter().map(Action::pddl).collect::<Vec<_>>(),
            ["(inspect pump-3 x-2)", "(report pump-3 manager)"]
        );
        assert_eq!(parse_tasks(r#"{"tasks": []}"#), Ok(vec![]));
        assert_eq!(parse_tasks("no plan"), Err(PlanError::NotJson));
        assert_eq!(parse_tasks(r#"{"steps": []}"#), Err(PlanError::NoTasks));
        assert_eq!(symbol("  Pump 3!! "), Some("pump-3".into()));
        assert_eq!(symbol("?!"), None);
    }

    #[test]
    fn adjusting_cancels_open_tasks_and_keeps_the_id() {
        let now = Utc::now();
        let agent = AgentId::first_free(1, |_| false);
        let mut plan = Plan::new(AgencyId::new(), agent, MemoryId::new(), drafts(), now);
        assert_eq!(plan.status, PlanStatus::Active);
        let first = plan.tasks[0].id;
        assert!(
            plan.pddl()
                .contains(&format!("; {first}: Check pump 3\n(inspect pump-3 x-2)\n"))
        );
        let id = plan.id;
        plan.adjust(
            MemoryId::new(),
            vec![TaskDraft {
                description: "Replace pump 3".into(),
                actions: vec![],
            }],
            now,
        );
        assert_eq!(plan.id, id);
        assert_eq!(plan.status, PlanStatus::Updated);
        assert_eq!(plan.tasks[0].status, TaskStatus::Cancelled);
        assert_eq!(plan.current_tasks().count(), 1);
        assert!(!plan.pddl().contains("inspect"));
        assert_eq!(format!("{id}").parse::<PlanId>(), Ok(id));
        assert!(format!("{id}").starts_with("plan_"));
        assert_eq!(id.0.to_string().parse::<PlanId>(), Ok(id));
    }
}
