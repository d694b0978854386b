//! The encoder: a task as stored → A2A's `Task`, and a turn's events → A2A's stream
//! (`StreamResponse`s: the task first, a status update per hop, the answer as an artifact, the
//! final status last), for either binding.

use agency_core::{Roster, TraceEntry};
use agency_runtime::tasks::{TaskRecord, TaskState, TaskUpdate};
use agency_runtime::{Event, TurnEvent};
use axum::response::sse;
use serde_json::{Map, Value, json};

use super::types::{
    Artifact, Message, Part, StreamResponse, Task, TaskArtifactUpdateEvent, TaskStatus,
    TaskStatusUpdateEvent,
};

/// The artifact that holds the answer.
const ANSWER: &str = "answer";
/// The longest hop text a status update carries.
const MAX_HOP_TEXT: usize = 2_000;

pub fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Working => "TASK_STATE_WORKING",
        TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
        TaskState::Completed => "TASK_STATE_COMPLETED",
        TaskState::Canceled => "TASK_STATE_CANCELED",
        TaskState::Failed => "TASK_STATE_FAILED",
    }
}

/// `TASK_STATE_…` read back; `Err` for a name A2A does not have, `Ok(None)` for one no task
/// here is ever in (submitted, rejected, auth required).
pub fn parse_state(name: &str) -> Result<Option<TaskState>, ()> {
    Ok(Some(match name {
        "TASK_STATE_WORKING" => TaskState::Working,
        "TASK_STATE_INPUT_REQUIRED" => TaskState::InputRequired,
        "TASK_STATE_COMPLETED" => TaskState::Completed,
        "TASK_STATE_CANCELED" => TaskState::Canceled,
        "TASK_STATE_FAILED" => TaskState::Failed,
        "TASK_STATE_SUBMITTED" | "TASK_STATE_REJECTED" | "TASK_STATE_AUTH_REQUIRED" => {
            return Ok(None);
        }
        _ => return Err(()),
    }))
}

fn agent_message(task: &TaskRecord, text: String, metadata: Option<Map<String, Value>>) -> Message {
    Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: Some(task.conversation.to_string()),
        task_id: Some(task.id.to_string()),
        role: "ROLE_AGENT".into(),
        parts: vec![Part::text(text)],
        metadata,
    }
}

/// The status of a task as stored: what a paused, failed or cancelled task says beside it.
fn status(task: &TaskRecord) -> TaskStatus {
    let said = match task.state {
        TaskState::InputRequired if !task.approvals.is_empty() => Some(asking(task)),
        TaskState::InputRequired if !task.answer.is_empty() => {
            Some(agent_message(task, task.answer.clone(), None))
        }
        TaskState::InputRequired => Some(agent_message(
            task,
            "The agency waits for your input.".to_string(),
            None,
        )),
        TaskState::Failed | TaskState::Canceled if !task.note.is_empty() => {
            Some(agent_message(task, task.note.clone(), None))
        }
        _ => None,
    };
    TaskStatus {
        state: state_name(task.state),
        message: said,
        timestamp: task
            .updated_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }
}

/// What a task paused on approvals asks its client: each call, in words and as a data part
/// (`{"approvals": [{"approval_id", "tool", "arguments"}]}`), and how to answer (see
/// `answers` in `mod.rs`).
fn asking(task: &TaskRecord) -> Message {
    let calls: Vec<String> = task
        .approvals
        .iter()
        .map(|a| format!("{} {} (approval_id {})", a.tool, a.arguments, a.approval_id))
        .collect();
    let text = format!(
        "Waiting for your approval: {}. Reply `approve` or `deny` (for every call), or with a data part {{\"approval_id\": …, \"approve\": true or false, \"reason\": …}} for each.",
        calls.join("; ")
    );
    let data = json!({
        "approvals": task.approvals.iter().map(|a| json!({
            "approval_id": a.approval_id,
            "tool": a.tool,
            "arguments": serde_json::from_str::<Value>(&a.arguments).unwrap_or_else(|_| Value::String(a.arguments.clone())),
        })).collect::<Vec<_>>()
    });
    let mut message = agent_message(task, text, None);
    message.parts.push(Part {
        data: Some(data),
        media_type: Some("application/json".into()),
        ..Part::default()
    });
    message
}

fn answer(task: &TaskRecord) -> Option<Artifact> {
    (task.state == TaskState::Completed && !task.answer.is_empty()).then(|| Artifact {
        artifact_id: ANSWER.into(),
        name: Some(ANSWER.into()),
        parts: vec![Part::text(task.answer.clone())],
    })
}

/// A task as A2A shows it: its history (the client's message, then the answer) cut to the
/// last `history_length` messages when given, its answer as an artifact when `artifacts`.
pub fn task(record: &TaskRecord, history_length: Option<i64>, artifacts: bool) -> Task {
    let mut history = vec![Message {
        message_id: record.message_id.clone(),
        context_id: Some(record.conversation.to_string()),
        task_id: Some(record.id.to_string()),
        role: "ROLE_USER".into(),
        parts: vec![Part::text(record.request.clone())],
        metadata: None,
    }];
    if record.state == TaskState::Completed && !record.answer.is_empty() {
        history.push(agent_message(record, record.answer.clone(), None));
    }
    if let Some(n) = history_length {
        let keep = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        let skip = history.len().saturating_sub(keep);
        history.drain(..skip);
    }
    Task {
        id: record.id.to_string(),
        context_id: record.conversation.to_string(),
        status: status(record),
        artifacts: if artifacts {
            answer(record).into_iter().collect()
        } else {
            Vec::new()
        },
        history,
        metadata: None,
    }
}

/// How a stream's responses go on the wire: bare (HTTP+JSON), or as JSON-RPC results.
#[derive(Clone)]
pub enum Framing {
    Rest,
    Rpc(Value),
}

impl Framing {
    pub fn event(&self, response: &StreamResponse) -> sse::Event {
        let body = match self {
            Framing::Rest => serde_json::to_string(response),
            Framing::Rpc(id) => serde_json::to_string(&json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": response,
            })),
        };
        sse::Event::default().data(body.unwrap_or_default())
    }
}

/// A running task's stream, as its turn's events come (SendStreamingMessage) or as a
/// follower hears it (SubscribeToTask).
pub struct TaskStream {
    pub task: TaskRecord,
    pub roster: Roster,
    pub framing: Framing,
    /// Pieces of the answer streamed so far.
    streamed: bool,
}

impl TaskStream {
    pub fn new(task: TaskRecord, roster: Roster, framing: Framing) -> Self {
        Self {
            task,
            roster,
            framing,
            streamed: false,
        }
    }

    /// The first event: the task as it stands.
    pub fn opening(&self) -> sse::Event {
        self.framing
            .event(&StreamResponse::Task(task(&self.task, None, false)))
    }

    fn update(&self, text: String, metadata: Option<Map<String, Value>>) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.id.to_string(),
            context_id: self.task.conversation.to_string(),
            status: TaskStatus {
                state: state_name(TaskState::Working),
                message: Some(agent_message(&self.task, text, None)),
                timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            },
            metadata,
        })
    }

    fn hop(&self, entry: &TraceEntry) -> StreamResponse {
        let from = entry.from_name(&self.roster).to_string();
        let to = entry.to_name(&self.roster).to_string();
        let mut text: String = entry.text.chars().take(MAX_HOP_TEXT).collect();
        if text.len() < entry.text.len() {
            text.push('…');
        }
        let mut metadata = Map::new();
        metadata.insert(
            "agency".into(),
            json!({ "hop": { "from": from, "to": to, "kind": format!("{:?}", entry.kind).to_lowercase() } }),
        );
        self.update(format!("{from} → {to}: {text}"), Some(metadata))
    }

    fn piece(&mut self, text: String, last: bool) -> StreamResponse {
        let append = self.streamed;
        self.streamed = true;
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task.id.to_string(),
            context_id: self.task.conversation.to_string(),
            artifact: Artifact {
                artifact_id: ANSWER.into(),
                name: Some(ANSWER.into()),
                parts: vec![Part::text(text)],
            },
            append,
            last_chunk: last,
        })
    }

    fn progress(&self, event: &Event) -> Option<StreamResponse> {
        match event {
            Event::Hop { entry, .. } => Some(self.hop(entry)),
            Event::ToolProgress { tool, progress, .. } => {
                let what = progress.message.clone().unwrap_or_default();
                Some(self.update(format!("{tool}: {what}").trim().to_string(), None))
            }
            _ => None,
        }
    }

    /// The end: the rest of the answer, then the final status.
    fn end(&mut self, ended: &TaskRecord, rest: Option<String>) -> Vec<StreamResponse> {
        self.task = ended.clone();
        let mut out = Vec::new();
        if ended.state == TaskState::Completed {
            let rest = rest.unwrap_or_else(|| ended.answer.clone());
            if !rest.is_empty() || self.streamed {
                out.push(self.piece(rest, true));
            }
        }
        out.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: ended.id.to_string(),
            context_id: ended.conversation.to_string(),
            status: status(ended),
            metadata: None,
        }));
        out
    }

    /// One of the turn's events (SendStreamingMessage's stream).
    pub fn turn_event(&mut self, event: TurnEvent) -> Vec<sse::Event> {
        let responses = match event {
            TurnEvent::Text(piece) => vec![self.piece(piece, false)],
            TurnEvent::Progress(e) => self.progress(&e).into_iter().collect(),
            TurnEvent::Finished { ref rest, .. } => {
                let mut ended = self.task.clone();
                ended.ended_by(&event);
                let rest = rest.clone();
                self.end(&ended, Some(rest))
            }
            TurnEvent::Failed(_) => {
                let mut ended = self.task.clone();
                ended.ended_by(&event);
                self.end(&ended, None)
            }
        };
        responses.iter().map(|r| self.framing.event(r)).collect()
    }

    /// What a follower heard (SubscribeToTask's stream).
    pub fn followed(&mut self, update: TaskUpdate) -> Vec<sse::Event> {
        let responses = match update {
            TaskUpdate::Progress(e) => self.progress(&e).into_iter().collect(),
            TaskUpdate::Ended(task) => self.end(&task, None),
        };
        responses.iter().map(|r| self.framing.event(r)).collect()
    }
}
