//! A person's approval before a tool acts (issue 36), once for every face.
//!
//! The engine asks ([`agency_core::engine::Step::AskApproval`]) for each call an agent's policy
//! names; the turn stores it as a pending [`Approval`] and tells the event stream. Then it
//! either **waits** in its run for the answer, up to the policy's timeout (Chat Completions,
//! the playground, MQTT, the CLI — their streams keep alive), or, when the client answers
//! approvals itself (`ChatTurn::pause_on_approvals`: the Responses API, A2A, MCP), once nothing
//! else runs **pauses** in the store (`StopReason::Approval`; the client's next request
//! carries the answers and resumes the turn, on any server). An agency's [`webhook`] is told
//! of each call that starts waiting.
//!
//! An answer is a conditional update (the first wins; a second changes nothing). An approved
//! call is marked started before it goes out and its result kept after, so a call found
//! started without a result is never run again: its agent reads
//! [`agency_core::approval::OUTCOME_UNKNOWN`].

pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use agency_core::approval::{Answer, DEFAULT_TIMEOUT_SECS, OUTCOME_UNKNOWN};
use agency_core::engine::{Held, HeldOutcome};
use agency_core::{
    Agent, Approval, ApprovalId, ApprovalState, MessageId, OnTimeout, ToolCall, ToolPart, TurnId,
};
use chrono::Utc;
use tokio::sync::broadcast;

use crate::session::Session;
use crate::{Event, Runtime, RuntimeError};

/// The longest reason a person may give.
pub const MAX_REASON_CHARS: usize = 2_000;
/// The longest edited arguments.
pub const MAX_ARGUMENTS_BYTES: usize = 100_000;

/// Who answered a call nobody answered in time.
pub const TIMEOUT: &str = "timeout";
/// Who answered a call whose turn ended while it waited.
pub const TURN_ENDED: &str = "turn ended";

/// The answer a call gets when its turn will not go on: denied, by [`TURN_ENDED`].
pub(crate) fn withdrawn() -> Answer {
    Answer {
        approve: false,
        reason: None,
        arguments: None,
        by: TURN_ENDED.into(),
    }
}

/// An account's approvals: listed and answered.
pub struct Approvals<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Approvals<'_> {
    /// The approvals pending in `owner`'s agencies, oldest first.
    pub async fn pending(&self, owner: &str) -> Result<Vec<Approval>, RuntimeError> {
        Ok(self.rt.store.pending_approvals(owner).await?)
    }

    /// One of `owner`'s approvals (another's does not exist).
    pub async fn get(&self, owner: &str, id: ApprovalId) -> Result<Approval, RuntimeError> {
        let not_found = || RuntimeError::NotFound(format!("no approval {id}"));
        let approval = self.rt.store.approval(id).await?.ok_or_else(not_found)?;
        self.rt
            .agencies()
            .owned(owner, approval.agency)
            .await
            .map_err(|_| not_found())?;
        Ok(approval)
    }

    /// `owner` answers one of their approvals: approved (with new arguments where its policy
    /// allows edits) or denied (with a reason, if any). An approval already answered is a
    /// conflict, and stays as it was.
    pub async fn answer(
        &self,
        owner: &str,
        id: ApprovalId,
        answer: Answer,
    ) -> Result<Approval, RuntimeError> {
        let approval = self.get(owner, id).await?;
        self.settle(approval, answer).await
    }

    /// As [`Approvals::answer`], for an approval of `conversation` (another's does not exist
    /// here): what a face that addresses a conversation answers through.
    pub async fn answer_in(
        &self,
        owner: &str,
        conversation: agency_core::ConversationId,
        id: ApprovalId,
        answer: Answer,
    ) -> Result<Approval, RuntimeError> {
        let approval = self.get(owner, id).await?;
        if approval.conversation != conversation {
            return Err(RuntimeError::NotFound(format!("no approval {id}")));
        }
        self.settle(approval, answer).await
    }

    /// One of its agency's API keys answers an approval (a webhook's receiver does): as
    /// [`Approvals::answer`], the answer given by the key. Another agency's does not exist.
    pub async fn answer_with_key(
        &self,
        key: &agency_core::ApiKey,
        id: ApprovalId,
        mut answer: Answer,
    ) -> Result<Approval, RuntimeError> {
        let approval = self
            .rt
            .store
            .approval(id)
            .await?
            .filter(|a| a.agency == key.agency_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("no approval {id}")))?;
        answer.by = format!("API key {}", key.name);
        self.settle(approval, answer).await
    }

    /// Gives `approval` its answer, unless someone answered first (a conflict).
    async fn settle(&self, approval: Approval, answer: Answer) -> Result<Approval, RuntimeError> {
        let id = approval.id;
        let (approval, changed) = self.rt.answer_approval(approval, answer).await?;
        if !changed {
            return Err(RuntimeError::Conflict(format!(
                "approval {id} was already {}",
                approval.state.as_str()
            )));
        }
        Ok(approval)
    }
}

impl Runtime {
    /// Approvals: an account's pending ones, and their answers.
    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { rt: self }
    }

    /// Sets how long a call waits for an answer when its agent's policy does not say.
    pub fn set_approval_timeout(&self, wait: Duration) {
        self.approval_timeout
            .store(wait.as_secs().max(1), std::sync::atomic::Ordering::Relaxed);
    }

    fn approval_timeout(&self) -> u64 {
        self.approval_timeout
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Answers `approval` unless someone did first: the approval as it now stands, and whether
    /// this answer was the one taken.
    pub(crate) async fn answer_approval(
        &self,
        approval: Approval,
        mut answer: Answer,
    ) -> Result<(Approval, bool), RuntimeError> {
        check(&approval, &mut answer)?;
        let changed = self
            .store
            .answer_approval(approval.id, &answer, Utc::now())
            .await?;
        let now = self.store.approval(approval.id).await?.unwrap_or(approval);
        if changed {
            self.tell(&now);
        }
        Ok((now, changed))
    }

    /// Tells the event stream how `approval` stands.
    fn tell(&self, approval: &Approval) {
        self.publish(|| Event::Approval {
            conversation: approval.conversation,
            turn: approval.turn,
            approval: Box::new(approval.clone()),
        });
    }

    /// Stores `call` of `agent`'s reply as pending, and tells the event stream and the
    /// agency's webhook.
    pub(crate) async fn ask_approval(
        &self,
        agency: &agency_core::Agency,
        (conversation, turn): (agency_core::ConversationId, TurnId),
        agent: &Agent,
        reply: MessageId,
        call: ToolCall,
    ) -> Result<Approval, RuntimeError> {
        let policy = &agent.approve;
        let secs = policy.timeout_secs.unwrap_or(self.approval_timeout());
        let asked_at = Utc::now();
        let approval = Approval {
            id: ApprovalId::new(),
            agency: agency.id,
            conversation,
            turn,
            agent: agent.id,
            reply,
            call,
            asked_at,
            expires_at: asked_at
                + chrono::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX / 1000)),
            on_timeout: policy.on_timeout,
            edits: policy.edits,
            state: ApprovalState::Pending,
            answered_by: None,
            answered_at: None,
            reason: None,
            started_at: None,
            result: None,
        };
        self.store.put_approval(&approval).await?;
        self.tell(&approval);
        self.approvals().announce(&approval, (&agency.name, agent));
        Ok(approval)
    }
}

/// What the turn waits on for an approval asked in it: its answer, from this process or
/// another (through the event stream, read back from the store), or at its expiry what the
/// policy says (stored like any answer: a person's answer a moment earlier wins).
pub(crate) async fn answered(
    rt: Arc<Runtime>,
    mut events: broadcast::Receiver<Event>,
    asked: Approval,
) -> Approval {
    loop {
        // Read after subscribing: an answer given since is either read here or heard below.
        if let Ok(Some(now)) = rt.store.approval(asked.id).await
            && now.state != ApprovalState::Pending
        {
            return now;
        }
        let left = (asked.expires_at - Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        if left.is_zero() {
            let answer = Answer {
                approve: asked.on_timeout == OnTimeout::Approve,
                reason: None,
                arguments: None,
                by: TIMEOUT.into(),
            };
            return match rt.answer_approval(asked.clone(), answer).await {
                Ok((now, _)) => now,
                Err(e) => {
                    tracing::warn!(error = %e, "could not store an approval's timeout");
                    Approval {
                        state: ApprovalState::Denied,
                        answered_by: Some(TIMEOUT.into()),
                        ..asked
                    }
                }
            };
        }
        let sleep = tokio::time::sleep(left);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => break,
                event = events.recv() => match event {
                    Ok(Event::Approval { approval, .. }) if approval.id == asked.id => break,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => (&mut sleep).await,
                },
            }
        }
    }
}

/// An approved call goes out at most once: `None` when this is the one to run it (it is now
/// marked started); else the result it is to be given instead — the one kept, or
/// [`OUTCOME_UNKNOWN`] when it was started and its result never kept.
async fn start_once(rt: &Runtime, id: ApprovalId) -> Option<(String, bool)> {
    match rt.store.start_approved(id, Utc::now()).await {
        Ok(true) => None,
        Ok(false) => {
            let kept = rt.store.approval(id).await.ok().flatten();
            Some(
                kept.and_then(|a| a.result)
                    .unwrap_or_else(|| (OUTCOME_UNKNOWN.to_string(), true)),
            )
        }
        Err(e) => Some((
            format!("Not run: its start could not be recorded ({e})."),
            true,
        )),
    }
}

/// Runs an approved call at most once (`run` makes the call, with the arguments it was
/// approved with): marked started before it goes out and its result kept after; a call
/// started before (a crash, another server) is not run again. `original` are the model's
/// arguments: a result of edited ones begins by saying so.
pub(crate) async fn run_once<F, Fut>(
    rt: &Runtime,
    approval: &Approval,
    original: &str,
    run: F,
) -> (agency_tools::ToolOutput, Duration)
where
    F: FnOnce(ToolCall) -> Fut,
    Fut: std::future::Future<Output = (agency_tools::ToolOutput, Duration)>,
{
    if let Some((text, is_error)) = start_once(rt, approval.id).await {
        return (agency_tools::ToolOutput { text, is_error }, Duration::ZERO);
    }
    let (mut output, took) = run(approval.call.clone()).await;
    if let Some(note) = edited_note(approval, original) {
        output.text.insert_str(0, &note);
    }
    keep_result(rt, approval.id, &output.text, output.is_error).await;
    (output, took)
}

/// Keeps a call's result with its approval (logged when it cannot be: the agent has it).
async fn keep_result(rt: &Runtime, id: ApprovalId, text: &str, is_error: bool) {
    if let Err(e) = rt.store.finish_approved(id, text, is_error).await {
        tracing::warn!(error = %e, approval = %id, "could not keep an approved call's result");
    }
}

/// The text an approved call's result gets when a person changed its arguments.
fn edited_note(approval: &Approval, original: &str) -> Option<String> {
    (approval.call.arguments != original).then(|| {
        format!(
            "(A person changed the arguments before approving; the call ran with {}.)\n",
            approval.call.arguments
        )
    })
}

/// The calls a turn paused on approvals held, as it resumes: the client's answers (`given`)
/// stored first (an approval already answered keeps its answer); each approval of the turn
/// whose result its agent has not read yet, with what becomes of it.
pub(crate) async fn held(
    rt: &Runtime,
    session: &Session,
    turn: TurnId,
    given: Vec<(ApprovalId, Answer)>,
) -> Result<Vec<(Approval, Held)>, RuntimeError> {
    let of_turn = rt.store.turn_approvals(turn).await?;
    for (id, answer) in given {
        let Some(approval) = of_turn.iter().find(|a| a.id == id) else {
            return Err(RuntimeError::Invalid(format!(
                "no approval request `mcpr_{}` waits in this response's turn",
                id.0.simple()
            )));
        };
        rt.answer_approval(approval.clone(), answer).await?;
    }
    let mut out = Vec::new();
    for approval in rt.store.turn_approvals(turn).await? {
        if read(session, &approval) {
            continue;
        }
        let outcome = match (approval.state, &approval.result, approval.started_at) {
            (ApprovalState::Pending, _, _) => HeldOutcome::Wait,
            (ApprovalState::Denied, _, _) => HeldOutcome::Result(approval.denial(), true),
            (ApprovalState::Approved, Some((text, is_error)), _) => {
                HeldOutcome::Result(text.clone(), *is_error)
            }
            (ApprovalState::Approved, None, Some(_)) => {
                HeldOutcome::Result(OUTCOME_UNKNOWN.to_string(), true)
            }
            (ApprovalState::Approved, None, None) => HeldOutcome::Run,
        };
        let held = Held {
            agent: approval.agent,
            reply: approval.reply,
            call: approval.call.clone(),
            outcome,
        };
        out.push((approval, held));
    }
    Ok(out)
}

/// Whether the approval's agent has read its call's result already.
fn read(session: &Session, approval: &Approval) -> bool {
    session.contexts.get(&approval.agent).is_some_and(|c| {
        c.iter().any(|m| {
            m.linked == Some(approval.reply)
                && m.tool
                    .as_ref()
                    .and_then(ToolPart::result)
                    .is_some_and(|r| r.call_id == approval.call.id)
        })
    })
}

/// An answer as the runtime takes it: a reason of bounded length, and new arguments only
/// where the policy allows edits, as a JSON object.
fn check(approval: &Approval, answer: &mut Answer) -> Result<(), RuntimeError> {
    if let Some(reason) = &answer.reason
        && reason.chars().count() > MAX_REASON_CHARS
    {
        return Err(RuntimeError::field(
            "reason",
            format!("at most {MAX_REASON_CHARS} characters"),
        ));
    }
    answer.reason = answer.reason.take().filter(|r| !r.trim().is_empty());
    let Some(arguments) = &answer.arguments else {
        return Ok(());
    };
    if !answer.approve {
        answer.arguments = None;
        return Ok(());
    }
    if !approval.edits {
        return Err(RuntimeError::field(
            "arguments",
            "this call's policy does not allow changing its arguments (the agent's `approve_edits`)",
        ));
    }
    if arguments.len() > MAX_ARGUMENTS_BYTES {
        return Err(RuntimeError::field(
            "arguments",
            format!("at most {MAX_ARGUMENTS_BYTES} bytes"),
        ));
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(RuntimeError::field(
            "arguments",
            "must be a JSON object, as the tool takes its arguments",
        )),
    }
}

/// The default wait, in seconds, until the operator sets another.
pub(crate) const fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECS
}
