//! The engine's tool hops: an agent's calls (of its granted tools, or the client's), their
//! results into its context, and the pause while the client runs its own.

use std::hash::{DefaultHasher, Hash, Hasher};

use super::{Delivery, MAX_SAME_TOOL_EXCHANGE, Phase, Step, TurnEngine};
use crate::ids::{AgentId, MessageId};
use crate::message::{MessageKind, StopReason};
use crate::tool::{ToolCall, ToolGrants, ToolPart, ToolResult};

impl TurnEngine {
    /// `agent` replied with tool calls (and perhaps text, which routes nothing), persisted as
    /// message `reply`.
    pub fn on_tool_calls(
        &mut self,
        agent: AgentId,
        reply: MessageId,
        raw: &str,
        calls: &[ToolCall],
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        if !self.state(agent).is_some_and(|s| s.busy) {
            return steps;
        }
        self.last_addressee = None;
        let forced = matches!(self.phase, Phase::Finishing { forced: true, .. });
        if self.phase == Phase::Ended || (forced && agent == self.manager) {
            // Too late to run anything: each call gets its error result, the agent is idle.
            let why = if self.phase == Phase::Ended {
                "Not run: the turn had ended."
            } else {
                "Not run: you were told to answer now."
            };
            for call in calls {
                steps.push(Step::Deliver(tool_result(
                    agent,
                    reply,
                    call,
                    why.into(),
                    true,
                )));
            }
            self.release(agent, &mut steps);
            if self.phase != Phase::Ended {
                self.hops += 1;
                let reason = match self.phase {
                    Phase::Finishing { reason, .. } => reason,
                    _ => StopReason::Deadline,
                };
                let text = match raw.trim() {
                    "" => "The agency could not finish answering in time.".to_string(),
                    t => t.to_string(),
                };
                self.finish(text, reason, Some(reply), &mut steps);
            }
            return steps;
        }
        self.hops += 1;
        let grants = self.tools.get(&agent).cloned().unwrap_or_default();
        let mut running = 0;
        let mut client = Vec::new();
        for call in calls {
            if grants.allows(&call.name) {
                running += 1;
                let (reply, call) = (reply, call.clone());
                steps.push(if self.needs_approval(agent, &call.name) {
                    Step::AskApproval { agent, reply, call }
                } else {
                    Step::CallTool { agent, reply, call }
                });
            } else if agent == self.manager && self.client_tools.contains(&call.name) {
                client.push(call.clone());
            } else {
                let text = self.refusal(agent, &grants, &call.name);
                steps.push(Step::Deliver(tool_result(agent, reply, call, text, true)));
            }
        }
        let s = self.state_mut(agent);
        s.corrections = 0;
        s.pending_tools = running + client.len();
        s.unanswered = true;
        if !client.is_empty() {
            s.client_calls = Some((reply, client));
        }
        if s.pending_tools == 0 {
            self.release(agent, &mut steps);
        }
        if self.phase == Phase::Running && self.hops >= self.max_hops {
            self.trip(StopReason::MaxHops, &mut steps);
        }
        self.schedule(&mut steps);
        steps
    }

    /// A tool call of `agent`'s reply `reply` answered `text` (an error when `is_error`).
    pub fn on_tool_result(
        &mut self,
        agent: AgentId,
        reply: MessageId,
        call: &ToolCall,
        text: String,
        is_error: bool,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        let Some(s) = self.state(agent) else {
            return steps;
        };
        if s.pending_tools == 0 {
            return steps;
        }
        s.pending_tools -= 1;
        let last = s.pending_tools == 0;
        let mut h = DefaultHasher::new();
        (&call.name, &call.arguments, &text, is_error).hash(&mut h);
        steps.push(Step::Deliver(tool_result(
            agent, reply, call, text, is_error,
        )));
        if last {
            self.release(agent, &mut steps);
        }
        if self.phase != Phase::Ended {
            self.hops += 1;
            let seen = self.tool_exchanges.entry((agent, h.finish())).or_insert(0);
            *seen += 1;
            if self.phase == Phase::Running {
                if *seen >= MAX_SAME_TOOL_EXCHANGE {
                    self.trip(StopReason::Loop, &mut steps);
                } else if self.hops >= self.max_hops {
                    self.trip(StopReason::MaxHops, &mut steps);
                }
            }
        }
        self.schedule(&mut steps);
        steps
    }

    fn needs_approval(&self, agent: AgentId, name: &str) -> bool {
        !self.approve.is_empty() && self.approve.get(&agent).is_some_and(|g| g.allows(name))
    }

    /// The turn stops here because everything it waits for is a person's approval (the
    /// runtime keeps those calls in the store): it is over for now, and what waited for busy
    /// agents goes into their contexts after their calls, for the turn that resumes it.
    pub fn pause_for_approval(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.phase == Phase::Ended {
            return steps;
        }
        self.phase = Phase::Ended;
        for (_, s) in &mut self.agents {
            s.busy = false;
            s.pending_tools = 0;
            s.client_calls = None;
            s.unanswered |= !s.waiting.is_empty();
            steps.extend(s.waiting.drain(..).map(Step::Deliver));
        }
        steps
    }

    /// A turn paused on approvals goes on, in this new engine, with the hops it had reached:
    /// each agent with calls `held` (of its reply) is busy with them again; a held call with a
    /// result (a denial, or a result kept before) has it delivered, one marked `run` is run
    /// ([`Step::CallTool`]), and one neither still waits. Agents in `unanswered` are called
    /// too, as at [`TurnEngine::start`].
    pub fn resume_held(
        &mut self,
        hops: u32,
        held: Vec<Held>,
        unanswered: impl IntoIterator<Item = AgentId>,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        self.hops = hops;
        self.mark_unanswered(unanswered);
        for h in &held {
            if let Some(s) = self.state(h.agent) {
                s.busy = true;
                s.unanswered = true;
                s.pending_tools += 1;
            }
        }
        for h in held {
            match h.outcome {
                HeldOutcome::Result(text, is_error) => {
                    let more = self.on_tool_result(h.agent, h.reply, &h.call, text, is_error);
                    steps.extend(more);
                }
                HeldOutcome::Run => steps.push(Step::CallTool {
                    agent: h.agent,
                    reply: h.reply,
                    call: h.call,
                }),
                HeldOutcome::Wait => {}
            }
        }
        self.schedule(&mut steps);
        steps
    }

    /// What a call of `name` that `grants` do not allow gets: the manager is reminded of the
    /// client's tools too.
    fn refusal(&self, agent: AgentId, grants: &ToolGrants, name: &str) -> String {
        let text = grants.refusal(name);
        if agent != self.manager || self.client_tools.is_empty() {
            return text;
        }
        let client: Vec<&str> = self.client_tools.iter().map(String::as_str).collect();
        format!("{text} The client's tools: {}.", client.join(", "))
    }

    /// When the manager waits only for the client's results and nobody else works, the turn
    /// pauses: what waited for the manager goes into its context (after the calls; their
    /// results will be read right after them), and the client is asked.
    pub(super) fn pause_if_waiting(&mut self, steps: &mut Vec<Step>) {
        if self.phase == Phase::Ended {
            return;
        }
        let manager = self.manager;
        let others_busy = self.agents.iter().any(|(id, s)| *id != manager && s.busy);
        let Some(s) = self.state(manager) else { return };
        let waiting_for_client = s
            .client_calls
            .as_ref()
            .is_some_and(|(_, calls)| calls.len() == s.pending_tools);
        if others_busy || !waiting_for_client {
            return;
        }
        let Some((reply, calls)) = s.client_calls.take() else {
            return;
        };
        s.pending_tools = 0;
        s.busy = false;
        s.unanswered = false;
        steps.extend(
            std::mem::take(&mut s.waiting)
                .into_iter()
                .map(Step::Deliver),
        );
        self.phase = Phase::Ended;
        steps.push(Step::Pause { reply, calls });
        self.flush_idle(steps);
    }
}

/// A call a paused turn held for a person's approval, as the turn resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub agent: AgentId,
    pub reply: MessageId,
    pub call: ToolCall,
    pub outcome: HeldOutcome,
}

/// What becomes of a held call as the turn resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldOutcome {
    /// Its result is known (a denial, or a result kept before): delivered.
    Result(String, bool),
    /// Approved and not run yet: run it.
    Run,
    /// Still unanswered.
    Wait,
}

/// The result of `call` for `agent`'s context.
pub(super) fn tool_result(
    agent: AgentId,
    reply: MessageId,
    call: &ToolCall,
    text: String,
    is_error: bool,
) -> Delivery {
    Delivery {
        to: agent,
        from: None,
        kind: MessageKind::ToolResult,
        text,
        linked: Some(reply),
        tool: Some(ToolPart::Result(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            is_error,
        })),
    }
}
