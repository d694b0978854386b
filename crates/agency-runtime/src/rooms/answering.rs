//! A person's message answered: the asked agents called in parallel, each answer or failure
//! stored and published as it arrives; Retry; what a crash left.

use std::sync::Arc;

use agency_core::engine::{Step, TurnEngine};
use agency_core::room::{self, Author, Participant, Room, RoomMessage, Speaker};
use agency_core::tool::{self, ToolCall, ToolPart};
use agency_core::{MessageId, ModelRef, ParticipantId, Role, RoomId, RoomMessageId};
use agency_providers::{ChatMessage, ChatRequest};
use chrono::Utc;
use tokio::task::JoinSet;

use super::{Posted, RoomChange, Rooms, Setting};

use crate::RuntimeError;
use crate::tools::Scope;

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

    /// A model agent's answer: a turn of the engine, as a routed conversation's hops are, of
    /// the one-agent agency [`room::answering_agency`] over the room's context, held in
    /// memory. The engine decides what each tool call gets (a run, or a refusal), and tells
    /// the agent to answer once its hops ([`room::MAX_HOPS`]) run out or it repeats a call;
    /// that last call offers no tools. The calls of one reply run at once, their results go
    /// back to its model alone (in the calls' order), and only its final text is the answer.
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
        let agency = room::answering_agency(agent, model);
        let id = agency.manager;
        let mut engine = TurnEngine::new(&agency);
        let tools = if agent.tools.is_empty() {
            Vec::new()
        } else {
            self.rt.tools.granted(scope, &agent.tools).await
        };
        let mut context: Vec<ChatMessage> = room::context(agent, participants, history)
            .into_iter()
            .map(|(role, text)| ChatMessage::new(role, text))
            .collect();
        let mut steps = engine.start_on_context();
        let (mut replies, mut round, mut results) = (0usize, Vec::<ToolCall>::new(), Vec::new());
        loop {
            let (mut invoke, mut run, mut unasked) = (false, Vec::new(), Vec::new());
            for step in steps {
                match step {
                    Step::Deliver(d) => match d.tool {
                        Some(ToolPart::Result(r)) => results.push((r, d.text)),
                        _ => context.push(ChatMessage::new(Role::User, d.text)),
                    },
                    Step::Invoke(_) => invoke = true,
                    Step::CallTool { reply, call, .. } => run.push((reply, call)),
                    // The agency asks no approval: never here, and never run unasked.
                    Step::AskApproval { reply, call, .. } => unasked.push((reply, call)),
                    Step::Answer { text, .. } => return Ok(text),
                    Step::Fail { error, .. } => return Err(error),
                    Step::Pause { .. } | Step::Cancelled => {
                        return Err("the answer stopped before it was given".into());
                    }
                }
            }
            steps = if !run.is_empty() || !unasked.is_empty() {
                let outputs = self.tool_round(room, agent, scope, &run).await;
                let not_run = ("Not run: rooms ask no approval.".to_string(), true);
                let unasked = unasked.into_iter().map(|c| (c, not_run.clone()));
                let mut steps = Vec::new();
                for ((reply, call), (text, is_error)) in run.into_iter().zip(outputs).chain(unasked)
                {
                    let text = tool::clip_result(text);
                    steps.extend(engine.on_tool_result(id, reply, &call, text, is_error));
                }
                steps
            } else if invoke {
                // The round's results, in its calls' order, then the agent is asked again.
                results.sort_by_key(|(r, _)| round.iter().position(|c| c.id == r.call_id));
                context.extend(results.drain(..).map(|(r, text)| ChatMessage {
                    images: Vec::new(),
                    role: Role::Tool,
                    text,
                    tool: Some(ToolPart::Result(r)),
                }));
                let offered = if engine.offers_tools(id) {
                    tools.clone()
                } else {
                    Vec::new()
                };
                let reply = MessageId::new();
                match self
                    .ask(room, agent, model, &context, offered, setting)
                    .await
                {
                    Err(e) => engine.on_failure(id, &e),
                    Ok(c) if c.tool_calls.is_empty() => {
                        context.push(ChatMessage::new(Role::Assistant, c.text.clone()));
                        engine.on_reply(id, reply, &c.text)
                    }
                    Ok(c) => {
                        replies += 1;
                        round = tool::unique_ids(c.tool_calls, replies);
                        context.push(ChatMessage::calls(c.text.clone(), round.clone()));
                        engine.on_tool_calls(id, reply, &c.text, &round)
                    }
                }
            } else {
                return Err("the answer stopped before it was given".into());
            };
        }
    }

    /// One call of `agent`'s model with `context`, offered `tools`, paid from the room's
    /// agency's budget when it has one (refused, the call is not made: the budget's error);
    /// its deltas are published as they stream.
    async fn ask(
        &self,
        room: &Room,
        agent: &Participant,
        model: &ModelRef,
        context: &[ChatMessage],
        tools: Vec<agency_core::tool::Tool>,
        setting: &Setting,
    ) -> Result<agency_providers::Completion, String> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let request = ChatRequest {
            messages: context.to_vec(),
            tools,
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
            || context.iter().map(|m| (m.role.as_str(), m.text.as_str())),
            setting.providers.price(model),
        );
        let asking = crate::call::Asking::Chat(request);
        let providers = &setting.providers;
        let call = async {
            let Some(payer) = setting.payer.clone() else {
                return Ok(crate::call::model(providers, model, &observer, asking).await);
            };
            let paid = crate::spend::Paid {
                payer,
                price: providers.price(model),
                prompt_chars: context.iter().map(|m| m.text.len()).sum(),
                max_output: agency_core::spend::DEFAULT_MAX_OUTPUT,
            };
            let spending = &self.rt.spending;
            crate::call::paid(spending, paid, providers, model, &observer, asking).await
        };
        tokio::pin!(call);
        let done = loop {
            tokio::select! {
                done = &mut call => break done,
                Some(text) = rx.recv() => {
                    self.publish_room(room.id, RoomChange::Delta { agent: agent.id, text });
                }
            }
        };
        match done {
            Ok((done, _)) => done.map_err(|e| e.to_string()),
            Err(refused) => Err(refused.to_string()),
        }
    }

    /// One round of an agent's tool calls (each of its reply's), at once: each result's text
    /// and whether it is an error, in the calls' order.
    async fn tool_round(
        &self,
        room: &Room,
        agent: &Participant,
        scope: Scope<'_>,
        calls: &[(MessageId, ToolCall)],
    ) -> Vec<(String, bool)> {
        futures::future::join_all(calls.iter().map(|(_, call)| async move {
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
