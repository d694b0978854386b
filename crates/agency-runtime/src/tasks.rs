//! A2A tasks (issue 34): a message an agency's key sent over A2A is a *task*, the turn it runs
//! in its conversation (the task's context). The face begins the turn through the one pipeline
//! ([`Runtime::begin`]) and hands it here: [`Tasks::run`] stores the task and drives the
//! turn to its end on a task of its own, writing its state as it goes, so that a task's state
//! survives a restart and any server answers for it ([`Tasks::get`], [`Tasks::list`]).
//! [`Tasks::follow`] joins a running task from any server (the events come through the
//! relay, the end from the store); [`Tasks::cancel`] stops it.
//!
//! Wire types stay at the edge: this module knows states, not A2A's JSON.

use std::sync::Arc;
use std::time::Duration;

use agency_core::{ApiKey, ConversationId, StopReason};
use agency_store::{StoredTask, TaskFilter};
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};
use tokio::sync::broadcast;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use uuid::Uuid;

use crate::{Event, RuntimeError, Turn, TurnEvent};

/// The most tasks one page of [`Tasks::list`] holds.
pub const MAX_PAGE: u32 = 100;
/// How often a follower reads the task from the store (the relay may drop notices, and the
/// turn's end is written after its last event).
const POLL: Duration = Duration::from_millis(500);
/// How long a follower waits for a task to end before its stream ends anyway (a server that
/// ran it may have died with it).
const FOLLOW_AT_MOST: Duration = Duration::from_secs(3600);
/// How long a cancel waits for the turn to end and its task to say so.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    Working,
    /// The turn paused on something the client must give (its next message resumes it).
    InputRequired,
    Completed,
    Canceled,
    Failed,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::InputRequired => "input_required",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "working" => TaskState::Working,
            "input_required" => TaskState::InputRequired,
            "completed" => TaskState::Completed,
            "canceled" => TaskState::Canceled,
            "failed" => TaskState::Failed,
            _ => return None,
        })
    }

    /// A final state: the task changes no more.
    pub fn ended(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Canceled | TaskState::Failed
        )
    }

    /// The state a turn that stopped so leaves its task in.
    pub fn from_stop(stopped_by: StopReason) -> Self {
        match stopped_by {
            StopReason::Cancelled => TaskState::Canceled,
            StopReason::ToolCalls | StopReason::Approval => TaskState::InputRequired,
            _ => TaskState::Completed,
        }
    }
}

/// A task as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    pub id: Uuid,
    pub conversation: ConversationId,
    pub state: TaskState,
    /// The conversation's turn it ran (its latest), once known.
    pub turn: Option<u32>,
    /// The client's message: its id and its text.
    pub message_id: String,
    pub request: String,
    /// The answer, once there is one.
    pub answer: String,
    /// What the state says beside it (why it failed, or was cancelled).
    pub note: String,
    /// The calls its turn paused on, waiting for a person's approval (input required: the
    /// client's next message answers them).
    pub approvals: Vec<AskedApproval>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A call a task's turn paused on, waiting for a person's approval: what the client is asked.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AskedApproval {
    pub approval_id: String,
    /// `server/tool`.
    pub tool: String,
    /// The call's arguments, as JSON text.
    pub arguments: String,
}

impl AskedApproval {
    fn of(a: &agency_core::Approval) -> Self {
        Self {
            approval_id: a.id.to_string(),
            tool: a.call.name.clone(),
            arguments: a.call.arguments.clone(),
        }
    }
}

impl TaskRecord {
    /// Whether `event` ends the task's turn; its end written here as the runtime stores it.
    pub fn ended_by(&mut self, event: &TurnEvent) -> bool {
        match event {
            TurnEvent::Finished { outcome, .. } => {
                self.state = TaskState::from_stop(outcome.stopped_by);
                self.turn = Some(outcome.number);
                self.answer = outcome.answer.clone();
                self.approvals = outcome.approvals.iter().map(AskedApproval::of).collect();
                if self.state == TaskState::Canceled {
                    self.note = "Cancelled by the client.".into();
                }
            }
            TurnEvent::Failed(e) => {
                self.state = TaskState::Failed;
                self.note = failure(e, self.conversation);
            }
            _ => return false,
        }
        self.updated_at = Utc::now();
        true
    }

    fn stored(&self, key: &ApiKey) -> StoredTask {
        StoredTask {
            id: self.id,
            agency: key.agency_id,
            conversation: self.conversation,
            state: self.state.as_str().to_string(),
            ended: self.state.ended(),
            turn: self.turn,
            message_id: self.message_id.clone(),
            request: self.request.clone(),
            answer: self.answer.clone(),
            // A paused task's note is the calls it waits on (the store keeps text).
            note: if self.approvals.is_empty() {
                self.note.clone()
            } else {
                serde_json::to_string(&self.approvals).unwrap_or_default()
            },
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    fn from_stored(t: StoredTask) -> Self {
        // A state this program does not know (written by a newer one) reads as failed.
        let state = TaskState::parse(&t.state).unwrap_or(TaskState::Failed);
        let approvals: Vec<AskedApproval> = match state {
            TaskState::InputRequired if t.note.starts_with('[') => {
                serde_json::from_str(&t.note).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        Self {
            id: t.id,
            conversation: t.conversation,
            state,
            turn: t.turn,
            message_id: t.message_id,
            request: t.request,
            answer: t.answer,
            note: if approvals.is_empty() {
                t.note
            } else {
                String::new()
            },
            approvals,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

/// Which of the agency's tasks to list.
#[derive(Clone, Debug, Default)]
pub struct TaskQuery {
    pub conversation: Option<ConversationId>,
    pub state: Option<TaskState>,
    pub offset: u32,
    /// At most [`MAX_PAGE`].
    pub limit: u32,
}

/// What a follower of a task hears.
#[derive(Debug)]
pub enum TaskUpdate {
    /// One of the conversation's events (a hop, an agent's model called, a tool's progress).
    Progress(Event),
    /// The task ended (or paused): its record as stored. Last.
    Ended(TaskRecord),
}

/// A2A tasks: a turn's task stored and driven to its end, read, listed, cancelled and followed from any server.
/// Reached through [`Runtime::tasks`](crate::Runtime::tasks).
pub struct Tasks<'a> {
    pub(crate) rt: &'a std::sync::Arc<crate::Runtime>,
}

impl Tasks<'_> {
    /// Stores a task for `turn` (begun by `key` through [`Runtime::begin`]), or carries on the
    /// paused task `resumes`, and drives the turn to its end on a task of its own: its state is
    /// written before its end is told. The turn's events go to the receiver while it is held;
    /// dropped, the turn runs on and is stored all the same.
    pub async fn run(
        &self,
        key: &ApiKey,
        resumes: Option<TaskRecord>,
        turn: Turn,
        message_id: String,
        request: String,
    ) -> Result<(TaskRecord, UnboundedReceiver<TurnEvent>), RuntimeError> {
        let now = Utc::now();
        let task = match resumes {
            Some(mut task) => {
                task.state = TaskState::Working;
                task.approvals.clear();
                task.updated_at = now;
                if !self.rt.store.update_task(&task.stored(key)).await? {
                    return Err(RuntimeError::Conflict(format!(
                        "task {} has ended",
                        task.id
                    )));
                }
                task
            }
            None => {
                self.abandon_waiting(key, turn.conversation(), now).await?;
                let task = TaskRecord {
                    id: Uuid::now_v7(),
                    conversation: turn.conversation(),
                    state: TaskState::Working,
                    turn: None,
                    message_id,
                    request,
                    answer: String::new(),
                    note: String::new(),
                    approvals: Vec::new(),
                    created_at: now,
                    updated_at: now,
                };
                self.rt.store.put_task(&task.stored(key)).await?;
                task
            }
        };
        let (tx, rx) = unbounded_channel();
        let rt = self.rt.clone();
        let (key, mut record) = (key.clone(), task.clone());
        tokio::spawn(async move {
            let events = turn.events();
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                if record.ended_by(&event)
                    && let Err(e) = rt.store.update_task(&record.stored(&key)).await
                {
                    tracing::warn!(task = %record.id, error = %e, "a task's end was not stored");
                }
                if let TurnEvent::Progress(Event::TurnStarted { number, .. }) = &event {
                    record.turn = Some(*number);
                }
                let _ = tx.send(event);
            }
        });
        Ok((task, rx))
    }

    /// A new message in a conversation ends the tasks in it that waited for the client's input:
    /// the new turn withdrew what they waited on, so they are cancelled, saying why.
    async fn abandon_waiting(
        &self,
        key: &ApiKey,
        conversation: ConversationId,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let filter = TaskFilter {
            conversation: Some(conversation),
            state: Some(TaskState::InputRequired.as_str().to_string()),
            offset: 0,
            limit: MAX_PAGE,
        };
        let (waiting, _) = self.rt.store.tasks(key.agency_id, &filter).await?;
        for stored in waiting {
            let mut task = TaskRecord::from_stored(stored);
            task.state = TaskState::Canceled;
            task.approvals.clear();
            task.note =
                "A new message in its context went on without the input this task asked for."
                    .into();
            task.updated_at = now;
            self.rt.store.update_task(&task.stored(key)).await?;
        }
        Ok(())
    }

    /// The key's agency's task of that id (another's is not found).
    pub async fn get(&self, key: &ApiKey, id: Uuid) -> Result<TaskRecord, RuntimeError> {
        self.rt
            .store
            .task(key.agency_id, id)
            .await?
            .map(TaskRecord::from_stored)
            .ok_or_else(|| RuntimeError::NotFound(format!("no task {id}")))
    }

    /// The key's agency's tasks as `query` says, newest first, and how many match in all.
    pub async fn list(
        &self,
        key: &ApiKey,
        query: &TaskQuery,
    ) -> Result<(Vec<TaskRecord>, u64), RuntimeError> {
        let filter = TaskFilter {
            conversation: query.conversation,
            state: query.state.map(|s| s.as_str().to_string()),
            offset: query.offset,
            limit: query.limit.clamp(1, MAX_PAGE),
        };
        let (tasks, total) = self.rt.store.tasks(key.agency_id, &filter).await?;
        Ok((
            tasks.into_iter().map(TaskRecord::from_stored).collect(),
            total,
        ))
    }

    /// Cancels a task that has not ended: its turn stops when it runs in this process (the
    /// task then says so); otherwise the task is marked cancelled at once, and a turn another
    /// server runs for it goes on without changing it. An ended task is a
    /// [`RuntimeError::Conflict`].
    pub async fn cancel(&self, key: &ApiKey, id: Uuid) -> Result<TaskRecord, RuntimeError> {
        let mut task = self.get(key, id).await?;
        if task.state.ended() {
            return Err(RuntimeError::Conflict(format!(
                "task {id} is {} and cannot be cancelled",
                task.state.as_str().replace('_', " ")
            )));
        }
        if task.state == TaskState::Working && self.rt.cancel(task.conversation) {
            let waited = tokio::time::Instant::now();
            while waited.elapsed() < CANCEL_WAIT {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let now = self.get(key, id).await?;
                if now.state.ended() {
                    return Ok(now);
                }
            }
        }
        task.state = TaskState::Canceled;
        task.note = "Cancelled by the client.".into();
        task.updated_at = Utc::now();
        if !self.rt.store.update_task(&task.stored(key)).await? {
            // It ended meanwhile: as it ended.
            return self.get(key, id).await;
        }
        Ok(task)
    }

    /// Joins a task that has not ended, from any server: the record as it stands, then its
    /// conversation's events as they happen, then [`TaskUpdate::Ended`] once the store says it
    /// ended (or paused). An ended task is a [`RuntimeError::Conflict`].
    pub async fn follow(
        &self,
        key: &ApiKey,
        id: Uuid,
    ) -> Result<(TaskRecord, impl Stream<Item = TaskUpdate> + Send + 'static), RuntimeError> {
        // Subscribed before the task is read: nothing after the read is missed.
        let events = self.rt.subscribe();
        let task = self.get(key, id).await?;
        if task.state.ended() {
            return Err(RuntimeError::Conflict(format!(
                "task {id} is {}: there is nothing to follow",
                task.state.as_str()
            )));
        }
        let follow = Follow {
            store: self.rt.store.clone(),
            key: key.clone(),
            id,
            conversation: task.conversation,
            events: Some(events),
            started: tokio::time::Instant::now(),
            seen: task.updated_at,
            done: false,
        };
        let stream =
            futures::stream::unfold(
                follow,
                |mut f| async move { f.next().await.map(|u| (u, f)) },
            );
        Ok((task, stream))
    }
}

/// Why a task failed, as its client may read it: what the client can act on, and otherwise
/// where the agency's owner finds the detail (not the provider's words).
pub fn failure(e: &RuntimeError, conversation: ConversationId) -> String {
    match e {
        RuntimeError::Invalid(m) | RuntimeError::Conflict(m) => m.clone(),
        _ => format!(
            "The agency could not answer; its owner finds the detail in conversation {conversation}."
        ),
    }
}

/// A follower of one task.
struct Follow {
    store: Arc<dyn agency_store::Store>,
    key: ApiKey,
    id: Uuid,
    conversation: ConversationId,
    events: Option<broadcast::Receiver<Event>>,
    started: tokio::time::Instant,
    /// When the task was last seen changed.
    seen: DateTime<Utc>,
    done: bool,
}

impl Follow {
    async fn next(&mut self) -> Option<TaskUpdate> {
        if self.done || self.started.elapsed() > FOLLOW_AT_MOST {
            return None;
        }
        let mut tick = tokio::time::interval(POLL);
        tick.reset();
        loop {
            tokio::select! {
                event = recv(&mut self.events) => match event {
                    Ok(event) if event.conversation() == Some(self.conversation) => {
                        let ends = matches!(
                            event,
                            Event::TurnFinished { .. } | Event::TurnFailed { .. }
                        );
                        if !ends {
                            return Some(TaskUpdate::Progress(event));
                        }
                        // The task's end is written just after: look for it now.
                        if let Some(ended) = self.ended(true).await {
                            return Some(ended);
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => self.events = None,
                },
                _ = tick.tick() => {
                    if let Some(ended) = self.ended(false).await {
                        return Some(ended);
                    }
                    if self.started.elapsed() > FOLLOW_AT_MOST {
                        return None;
                    }
                }
            }
        }
    }

    /// The task's end when the store has it; with `soon`, waited for a little.
    async fn ended(&mut self, soon: bool) -> Option<TaskUpdate> {
        let tries = if soon { 50 } else { 1 };
        for i in 0..tries {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let task = match self.store.task(self.key.agency_id, self.id).await {
                Ok(Some(t)) => TaskRecord::from_stored(t),
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    tracing::warn!(task = %self.id, error = %e, "a followed task could not be read");
                    continue;
                }
            };
            let changed = task.updated_at > self.seen;
            if task.state.ended() || (changed && task.state == TaskState::InputRequired) {
                self.done = true;
                return Some(TaskUpdate::Ended(task));
            }
        }
        None
    }
}

async fn recv(
    events: &mut Option<broadcast::Receiver<Event>>,
) -> Result<Event, broadcast::error::RecvError> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
