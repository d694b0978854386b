//! The routed conversation engine: every decision a turn makes, with no IO.
//!
//! The runtime tells a [`TurnEngine`] what happened — the turn started, an agent replied, an
//! agent's model failed, the deadline passed — and carries out the [`Step`]s it returns, in
//! order: persist and deliver each [`Delivery`], call each invoked agent's model with its whole
//! context, and end the turn on an [`Step::Answer`] or [`Step::Fail`].
//!
//! Rules it keeps:
//! - one model call per agent at a time: what reaches a busy agent waits, and all that waits for
//!   an agent is delivered before its next call; different agents run concurrently;
//! - only the manager reaches the user; another agent's `to: 0` goes to the manager;
//! - an invalid reply earns a correction, up to [`MAX_CORRECTIONS`] times in a row, then its
//!   raw text goes to the manager (or, from the manager, to the user);
//! - guards (hop limit, deadline, a repeated exchange) tell the manager to answer now, and the
//!   manager's next reply is the answer, whoever it addresses;
//! - once the turn has ended, replies still in flight are routed but start no calls: they wait
//!   in their addressees' contexts for the next turn;
//! - a cancelled turn ends at once, without an answer; what is still running returns as late
//!   replies;
//! - a reply with tool calls is a hop that routes nothing: its calls (those of the agent's tools;
//!   any other gets an error result at once) run concurrently ([`Step::CallTool`]), each result
//!   is a hop delivered to the caller alone, right after its reply, and once all are in the agent
//!   is called again; the agent stays busy meanwhile, so what reaches it waits as for a model
//!   call. The same call answered the same way three times in a turn is a loop;
//! - the manager may also call the client's tools (an API request's own): those calls are not
//!   run here. Once the manager waits for nothing else and no other agent is working, the turn
//!   **pauses** ([`Step::Pause`]); the client's results resume it ([`TurnEngine::resume`]), in
//!   another engine if need be, with the hops counted so far.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::agency::{Agency, Protocol, Recipient, Roster};
use crate::ids::{AgentId, MessageId};
use crate::message::{Message, MessageKind, StopReason};
use crate::protocol::{self, Envelope, ReplyError};
use crate::tool::{ToolCall, ToolGrants, ToolPart};
use tools::tool_result;

/// Corrections an agent gets in a row before its raw text is passed on; also how often the
/// manager is corrected for an answer that is not in the client's format.
pub const MAX_CORRECTIONS: u8 = 2;

/// What the manager's answer must be (an API client's response format, such as JSON of a
/// schema), checked where the turn would end.
pub trait AnswerCheck: Send + Sync + std::fmt::Debug {
    /// The answer as the client gets it, or why it is not one (told to the manager).
    fn check(&self, answer: &str) -> Result<String, String>;
}

/// A message to put into an agent's context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub to: AgentId,
    /// The sending agent; `None` for the end user or the server.
    pub from: Option<AgentId>,
    pub kind: MessageKind,
    pub text: String,
    /// The reply it was made from.
    pub linked: Option<MessageId>,
    /// For a tool result: the call it answers.
    pub tool: Option<ToolPart>,
}

/// What the runtime must do next, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Persist this message in its addressee's context.
    Deliver(Delivery),
    /// Call this agent's model with its whole context.
    Invoke(AgentId),
    /// Run this tool call of `agent`'s reply; its result goes to [`TurnEngine::on_tool_result`].
    CallTool {
        agent: AgentId,
        reply: MessageId,
        call: ToolCall,
    },
    /// The turn is over: this is the manager's answer to the user.
    Answer {
        text: String,
        stopped_by: StopReason,
        /// The manager's reply it came from (none when the turn was cut off).
        linked: Option<MessageId>,
    },
    /// The turn cannot answer: the manager's model failed.
    Fail { agent: AgentId, error: String },
    /// The turn was cancelled: it is over, without an answer (`StopReason::Cancelled`).
    Cancelled,
    /// This call of `agent`'s reply waits for a person's approval (its agent's policy says
    /// so). Approved, the runtime runs it as a [`Step::CallTool`]; either way its result goes
    /// to [`TurnEngine::on_tool_result`] (a denial is an error result).
    AskApproval {
        agent: AgentId,
        reply: MessageId,
        call: ToolCall,
    },
    /// The turn waits for the client: these calls of the manager's reply `reply` are of the
    /// client's tools (`StopReason::ToolCalls`). Nothing else is running.
    Pause {
        reply: MessageId,
        calls: Vec<ToolCall>,
    },
}

#[derive(Debug, Default)]
struct AgentState {
    busy: bool,
    /// Messages that reached the agent while it was busy.
    waiting: Vec<Delivery>,
    /// It has been delivered something it has not been called for yet.
    unanswered: bool,
    corrections: u8,
    /// Its tool calls still running, and those waiting for the client.
    pending_tools: usize,
    /// Calls of the client's tools (the manager's only) that wait for the client: the reply
    /// they are of, and the calls.
    client_calls: Option<(MessageId, Vec<ToolCall>)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    /// A guard tripped; the manager has been told to answer. `forced` once it was called since.
    Finishing {
        reason: StopReason,
        forced: bool,
    },
    Ended,
}

/// The state of one turn of a routed conversation.
#[derive(Debug)]
pub struct TurnEngine {
    protocol: Protocol,
    manager: AgentId,
    roster: Roster,
    max_hops: u32,
    hops: u32,
    phase: Phase,
    /// In roster order, so that the steps are deterministic.
    agents: Vec<(AgentId, AgentState)>,
    index: HashMap<AgentId, usize>,
    loops: LoopDetector,
    /// Each agent's (tool, arguments, result) exchanges this turn, and how often.
    tool_exchanges: HashMap<(AgentId, u64), u8>,
    last_addressee: Option<AgentId>,
    tools: HashMap<AgentId, ToolGrants>,
    /// The tools whose calls wait for a person, of the agents that have any.
    approve: HashMap<AgentId, ToolGrants>,
    /// The client's tools (an API request's), by name: the manager's beside its own.
    client_tools: BTreeSet<String>,
    /// What the answer must be, and how often the manager was corrected for it.
    answer_check: Option<std::sync::Arc<dyn AnswerCheck>>,
    format_corrections: u8,
}

/// How often an agent may make the same call and get the same result in one turn before it
/// counts as a loop.
pub const MAX_SAME_TOOL_EXCHANGE: u8 = 3;

impl TurnEngine {
    pub fn new(agency: &Agency) -> Self {
        let agents: Vec<(AgentId, AgentState)> = agency
            .agents
            .iter()
            .map(|a| (a.id, AgentState::default()))
            .collect();
        let index = agents
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i))
            .collect();
        Self {
            protocol: agency.protocol,
            manager: agency.manager,
            roster: agency.roster(),
            max_hops: agency.limits.max_hops,
            hops: 0,
            phase: Phase::Running,
            agents,
            index,
            loops: LoopDetector::default(),
            tool_exchanges: HashMap::new(),
            last_addressee: None,
            tools: agency
                .agents
                .iter()
                .map(|a| (a.id, a.tools.clone()))
                .collect(),
            approve: agency
                .agents
                .iter()
                .filter(|a| !a.approve.tools.is_empty())
                .map(|a| (a.id, a.approve.tools.clone()))
                .collect(),
            client_tools: BTreeSet::new(),
            answer_check: None,
            format_corrections: 0,
        }
    }

    /// The manager's answer must pass `check`: one that does not is sent back to it with why,
    /// at most [`MAX_CORRECTIONS`] times; then the turn fails.
    pub fn with_answer_check(mut self, check: std::sync::Arc<dyn AnswerCheck>) -> Self {
        self.answer_check = Some(check);
        self
    }

    /// The manager may call these tools of the client too (their names): a call of one
    /// pauses the turn rather than running.
    pub fn with_client_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.client_tools = names.into_iter().collect();
        self
    }

    /// Replies processed so far (every model call that returned counts as one hop).
    pub fn hops(&self) -> u32 {
        self.hops
    }

    pub fn is_ended(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// The agent the last reply addressed, when it addressed exactly one (`None` for the user,
    /// several recipients, or an invalid reply).
    pub fn last_addressee(&self) -> Option<AgentId> {
        self.last_addressee
    }

    /// Whether `agent`'s model is offered its tools now: not the manager's call after it was
    /// told to answer (a guard tripped), whose calls would not run anyway.
    pub fn offers_tools(&self, agent: AgentId) -> bool {
        !(agent == self.manager && matches!(self.phase, Phase::Finishing { forced: true, .. }))
    }

    /// Some agent's model call is still running.
    pub fn in_flight(&self) -> bool {
        self.agents.iter().any(|(_, s)| s.busy)
    }

    /// The user's message goes to the manager. `unanswered` are agents whose contexts already
    /// end with messages they have not answered (late replies of an earlier turn): they are
    /// called too.
    pub fn start(
        &mut self,
        input: String,
        unanswered: impl IntoIterator<Item = AgentId>,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        self.mark_unanswered(unanswered);
        self.route(
            Delivery {
                to: self.manager,
                from: None,
                kind: MessageKind::Input,
                text: input,
                linked: None,
                tool: None,
            },
            &mut steps,
        );
        self.schedule(&mut steps);
        steps
    }

    /// The manager's context already ends with what it is to answer (a room's chat, which
    /// the runtime reads from the room): it is called.
    pub fn start_on_context(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        self.mark_unanswered([self.manager]);
        self.schedule(&mut steps);
        steps
    }

    /// What a crash left undelivered, delivered first: a turn of `messages` (the
    /// conversation's, in `seq` order) that a process running it did not finish may have
    /// replies whose deliveries only its engine held (they waited for a busy addressee). The
    /// latest turn's replies are read again with the protocol; each delivery they make that no
    /// stored message linked to the reply shows is delivered now, and its addressee will be
    /// called. Nothing stored is delivered twice: a reply that was corrected, or whose raw
    /// text was passed on, has its linked message; the manager's answers are the user's.
    pub fn recover(&mut self, messages: &[&Message]) -> Vec<Step> {
        let mut steps = Vec::new();
        let Some(turn) = messages.iter().rev().find_map(|m| m.turn_id) else {
            return steps;
        };
        let mut made: HashMap<MessageId, Vec<&Message>> = HashMap::new();
        for m in messages {
            if let Some(reply) = m.linked {
                made.entry(reply).or_default().push(m);
            }
        }
        let replies = messages.iter().filter(|m| {
            m.turn_id == Some(turn)
                && m.kind == MessageKind::Reply
                && m.tool.as_ref().is_none_or(|t| t.calls().is_empty())
        });
        for reply in replies {
            let Some(agent) = reply.agent else { continue };
            let made = made.get(&reply.id).map(Vec::as_slice).unwrap_or_default();
            let envelopes =
                match protocol::parse_reply(self.protocol, &reply.text, agent, &self.roster) {
                    Ok(envelopes) => envelopes,
                    Err(_) if agent == self.manager || !made.is_empty() => continue,
                    Err(_) => self.raw_fallback(agent, &reply.text),
                };
            // Deliveries stored per addressee, matched against the envelopes in order.
            let mut stored: HashMap<AgentId, usize> = HashMap::new();
            for d in made.iter().filter(|d| d.kind == MessageKind::Delivery) {
                if let Some(to) = d.agent {
                    *stored.entry(to).or_default() += 1;
                }
            }
            for e in envelopes {
                let to = match e.to {
                    Recipient::User if agent == self.manager => continue,
                    Recipient::User => self.manager,
                    Recipient::Agent(id) => id,
                };
                match stored.get_mut(&to) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => self.route(
                        Delivery {
                            to,
                            from: Some(agent),
                            kind: MessageKind::Delivery,
                            text: e.text,
                            linked: Some(reply.id),
                            tool: None,
                        },
                        &mut steps,
                    ),
                }
            }
        }
        steps
    }

    /// A turn that paused on the client's tools goes on, in this new engine: `results`
    /// (each call of the manager's reply `reply` with its text and whether it is an error)
    /// reach the manager, then `input` (a user's message sent with them), and the manager is
    /// called. `hops` is the count the turn had reached. Agents in `unanswered` are called
    /// too, as at [`TurnEngine::start`].
    pub fn resume(
        &mut self,
        hops: u32,
        reply: MessageId,
        results: Vec<(ToolCall, String, bool)>,
        input: Option<String>,
        unanswered: impl IntoIterator<Item = AgentId>,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        self.hops = hops;
        self.mark_unanswered(unanswered);
        let manager = self.manager;
        for (call, text, is_error) in results {
            self.hops += 1;
            self.route(
                tool_result(manager, reply, &call, text, is_error),
                &mut steps,
            );
        }
        if let Some(text) = input {
            self.route(
                Delivery {
                    to: manager,
                    from: None,
                    kind: MessageKind::Input,
                    text,
                    linked: None,
                    tool: None,
                },
                &mut steps,
            );
        }
        if self.hops >= self.max_hops {
            self.trip(StopReason::MaxHops, &mut steps);
        }
        self.schedule(&mut steps);
        steps
    }

    /// `agent` replied `raw`, persisted as message `reply`.
    pub fn on_reply(&mut self, agent: AgentId, reply: MessageId, raw: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        if !self.release(agent, &mut steps) {
            return steps;
        }
        let parsed = protocol::parse_reply(self.protocol, raw, agent, &self.roster);
        self.last_addressee = match parsed.as_deref() {
            Ok([one]) => match one.to {
                Recipient::Agent(id) => Some(id),
                Recipient::User if agent != self.manager => Some(self.manager),
                Recipient::User => None,
            },
            _ => None,
        };
        match self.phase {
            Phase::Ended => {
                // Late: route what can be routed, start nothing.
                let envelopes = parsed.unwrap_or_else(|_| self.raw_fallback(agent, raw));
                self.route_envelopes(agent, reply, envelopes, &mut steps);
                return steps;
            }
            Phase::Finishing {
                reason,
                forced: true,
            } if agent == self.manager => {
                self.hops += 1;
                let text = match parsed {
                    Ok(envelopes) => answer_text(&envelopes),
                    Err(_) => raw.trim().to_string(),
                };
                self.finish(text, reason, Some(reply), &mut steps);
                return steps;
            }
            Phase::Running | Phase::Finishing { .. } => self.hops += 1,
        }
        let running = self.phase == Phase::Running;
        match parsed {
            Ok(envelopes) => {
                self.state_mut(agent).corrections = 0;
                let looping = self.route_envelopes(agent, reply, envelopes, &mut steps);
                if self.phase == Phase::Ended {
                    return steps;
                }
                if running && looping {
                    self.trip(StopReason::Loop, &mut steps);
                } else if running && self.hops >= self.max_hops {
                    self.trip(StopReason::MaxHops, &mut steps);
                }
            }
            Err(e) if running && self.state_mut(agent).corrections < MAX_CORRECTIONS => {
                self.state_mut(agent).corrections += 1;
                let text = self.correction(&e);
                self.route(
                    Delivery {
                        to: agent,
                        from: None,
                        kind: MessageKind::Correction,
                        text,
                        linked: Some(reply),
                        tool: None,
                    },
                    &mut steps,
                );
                if self.hops >= self.max_hops {
                    self.trip(StopReason::MaxHops, &mut steps);
                }
            }
            Err(_) if agent == self.manager && !running => {
                // The manager answered before it saw the guard; the guard waits for it.
            }
            Err(_) => {
                self.state_mut(agent).corrections = 0;
                let envelopes = self.raw_fallback(agent, raw);
                self.route_envelopes(agent, reply, envelopes, &mut steps);
                if running && self.phase == Phase::Running && self.hops >= self.max_hops {
                    self.trip(StopReason::MaxHops, &mut steps);
                }
            }
        }
        self.schedule(&mut steps);
        steps
    }

    /// `agent`'s model failed with `error` (already retried where that made sense).
    pub fn on_failure(&mut self, agent: AgentId, error: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        if !self.release(agent, &mut steps) || self.phase == Phase::Ended {
            return steps;
        }
        self.hops += 1;
        if agent == self.manager {
            self.phase = Phase::Ended;
            steps.push(Step::Fail {
                agent,
                error: error.to_string(),
            });
            self.flush_idle(&mut steps);
            return steps;
        }
        let text = format!(
            "#{} ({}) could not answer: {error}",
            agent.get(),
            self.roster.display(Some(agent))
        );
        self.route(
            Delivery {
                to: self.manager,
                from: Some(agent),
                kind: MessageKind::Failure,
                text,
                linked: None,
                tool: None,
            },
            &mut steps,
        );
        if self.phase == Phase::Running && self.hops >= self.max_hops {
            self.trip(StopReason::MaxHops, &mut steps);
        }
        self.schedule(&mut steps);
        steps
    }

    /// The turn's deadline passed: the manager is told to answer now.
    pub fn on_deadline(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.phase == Phase::Running {
            self.trip(StopReason::Deadline, &mut steps);
            self.schedule(&mut steps);
        }
        steps
    }

    /// The turn's cost passed its cap: the manager is told to answer now, as at the hop limit.
    pub fn on_turn_budget(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.phase == Phase::Running {
            self.trip(StopReason::Budget, &mut steps);
            self.schedule(&mut steps);
        }
        steps
    }

    /// `agent`'s call was refused because a budget the turn is paid from ran out (`why`): no
    /// model may be called any more, so the turn ends now with `why` as its answer (what
    /// waited for `agent` is delivered, for the next turn).
    pub fn out_of_budget(&mut self, agent: AgentId, why: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        self.release(agent, &mut steps);
        if self.phase != Phase::Ended {
            self.answer_check = None;
            self.finish(why.to_string(), StopReason::Budget, None, &mut steps);
        }
        steps
    }

    /// The manager did not answer in the grace after the deadline: end the turn without it.
    pub fn cut_off(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.phase != Phase::Ended {
            let reason = match self.phase {
                Phase::Finishing { reason, .. } => reason,
                _ => StopReason::Deadline,
            };
            self.finish(
                "The agency could not finish answering in time.".into(),
                reason,
                None,
                &mut steps,
            );
        }
        steps
    }

    /// The client cancelled the turn: it ends now, without an answer, and calls no one else.
    /// Calls still running come back as late replies (routed, starting nothing). Nothing to do
    /// once the turn has ended.
    pub fn cancel(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.phase != Phase::Ended {
            self.phase = Phase::Ended;
            steps.push(Step::Cancelled);
            self.flush_idle(&mut steps);
        }
        steps
    }

    /// Agents whose contexts end with something they have not answered: each is called as
    /// soon as it is free.
    fn mark_unanswered(&mut self, agents: impl IntoIterator<Item = AgentId>) {
        for id in agents {
            if let Some(s) = self.state(id) {
                s.unanswered = true;
            }
        }
    }

    fn state(&mut self, id: AgentId) -> Option<&mut AgentState> {
        let i = *self.index.get(&id)?;
        Some(&mut self.agents[i].1)
    }

    fn state_mut(&mut self, id: AgentId) -> &mut AgentState {
        let i = self.index.get(&id).copied().unwrap_or(0);
        &mut self.agents[i].1
    }

    /// The agent's call returned: it is idle again, and what waited for it is delivered.
    /// False when the agent is unknown or was not busy (nothing to do).
    fn release(&mut self, agent: AgentId, steps: &mut Vec<Step>) -> bool {
        let Some(s) = self.state(agent) else {
            return false;
        };
        if !s.busy || s.pending_tools > 0 {
            return false;
        }
        s.busy = false;
        let waiting = std::mem::take(&mut s.waiting);
        s.unanswered |= !waiting.is_empty();
        steps.extend(waiting.into_iter().map(Step::Deliver));
        true
    }

    fn route(&mut self, d: Delivery, steps: &mut Vec<Step>) {
        let Some(s) = self.state(d.to) else { return };
        if s.busy {
            s.waiting.push(d);
        } else {
            s.unanswered = true;
            steps.push(Step::Deliver(d));
        }
    }

    /// Routes a valid reply. Returns whether it repeated an exchange (a loop).
    fn route_envelopes(
        &mut self,
        agent: AgentId,
        reply: MessageId,
        envelopes: Vec<Envelope>,
        steps: &mut Vec<Step>,
    ) -> bool {
        let mut answer: Vec<String> = Vec::new();
        let mut looping = false;
        for e in envelopes {
            let to = match e.to {
                Recipient::User if agent == self.manager => {
                    answer.push(e.text);
                    continue;
                }
                // Only the manager reaches the user.
                Recipient::User => self.manager,
                Recipient::Agent(id) => {
                    looping |= self.loops.observe(agent, id, &e.text);
                    id
                }
            };
            self.route(
                Delivery {
                    to,
                    from: Some(agent),
                    kind: MessageKind::Delivery,
                    text: e.text,
                    linked: Some(reply),
                    tool: None,
                },
                steps,
            );
        }
        if !answer.is_empty() && self.phase != Phase::Ended {
            let reason = match self.phase {
                Phase::Finishing { reason, .. } => reason,
                _ => StopReason::Answered,
            };
            self.finish(answer.join("\n\n"), reason, Some(reply), steps);
        }
        looping
    }

    /// An unroutable reply after its corrections: to the manager, or from the manager to the user.
    fn raw_fallback(&self, agent: AgentId, raw: &str) -> Vec<Envelope> {
        let to = if agent == self.manager {
            Recipient::User
        } else {
            Recipient::Agent(self.manager)
        };
        vec![Envelope {
            to,
            text: raw.trim().to_string(),
        }]
    }

    fn correction(&self, e: &ReplyError) -> String {
        format!(
            "Your reply could not be delivered: {e}. Send it again in the reply format. {}",
            protocol::format_instructions(self.protocol, self.example())
        )
    }

    fn example(&self) -> Option<(AgentId, &str)> {
        self.roster
            .entries()
            .first()
            .map(|(id, n)| (*id, n.as_str()))
    }

    fn trip(&mut self, reason: StopReason, steps: &mut Vec<Step>) {
        self.phase = Phase::Finishing {
            reason,
            forced: false,
        };
        let why = match reason {
            StopReason::MaxHops => {
                format!("this turn reached its limit of {} replies", self.max_hops)
            }
            StopReason::Deadline => "this turn reached its time limit".to_string(),
            StopReason::Loop => "agents were repeating the same exchange".to_string(),
            StopReason::Budget => "this turn reached its cost limit".to_string(),
            StopReason::Answered
            | StopReason::Cancelled
            | StopReason::ToolCalls
            | StopReason::Approval => "the turn is over".to_string(),
        };
        let how = match self.protocol {
            Protocol::Json => "{\"to\": 0, \"context\": \"<your answer>\"}",
            Protocol::Directives => "TO user: <your answer>",
            Protocol::Plain => "<your answer>",
        };
        self.route(
            Delivery {
                to: self.manager,
                from: None,
                kind: MessageKind::Guard,
                text: format!(
                    "Stop now: {why}. Do not address any other agent. Answer the user with the best answer you have, as {how}."
                ),
                linked: None,
                tool: None,
            },
            steps,
        );
    }

    fn finish(
        &mut self,
        mut text: String,
        stopped_by: StopReason,
        linked: Option<MessageId>,
        steps: &mut Vec<Step>,
    ) {
        if let Some(check) = self.answer_check.clone() {
            match check.check(&text) {
                Ok(checked) => text = checked,
                Err(why) if linked.is_some() && self.format_corrections < MAX_CORRECTIONS => {
                    // Not the answer yet: the manager is told why and answers again.
                    self.format_corrections += 1;
                    self.route(
                        Delivery {
                            to: self.manager,
                            from: None,
                            kind: MessageKind::Correction,
                            text: format!(
                                "Your answer could not be given to the user: {why}. Answer the user again, in the format asked for."
                            ),
                            linked,
                            tool: None,
                        },
                        steps,
                    );
                    self.schedule(steps);
                    return;
                }
                Err(why) => {
                    self.phase = Phase::Ended;
                    steps.push(Step::Fail {
                        agent: self.manager,
                        error: format!("the answer is not in the response format asked for: {why}"),
                    });
                    self.flush_idle(steps);
                    return;
                }
            }
        }
        self.phase = Phase::Ended;
        steps.push(Step::Answer {
            text,
            stopped_by,
            linked,
        });
        self.flush_idle(steps);
    }

    /// At the end of a turn, idle agents get what waits for them (for the next turn).
    fn flush_idle(&mut self, steps: &mut Vec<Step>) {
        for (_, s) in &mut self.agents {
            if !s.busy && !s.waiting.is_empty() {
                s.unanswered = true;
                steps.extend(s.waiting.drain(..).map(Step::Deliver));
            }
        }
    }

    /// Calls every idle agent that has something to answer, as far as the phase allows.
    fn schedule(&mut self, steps: &mut Vec<Step>) {
        let manager = self.manager;
        let phase = &mut self.phase;
        for (id, s) in &mut self.agents {
            if s.busy || !s.unanswered {
                continue;
            }
            let allowed = match phase {
                Phase::Running => true,
                Phase::Finishing { forced, .. } if *id == manager => {
                    *forced = true;
                    true
                }
                Phase::Finishing { .. } | Phase::Ended => false,
            };
            if allowed {
                s.busy = true;
                s.unanswered = false;
                steps.push(Step::Invoke(*id));
            }
        }
        self.pause_if_waiting(steps);
    }
}

fn answer_text(envelopes: &[Envelope]) -> String {
    let to_user: Vec<&str> = envelopes
        .iter()
        .filter(|e| e.to == Recipient::User)
        .map(|e| e.text.as_str())
        .collect();
    if to_user.is_empty() {
        envelopes
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    } else {
        to_user.join("\n\n")
    }
}

/// Notices two agents repeating the same exchange: X sends Y a message it already sent, right
/// after Y repeated its own last message to X.
#[derive(Debug, Default)]
struct LoopDetector {
    seen: HashSet<(AgentId, AgentId, u64)>,
    last_was_repeat: HashMap<(AgentId, AgentId), bool>,
}

impl LoopDetector {
    fn observe(&mut self, from: AgentId, to: AgentId, text: &str) -> bool {
        let mut h = DefaultHasher::new();
        text.hash(&mut h);
        let repeat = !self.seen.insert((from, to, h.finish()));
        self.last_was_repeat.insert((from, to), repeat);
        repeat
            && self
                .last_was_repeat
                .get(&(to, from))
                .copied()
                .unwrap_or(false)
    }
}

mod tools;
pub use tools::{Held, HeldOutcome};

#[cfg(test)]
mod tests;
