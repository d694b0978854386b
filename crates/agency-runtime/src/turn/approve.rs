//! A turn's approvals (see [`crate::approvals`]): asking, the answers, the pause, and the
//! resumption of a turn paused on them.

use agency_core::engine::{Held, HeldOutcome, Step, TurnEngine};
use agency_core::{AgentId, MessageId, StopReason, ToolCall, TurnRecord};
use agency_store::Write;

use super::{Done, TurnRun};
use crate::session::Session;
use crate::{Runtime, RuntimeError};

impl TurnRun {
    /// The turn ended (answered, failed, cancelled; not paused) with calls still waiting for
    /// a person: they are denied, unless someone answered first, so that nobody is asked about
    /// a call that can no longer run. Their agents read why, as late results.
    pub(super) fn withdraw_approvals(&mut self) {
        let paused = matches!(self.answer, Some((_, StopReason::Approval)));
        if self.approvals_asked.is_empty() || paused {
            return;
        }
        let rt = self.rt.clone();
        let asked = self.approvals_asked.clone();
        tokio::spawn(async move {
            for approval in asked {
                if let Err(e) = rt
                    .answer_approval(approval, crate::approvals::withdrawn())
                    .await
                {
                    tracing::warn!(error = %e, "could not withdraw an approval");
                }
            }
        });
    }

    /// What a resumed turn's held approvals leave it: calls to run once the engine asks, and
    /// calls still waiting.
    pub(super) fn hold(&mut self, held: Vec<(agency_core::Approval, Held)>) {
        for (approval, h) in held {
            crate::observe::approval(&self.span, &approval);
            match h.outcome {
                HeldOutcome::Run => self.approved.push(approval),
                HeldOutcome::Wait => self.approvals_asked.push(approval),
                HeldOutcome::Result(..) => {}
            }
        }
    }

    /// Stores `call` as waiting for a person's approval; the turn waits for the answer here,
    /// or pauses once nothing else runs (see [`crate::approvals`]).
    pub(super) async fn ask_approval(
        &mut self,
        agent: AgentId,
        reply: MessageId,
        call: ToolCall,
    ) -> Result<(), RuntimeError> {
        let Some(who) = self.agency.agent(agent) else {
            return Ok(());
        };
        let events = (!self.pause_on_approvals).then(|| self.rt.subscribe());
        let at = (self.record.conversation_id, self.record.id);
        let approval = self
            .rt
            .ask_approval(&self.agency, at, who, reply, call)
            .await?;
        if let Some(events) = events {
            let answered = crate::approvals::answered(self.rt.clone(), events, approval.clone());
            self.inflight.push(Box::pin(
                async move { Done::Answered(Box::new(answered.await)) },
            ));
        }
        crate::observe::approval(&self.span, &approval);
        self.approvals_asked.push(approval);
        Ok(())
    }

    /// A call that waited for approval was answered: approved, it runs (once); denied, its
    /// agent reads why.
    pub(super) async fn on_answered(
        &mut self,
        approval: agency_core::Approval,
    ) -> Result<(), RuntimeError> {
        let Some(i) = self
            .approvals_asked
            .iter()
            .position(|a| a.id == approval.id)
        else {
            return Ok(());
        };
        let asked = self.approvals_asked.swap_remove(i);
        crate::observe::approval(&self.span, &approval);
        if approval.state == agency_core::ApprovalState::Approved && !self.engine.is_ended() {
            self.call_approved(approval, asked.call.arguments);
            return Ok(());
        }
        let text = if approval.state == agency_core::ApprovalState::Approved {
            "Not run: the turn had ended before it was approved.".to_string()
        } else {
            approval.denial()
        };
        let steps =
            self.engine
                .on_tool_result(approval.agent, approval.reply, &asked.call, text, true);
        self.apply(steps, Vec::new()).await
    }

    /// Runs an approved call (with the arguments it was approved with; `original` are the
    /// model's), at most once.
    pub(super) fn call_approved(&mut self, approval: agency_core::Approval, original: String) {
        let call = ToolCall {
            arguments: original,
            ..approval.call.clone()
        };
        self.call_tool(approval.agent, approval.reply, call, Some(approval));
    }

    /// Nothing runs but calls waiting for a person: the turn ends here, paused, its record
    /// saying so (`StopReason::Approval`); the answers resume it.
    pub(super) async fn pause_for_approvals(&mut self) -> Result<(), RuntimeError> {
        let steps = self.engine.pause_for_approval();
        self.apply(steps, Vec::new()).await?;
        let mut write = Write::default();
        self.record.stopped_by = Some(StopReason::Approval);
        write.turns = vec![self.finished_record()];
        self.answer_sink = None;
        self.rt.store.write(write).await?;
        self.answer = Some((String::new(), StopReason::Approval));
        Ok(())
    }
}

/// A new message came while calls of an earlier turn still wait for a person: that turn will
/// not go on — it paused on them and the client went on without answering, or the process
/// that ran it stopped — so its calls still waiting are denied (as `turn ended`, unless someone
/// answered first), and nobody is asked about them any more. `unanswered` are the agents
/// whose contexts end with calls without results; the turns of those replies are read.
pub(super) async fn withdraw_left(
    rt: &Runtime,
    session: &Session,
    unanswered: &[AgentId],
) -> Result<(), RuntimeError> {
    let mut turns: Vec<agency_core::TurnId> = unanswered
        .iter()
        .filter_map(|a| session.contexts.get(a)?.last()?.turn_id)
        .collect();
    turns.sort_unstable();
    turns.dedup();
    for turn in turns {
        for approval in rt.store.turn_approvals(turn).await? {
            if approval.state == agency_core::ApprovalState::Pending {
                rt.answer_approval(approval, crate::approvals::withdrawn())
                    .await?;
            }
        }
    }
    Ok(())
}

/// A turn paused on approvals resumes (see [`crate::approvals`]): the answers given are
/// stored, and the calls it held delivered their results, run or still wait.
pub(super) async fn resume_approvals(
    rt: &Runtime,
    session: &Session,
    engine: &mut TurnEngine,
    given: Vec<(agency_core::ApprovalId, agency_core::approval::Answer)>,
    unanswered: Vec<AgentId>,
) -> Result<
    (
        TurnRecord,
        Vec<Step>,
        Vec<(agency_core::Approval, agency_core::engine::Held)>,
    ),
    RuntimeError,
> {
    let last = match rt.store.last_turn(session.conversation).await? {
        Some(last)
            if last.stopped_by == Some(StopReason::Approval) && last.number == session.turns =>
        {
            last
        }
        _ => {
            return Err(RuntimeError::Invalid(
                "no approval request waits in this conversation: its turn went on or ended".into(),
            ));
        }
    };
    let held = crate::approvals::held(rt, session, last.id, given).await?;
    let steps = engine.resume_held(
        last.hops,
        held.iter().map(|(_, h)| h.clone()).collect(),
        unanswered,
    );
    let record = TurnRecord {
        finished_at: None,
        stopped_by: None,
        ..last
    };
    Ok((record, steps, held))
}
