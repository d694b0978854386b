//! Live views across the processes on one store (PostgreSQL): what happens in this process is
//! told to the others as notices carrying ids, and what they tell becomes events of this
//! process's stream ([`crate::Runtime::subscribe`]), with the content read from the store. A
//! SQLite file has one process: nothing is told.
//!
//! Notices leave in batches (one `NOTIFY` round trip for all that queued meanwhile), from a
//! bounded queue: past it, notices are dropped rather than slow a turn. Streamed text (room
//! answers as their models write them) is not told; the stored answer is.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agency_core::room::RoomMessage;
use agency_core::{
    AgentId, ConversationId, MessageId, ParticipantId, RoomId, RoomMessageId, StopReason,
    ToolProgress, TraceEntry, TurnId, Usage,
};
use agency_store::Store;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use crate::Event;
use crate::rooms::RoomChange;

/// Notices waiting to leave; past this, new ones are dropped.
const QUEUE: usize = 4_096;
/// Notices per `NOTIFY` round trip.
const BATCH: usize = 256;
/// The longest text a notice carries (a tool's progress message, an error): a PostgreSQL
/// notice holds 8,000 bytes.
const MAX_TEXT: usize = 1_000;

/// One notice, as JSON.
#[derive(Serialize, Deserialize)]
struct Notice {
    /// The process that sent it: its own notices come back to it, and are skipped.
    p: Uuid,
    /// Its number in that process (PostgreSQL delivers identical notices of one transaction
    /// once).
    n: u64,
    #[serde(flatten)]
    body: Body,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
enum Body {
    TurnStarted {
        c: Uuid,
        t: Uuid,
        number: u32,
    },
    AgentStarted {
        c: Uuid,
        t: Uuid,
        a: u32,
    },
    ModelRetry {
        c: Uuid,
        t: Uuid,
        a: u32,
        attempt: u32,
        reason: String,
    },
    ToolProgress {
        c: Uuid,
        t: Uuid,
        a: u32,
        tool: String,
        call: String,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// Messages a write stored, and the usage of the model calls whose replies they come from.
    Hops {
        c: Uuid,
        t: Uuid,
        m: Vec<Uuid>,
        calls: Vec<Call>,
    },
    TurnFinished {
        c: Uuid,
        t: Uuid,
        stopped_by: String,
    },
    TurnFailed {
        c: Uuid,
        t: Uuid,
        error: String,
    },
    /// An approval asked or answered: read back from the store.
    Approval {
        c: Uuid,
        t: Uuid,
        id: Uuid,
    },
    RoomMessage {
        r: Uuid,
        m: Uuid,
    },
    RoomAgentStarted {
        r: Uuid,
        a: Uuid,
    },
    RoomToolCalled {
        r: Uuid,
        a: Uuid,
        tool: String,
    },
    RoomToolDone {
        r: Uuid,
        a: Uuid,
        tool: String,
        is_error: bool,
    },
    RoomIncluded {
        r: Uuid,
        m: Uuid,
        included: bool,
    },
    RoomParticipants {
        r: Uuid,
    },
}

/// A reply's model call: its usage and latency, for the hops made from it.
#[derive(Serialize, Deserialize)]
struct Call {
    reply: Uuid,
    input: u32,
    output: u32,
    latency_ms: Option<u32>,
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// What this process tells the others.
pub(crate) struct Relay {
    process: Uuid,
    sent: AtomicU64,
    queue: Option<mpsc::Sender<String>>,
}

impl Relay {
    /// Tells through `store` when it is shared (a task sends the notices), else nothing.
    pub(crate) fn new(store: &Arc<dyn Store>, process: Uuid) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let queue = runtime.filter(|_| store.shared()).map(|runtime| {
            let (tx, rx) = mpsc::channel(QUEUE);
            runtime.spawn(send(store.clone(), rx));
            tx
        });
        Self {
            process,
            sent: AtomicU64::new(0),
            queue,
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.queue.is_some()
    }

    /// Tells the others of `event` (hops are told by [`Relay::hops`]).
    pub(crate) fn event(&self, event: &Event) {
        if let Some(body) = self.queue.as_ref().and_then(|_| Body::of(event)) {
            self.tell(body);
        }
    }

    /// Tells the others of messages a turn's write stored; `call_of(reply)` is the usage and
    /// latency of the model call that wrote a reply.
    pub(crate) fn hops(
        &self,
        conversation: ConversationId,
        turn: TurnId,
        messages: &[agency_core::Message],
        call_of: impl Fn(MessageId) -> Option<(Usage, Option<u32>)>,
    ) {
        if self.queue.is_none() || messages.is_empty() {
            return;
        }
        let mut calls: Vec<Call> = Vec::new();
        for m in messages {
            if let Some(reply) = m.linked
                && !calls.iter().any(|c| c.reply == reply.0)
                && let Some((usage, latency_ms)) = call_of(reply)
            {
                calls.push(Call {
                    reply: reply.0,
                    input: usage.prompt_tokens,
                    output: usage.completion_tokens,
                    latency_ms,
                });
            }
        }
        self.tell(Body::Hops {
            c: conversation.0,
            t: turn.0,
            m: messages.iter().map(|m| m.id.0).collect(),
            calls,
        });
    }

    fn tell(&self, body: Body) {
        let Some(queue) = &self.queue else { return };
        let notice = Notice {
            p: self.process,
            n: self.sent.fetch_add(1, Ordering::Relaxed),
            body,
        };
        if let Ok(json) = serde_json::to_string(&notice)
            && queue.try_send(json).is_err()
        {
            tracing::warn!("too many notices waiting for the database: one was dropped");
        }
    }
}

/// Turns the other processes' notices into events on `events`, until the store stops
/// listening; `me` is this process (its own notices come back, and are skipped). Content is
/// read from the store only when someone here listens.
pub(crate) async fn hear(
    notices: futures::stream::BoxStream<'static, String>,
    me: Uuid,
    store: Arc<dyn Store>,
    events: broadcast::Sender<Event>,
) {
    notices
        .for_each(|json| {
            let (store, events) = (store.clone(), events.clone());
            async move {
                let Ok(notice) = serde_json::from_str::<Notice>(&json) else {
                    tracing::warn!("an unreadable notice from another server was skipped");
                    return;
                };
                if notice.p == me || events.receiver_count() == 0 {
                    return;
                }
                match notice.body.events(&*store).await {
                    Ok(got) => {
                        for event in got {
                            let _ = events.send(event);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot read what another server told of"),
                }
            }
        })
        .await;
}

/// Sends the queued notices, as many as have queued in one round trip.
async fn send(store: Arc<dyn Store>, mut rx: mpsc::Receiver<String>) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        if let Err(e) = store.notify(&batch).await {
            tracing::warn!(error = %e, notices = batch.len(), "cannot tell other servers: live views there miss this");
        }
        batch.clear();
    }
}

impl Body {
    fn of(event: &Event) -> Option<Self> {
        Some(match event {
            Event::TurnStarted {
                conversation,
                turn,
                number,
            } => Body::TurnStarted {
                c: conversation.0,
                t: turn.0,
                number: *number,
            },
            Event::AgentStarted {
                conversation,
                turn,
                agent,
            } => Body::AgentStarted {
                c: conversation.0,
                t: turn.0,
                a: agent.get(),
            },
            Event::ModelRetry {
                conversation,
                turn,
                agent,
                attempt,
                reason,
            } => Body::ModelRetry {
                c: conversation.0,
                t: turn.0,
                a: agent.get(),
                attempt: *attempt,
                reason: clip(reason),
            },
            Event::ToolProgress {
                conversation,
                turn,
                agent,
                tool,
                call_id,
                progress,
            } => Body::ToolProgress {
                c: conversation.0,
                t: turn.0,
                a: agent.get(),
                tool: clip(tool),
                call: clip(call_id),
                progress: progress.progress,
                total: progress.total,
                message: progress.message.as_deref().map(clip),
            },
            Event::Hop { .. } => return None,
            Event::TurnFinished {
                conversation,
                turn,
                stopped_by,
            } => Body::TurnFinished {
                c: conversation.0,
                t: turn.0,
                stopped_by: stopped_by.as_str().to_string(),
            },
            Event::TurnFailed {
                conversation,
                turn,
                error,
            } => Body::TurnFailed {
                c: conversation.0,
                t: turn.0,
                error: clip(error),
            },
            Event::Approval {
                conversation,
                turn,
                approval,
            } => Body::Approval {
                c: conversation.0,
                t: turn.0,
                id: approval.id.0,
            },
            Event::Room { room, change } => return Self::of_room(room.0, change),
        })
    }

    /// A room's change, as told to other servers (a streamed delta is not).
    fn of_room(r: uuid::Uuid, change: &RoomChange) -> Option<Self> {
        Some(match change {
            RoomChange::Message(m) => Body::RoomMessage { r, m: m.id.0 },
            RoomChange::AgentStarted(a) => Body::RoomAgentStarted { r, a: a.0 },
            RoomChange::Delta { .. } => return None,
            RoomChange::ToolCalled { agent, tool } => Body::RoomToolCalled {
                r,
                a: agent.0,
                tool: clip(tool),
            },
            RoomChange::ToolDone {
                agent,
                tool,
                is_error,
            } => Body::RoomToolDone {
                r,
                a: agent.0,
                tool: clip(tool),
                is_error: *is_error,
            },
            RoomChange::Included { message, included } => Body::RoomIncluded {
                r,
                m: message.0,
                included: *included,
            },
            RoomChange::Participants => Body::RoomParticipants { r },
        })
    }

    /// A room's event that needs nothing read from the store (the others are read by
    /// [`Body::events`]).
    fn room_event(self) -> Option<Event> {
        let room = |r: Uuid, change: RoomChange| Event::Room {
            room: RoomId(r),
            change,
        };
        match self {
            Body::RoomAgentStarted { r, a } => {
                Some(room(r, RoomChange::AgentStarted(ParticipantId(a))))
            }
            Body::RoomToolCalled { r, a, tool } => Some(room(
                r,
                RoomChange::ToolCalled {
                    agent: ParticipantId(a),
                    tool,
                },
            )),
            Body::RoomToolDone {
                r,
                a,
                tool,
                is_error,
            } => Some(room(
                r,
                RoomChange::ToolDone {
                    agent: ParticipantId(a),
                    tool,
                    is_error,
                },
            )),
            Body::RoomIncluded { r, m, included } => Some(room(
                r,
                RoomChange::Included {
                    message: RoomMessageId(m),
                    included,
                },
            )),
            Body::RoomParticipants { r } => Some(room(r, RoomChange::Participants)),
            _ => None,
        }
    }

    /// The events it tells of, with what they show read from the store. Ids that do not
    /// parse (a notice from a newer program) tell nothing.
    async fn events(self, store: &dyn Store) -> agency_store::Result<Vec<Event>> {
        let agent = |a: u32| AgentId::new(a);
        let room = |r: Uuid, change: RoomChange| Event::Room {
            room: RoomId(r),
            change,
        };
        Ok(match self {
            Body::TurnStarted { c, t, number } => vec![Event::TurnStarted {
                conversation: ConversationId(c),
                turn: TurnId(t),
                number,
            }],
            Body::AgentStarted { c, t, a } => agent(a)
                .map(|agent| Event::AgentStarted {
                    conversation: ConversationId(c),
                    turn: TurnId(t),
                    agent,
                })
                .into_iter()
                .collect(),
            Body::ModelRetry {
                c,
                t,
                a,
                attempt,
                reason,
            } => agent(a)
                .map(|agent| Event::ModelRetry {
                    conversation: ConversationId(c),
                    turn: TurnId(t),
                    agent,
                    attempt,
                    reason,
                })
                .into_iter()
                .collect(),
            Body::ToolProgress {
                c,
                t,
                a,
                tool,
                call,
                progress,
                total,
                message,
            } => agent(a)
                .map(|agent| Event::ToolProgress {
                    conversation: ConversationId(c),
                    turn: TurnId(t),
                    agent,
                    tool,
                    call_id: call,
                    progress: ToolProgress {
                        progress,
                        total,
                        message,
                    },
                })
                .into_iter()
                .collect(),
            Body::Hops { c, t, m, calls } => hops(store, c, t, m, &calls).await?,
            Body::TurnFinished { c, t, stopped_by } => StopReason::parse(&stopped_by)
                .map(|stopped_by| Event::TurnFinished {
                    conversation: ConversationId(c),
                    turn: TurnId(t),
                    stopped_by,
                })
                .into_iter()
                .collect(),
            Body::TurnFailed { c, t, error } => vec![Event::TurnFailed {
                conversation: ConversationId(c),
                turn: TurnId(t),
                error,
            }],
            Body::Approval { c, t, id } => store
                .approval(agency_core::ApprovalId(id))
                .await?
                .map(|approval| Event::Approval {
                    conversation: ConversationId(c),
                    turn: TurnId(t),
                    approval: Box::new(approval),
                })
                .into_iter()
                .collect(),
            Body::RoomMessage { r, m } => store
                .room_message(RoomId(r), RoomMessageId(m))
                .await?
                .map(|m: RoomMessage| room(r, RoomChange::Message(m)))
                .into_iter()
                .collect(),
            body => body.room_event().into_iter().collect(),
        })
    }
}

/// The hops a notice names, read back from the store.
async fn hops(
    store: &dyn Store,
    c: Uuid,
    t: Uuid,
    m: Vec<Uuid>,
    calls: &[Call],
) -> agency_store::Result<Vec<Event>> {
    let (conversation, turn) = (ConversationId(c), TurnId(t));
    let ids: Vec<MessageId> = m.into_iter().map(MessageId).collect();
    let messages = store.messages_by_id(conversation, &ids).await?;
    let call_of = |reply: MessageId| {
        calls.iter().find(|c| c.reply == reply.0).map(|c| {
            (
                Usage {
                    prompt_tokens: c.input,
                    completion_tokens: c.output,
                },
                c.latency_ms,
            )
        })
    };
    Ok(messages
        .iter()
        .flat_map(|m| TraceEntry::of(m, call_of))
        .map(|entry| Event::Hop {
            conversation,
            turn,
            entry,
        })
        .collect())
}
