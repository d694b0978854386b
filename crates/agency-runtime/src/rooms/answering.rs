//! A person's message answered: the asked agents called in parallel, each answer or failure
//! stored and published as it arrives; Retry; what a crash left.

use std::sync::Arc;

use agency_core::room::{self, Author, Participant, Room, RoomMessage, Speaker};
use agency_core::tool::{self, ToolCall, ToolPart, ToolResult};
use agency_core::{ModelRef, ParticipantId, Role, RoomId, RoomMessageId};
use agency_providers::{ChatMessage, ChatRequest};
use chrono::Utc;
use tokio::task::JoinSet;

use super::{Posted, RoomChange, Rooms, Setting};

use crate::RuntimeError;
use crate::tools::Scope;

/// Most times a room agent's model may call tools before it must answer.
pub const MAX_TOOL_ROUNDS: usize = 8;
/// How often a serving process says it is alive ([`Runtime::keep_alive`]).
pub const ALIVE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a process on a shared store may go without saying so before the answers it was
/// giving in rooms count as lost.
pub const DEAD_AFTER: chrono::Duration = chrono::Duration::seconds(30);

impl Rooms<'_> {
    /// Stores the person's message, then has the agents it asks answer it, in parallel. A
    /// command (`/register`, ...) goes to the room's utility bot instead, and neither it nor
    /// the answer goes into anyone's context.
    pub async fn post(
        &self,
        owner: &str,
        room: RoomId,
        text: &str,
        reply_to: Option<RoomMessageId>,
    ) -> Result<Posted, RuntimeError> {
        let text = room::check_text(text).map_err(|e| RuntimeError::Invalid(e.to_string()))?;
        let room = self.owned(owner, room).await?;
        let participants = self.rt.store.participants(room.id).await?;
        let replied = match reply_to {
            None => None,
            Some(id) => Some(
                self.rt
                    .store
                    .room_messages(room.id)
                    .await?
                    .into_iter()
                    .find(|m| m.id == id)
                    .ok_or_else(|| {
                        RuntimeError::field("reply_to", format!("the room has no message {id}"))
                    })?,
            ),
        };
        let command = room::command(text);
        let message = self
            .rt
            .store
            .add_room_message(RoomMessage {
                id: RoomMessageId::new(),
                room: room.id,
                seq: 0,
                author: Author::Person,
                text: text.to_string(),
                included: command.is_none(),
                reply_to,
                tagged: room::mentioned(text, &participants),
                created_at: Utc::now(),
            })
            .await?;
        self.publish_room(room.id, RoomChange::Message(message.clone()));
        if let Some(command) = command {
            return self.utility(owner, &room, message, command).await;
        }
        let room::Responders {
            answering,
            disabled,
        } = room::responders(text, replied.as_ref(), &participants);
        // Agents it names that are disabled receive nothing: the room says so, in reply.
        let note = (!disabled.is_empty()).then(|| {
            let named: Vec<&Participant> = participants
                .iter()
                .filter(|p| disabled.contains(&p.id))
                .collect();
            room::replies::disabled(&named)
        });
        let mut answers = self
            .answer(&room, participants, &answering, &message)
            .await?;
        if let Some(text) = note {
            let said = self.utility_says(&room, &message, text).await?;
            answers.spawn(std::future::ready(said));
        }
        Ok(Posted {
            message,
            answering,
            answers,
            caller_key: None,
        })
    }

    /// Has one agent answer again (after a failure): the message its last failure answered,
    /// else the person's latest message.
    pub async fn retry(
        &self,
        owner: &str,
        room: RoomId,
        agent: ParticipantId,
    ) -> Result<Posted, RuntimeError> {
        let (room, _) = self.participant(owner, room, agent).await?;
        let messages = self.rt.store.room_messages(room.id).await?;
        let failed_on = messages
            .iter()
            .rev()
            .find(|m| matches!(&m.author, Author::Error { id, .. } if *id == agent))
            .and_then(|m| m.reply_to);
        let asking = messages
            .iter()
            .rev()
            .find(|m| match failed_on {
                Some(id) => m.id == id,
                None => m.author == Author::Person && m.included,
            })
            .cloned()
            .ok_or_else(|| RuntimeError::Invalid("there is no message to answer yet".into()))?;
        let participants = self.rt.store.participants(room.id).await?;
        let answers = self.answer(&room, participants, &[agent], &asking).await?;
        Ok(Posted {
            message: asking,
            answering: vec![agent],
            answers,
            caller_key: None,
        })
    }

    /// Starts `who`'s answers to `asking`, with the room as it stood then.
    async fn answer(
        &self,
        room: &Room,
        participants: Vec<Participant>,
        who: &[ParticipantId],
        asking: &RoomMessage,
    ) -> Result<JoinSet<RoomMessage>, RuntimeError> {
        let mut answers = JoinSet::new();
        if who.is_empty() {
            return Ok(answers);
        }
        let setting = Arc::new(self.setting(room).await?);
        let mut history = self.rt.store.room_messages(room.id).await?;
        history.retain(|m| m.seq <= asking.seq);
        let history = Arc::new(history);
        let answering: Vec<Participant> = who
            .iter()
            .filter_map(|id| participants.iter().find(|p| p.id == *id).cloned())
            .collect();
        // Recorded before any call starts: a crash from here on leaves its mark (see
        // `Rooms::recover`).
        let ids: Vec<ParticipantId> = answering.iter().map(|p| p.id).collect();
        self.rt
            .store
            .start_answers(room.id, asking.id, &ids, self.rt.process)
            .await?;
        let participants = Arc::new(participants);
        for agent in answering {
            let (rt, setting, history, participants, room, asking) = (
                self.rt.clone(),
                setting.clone(),
                history.clone(),
                participants.clone(),
                room.clone(),
                asking.clone(),
            );
            let span = crate::observe::room_answer_span(&room, &agent.name);
            answers.spawn(span.run(async move {
                let rt = rt.rooms();
                rt.publish_room(room.id, RoomChange::AgentStarted(agent.id));
                let (result, reply_to, tagged) = match &agent.speaker {
                    Speaker::Model(model) => {
                        let text = rt
                            .model_answer(&room, &agent, model, &participants, &history, &setting)
                            .await;
                        (text, None, Vec::new())
                    }
                    Speaker::Bot(bot) => {
                        let text = rt
                            .bot_answer(
                                &room,
                                (&agent, bot),
                                &asking,
                                &participants,
                                &history,
                                &setting.providers,
                            )
                            .await;
                        let tagged = room::reply_tags(&asking, &history, agent.id);
                        (text, Some(asking.id), tagged)
                    }
                };
                rt.store_answer(&room, &agent, asking.id, result, reply_to, tagged)
                    .await
            }));
        }
        Ok(answers)
    }

    /// A model agent's answer, its deltas published as they stream. An agent with tools may
    /// call them, [`MAX_TOOL_ROUNDS`] times at most: the calls of one reply run at once, their
    /// results go back to its model alone, and only its final text is the answer.
    async fn model_answer(
        &self,
        room: &Room,
        agent: &Participant,
        model: &ModelRef,
        participants: &[Participant],
        history: &[RoomMessage],
        setting: &Setting,
    ) -> Result<String, String> {
        let scope = setting.scope(room);
        let tools = if agent.tools.is_empty() {
            Vec::new()
        } else {
            self.rt.tools.granted(scope, &agent.tools).await
        };
        let mut messages: Vec<ChatMessage> = room::context(agent, participants, history)
            .into_iter()
            .map(|(role, text)| ChatMessage::new(role, text))
            .collect();
        let mut round = 0;
        loop {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let request = ChatRequest {
                messages: messages.clone(),
                // The last round is told of no tools: it answers with what it has.
                tools: if round < MAX_TOOL_ROUNDS {
                    tools.clone()
                } else {
                    Vec::new()
                },
                deltas: Some(tx),
                ..ChatRequest::default()
            };
            let observer = crate::observe::ModelCallObserver::start(
                &agency_telemetry::Span::current(),
                Some(crate::observe::Caller {
                    agency: "rooms".into(),
                    agent: agent.name.clone(),
                    agent_id: None,
                    model: model.clone(),
                    temperature: None,
                    max_tokens: None,
                }),
                || messages.iter().map(|m| (m.role.as_str(), m.text.as_str())),
                setting.providers.price(model),
            );
            let asking = crate::call::Asking::Chat(request);
            let call = crate::call::model(&setting.providers, model, &observer, asking);
            tokio::pin!(call);
            let (done, _) = loop {
                tokio::select! {
                    done = &mut call => break done,
                    Some(text) = rx.recv() => {
                        self.publish_room(room.id, RoomChange::Delta { agent: agent.id, text });
                    }
                }
            };
            let completion = done.map_err(|e| e.to_string())?;
            if completion.tool_calls.is_empty() || round == MAX_TOOL_ROUNDS {
                return Ok(completion.text);
            }
            let calls = tool::unique_ids(completion.tool_calls, round);
            let results = self.tool_round(room, agent, scope, &calls).await;
            messages.push(ChatMessage {
                images: Vec::new(),
                role: Role::Assistant,
                text: completion.text,
                tool: Some(ToolPart::Calls(calls.clone())),
            });
            for (call, (text, is_error)) in calls.into_iter().zip(results) {
                messages.push(ChatMessage {
                    images: Vec::new(),
                    role: Role::Tool,
                    text: tool::clip_result(text),
                    tool: Some(ToolPart::Result(ToolResult {
                        call_id: call.id,
                        name: call.name,
                        is_error,
                    })),
                });
            }
            round += 1;
        }
    }

    /// One round of an agent's tool calls, at once: each result's text and whether it is an
    /// error, in the calls' order.
    async fn tool_round(
        &self,
        room: &Room,
        agent: &Participant,
        scope: Scope<'_>,
        calls: &[ToolCall],
    ) -> Vec<(String, bool)> {
        futures::future::join_all(calls.iter().map(|call| async move {
            if !agent.tools.allows(&call.name) {
                return (agent.tools.refusal(&call.name), true);
            }
            self.publish_room(
                room.id,
                RoomChange::ToolCalled {
                    agent: agent.id,
                    tool: call.name.clone(),
                },
            );
            let parent = agency_telemetry::Span::current();
            let never = std::future::pending();
            let (output, _) =
                crate::call::tool(&self.rt.tools, scope, &parent, call, None, never).await;
            self.publish_room(
                room.id,
                RoomChange::ToolDone {
                    agent: agent.id,
                    tool: call.name.clone(),
                    is_error: output.is_error,
                },
            );
            (output.text, output.is_error)
        }))
        .await
    }

    /// Stores an agent's answer (or its failure, in its place) and publishes it.
    async fn store_answer(
        &self,
        room: &Room,
        agent: &Participant,
        asked: RoomMessageId,
        result: Result<String, String>,
        reply_to: Option<RoomMessageId>,
        tagged: Vec<ParticipantId>,
    ) -> RoomMessage {
        let author = |ok: bool| {
            let (id, name) = (agent.id, agent.name.clone());
            if ok {
                Author::Agent { id, name }
            } else {
                Author::Error { id, name }
            }
        };
        let ok = result.is_ok();
        let text = result.unwrap_or_else(|error| {
            tracing::warn!(room = %room.id, agent = %agent.name, %error, "a room agent failed");
            error
        });
        let message = RoomMessage {
            id: RoomMessageId::new(),
            room: room.id,
            seq: 0,
            author: author(ok),
            text,
            included: ok,
            reply_to,
            tagged: if ok { tagged } else { Vec::new() },
            created_at: Utc::now(),
        };
        let stored = match self.rt.store.add_room_answer(message.clone(), asked).await {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(room = %room.id, error = %e, "cannot store a room answer");
                RoomMessage {
                    author: author(false),
                    text: format!("the answer could not be stored: {e}"),
                    included: false,
                    ..message
                }
            }
        };
        self.publish_room(room.id, RoomChange::Message(stored.clone()));
        stored
    }

    /// Every answer a crash interrupted (recorded as started, never stored, by a process that
    /// is gone) becomes a failure in its agent's place, answering the message it was asked, so
    /// the person sees what happened and can Retry. Returns how many. On a shared store a
    /// process is gone once it has not said it is alive ([`Runtime::keep_alive`]) for
    /// [`DEAD_AFTER`]; on a store one process has, any other process is gone.
    pub async fn recover(&self) -> Result<usize, RuntimeError> {
        let now = chrono::Utc::now();
        let unseen_since = if self.rt.store.shared() {
            now - DEAD_AFTER
        } else {
            now
        };
        let interrupted = self
            .rt
            .store
            .interrupted_answers(self.rt.process, unseen_since)
            .await?;
        let mut recovered = 0;
        for (room_id, asked, agent) in interrupted {
            let Some(room) = self.rt.store.room(room_id).await? else {
                continue;
            };
            let participants = self.rt.store.participants(room_id).await?;
            let Some(agent) = participants.iter().find(|p| p.id == agent) else {
                continue;
            };
            let text = format!(
                "{} was answering when the server stopped; the answer was lost. Retry asks again.",
                agent.name
            );
            self.store_answer(&room, agent, asked, Err(text), Some(asked), Vec::new())
                .await;
            recovered += 1;
        }
        Ok(recovered)
    }
}
