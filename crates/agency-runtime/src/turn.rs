//! One turn, carried out: the engine decides, this persists, delivers and calls models.
//!
//! A turn of an API request may pause: its manager called the client's tools. The pause is
//! all in the store — the manager's reply with the calls, the turn's record (`tool_calls`,
//! its hops) and the request's transcript — so a restart keeps it. The client's next request,
//! bringing the results, resumes that turn in a new engine (same record, hops counted on),
//! unless it waited longer than [`crate::Runtime::set_client_tools_wait`]: then the results
//! start a new turn. Waiting for the client is not run time: each run has the deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agency_core::engine::{Step, TurnEngine};
use agency_core::stream::AnswerStream;
use agency_core::tool::{Tool, ToolChoice, ToolUse};
use agency_core::{
    Agency, AgentId, ChatMessage, Message, MessageId, MessageKind, Role, Roster, StopReason,
    ToolCall, ToolPart, ToolProgress, TraceEntry, TurnRecord, Usage, tool,
};
use agency_providers::{Completion, ModelError, ModelRequest};
use agency_store::Write;
use chrono::Utc;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use crate::api::ApiTurn;
use crate::session::{Session, TurnInput};
use crate::{Event, Runtime, RuntimeError, TurnOutcome};

/// The longest the manager gets to answer after the deadline before the turn is cut off, and
/// the longest late replies are waited for after a turn answered.
const MAX_GRACE: Duration = Duration::from_secs(60);

type Call = BoxFuture<'static, Done>;

/// A model call or a tool call that returned.
enum Done {
    Model(AgentId, Result<Completion, ModelError>, Duration),
    Tool {
        agent: AgentId,
        reply: MessageId,
        call: ToolCall,
        output: agency_tools::ToolOutput,
        took: Duration,
    },
    /// A model call refused: a budget it would be paid from is spent (why).
    Refused(AgentId, String),
    /// A call that waited for a person's approval was answered (or timed out).
    Answered(Box<agency_core::Approval>),
}

struct TurnRun {
    rt: Arc<Runtime>,
    guard: crate::lock::Locked,
    session: Session,
    agency: Arc<Agency>,
    roster: Arc<Roster>,
    engine: TurnEngine,
    providers: Arc<agency_providers::Providers>,
    record: TurnRecord,
    inflight: FuturesUnordered<Call>,
    trace: Vec<TraceEntry>,
    /// Usage and latency of each reply's model call, for the hops it produces.
    reply_usage: HashMap<MessageId, (Usage, Option<u32>)>,
    answer: Option<(String, agency_core::StopReason)>,
    failure: Option<(AgentId, String)>,
    /// Where the manager's answer streams, while the turn has not answered.
    answer_sink: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// An API request's transcript (recorded with the answer) and the client's tools.
    api: Option<ApiTurn>,
    /// The manager's next model call is its first of the turn (the client's `tool_choice`
    /// binds that one).
    first_call: bool,
    /// The calls of the client's tools the turn paused on.
    client_calls: Vec<ToolCall>,
    /// The images of the user's message, for its message in the manager's context.
    input_images: Vec<String>,
    /// How long each tool call took, by its agent and id, until its result is written.
    tool_took: HashMap<(AgentId, String), u32>,
    /// Each model call of this turn that answered: its agent and usage, in order (what each
    /// agent's calls cost is summed from them at the end, as for the stored turn).
    calls: Vec<(AgentId, agency_core::Usage)>,
    /// Set when the turn is cancelled: tool calls still running stop.
    stop: tokio::sync::watch::Receiver<bool>,
    /// The turn's span (see [`crate::observe`]); disabled when tracing is off.
    span: agency_telemetry::Span,
    /// Who pays for its calls, when a budget applies (see [`crate::spend`]).
    payer: Option<Arc<crate::spend::Payer>>,
    /// Approvals (see [`crate::approvals`]): whether the turn pauses on them rather than
    /// waiting in its run; those asked and not answered (paused on, or waited for); the
    /// approved calls it is to run.
    pause_on_approvals: bool,
    approvals_asked: Vec<agency_core::Approval>,
    approved: Vec<agency_core::Approval>,
}

pub(crate) async fn run(
    rt: Arc<Runtime>,
    mut guard: crate::lock::Locked,
    mut input: TurnInput,
    answer_sink: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    api: Option<ApiTurn>,
) -> Result<TurnOutcome, RuntimeError> {
    if input.text.trim().is_empty() && input.results.is_empty() && input.approvals.is_empty() {
        return Err(RuntimeError::Invalid("the message is empty".into()));
    }
    let Some(session) = guard.take_session() else {
        return Err(RuntimeError::Invalid(
            "the conversation is not loaded".into(),
        ));
    };
    let crate::AgencyView {
        agency,
        roster,
        providers,
    } = agency_of(&rt, &session).await?;
    let payer = crate::spend::Payer::of(
        api.as_ref().map(|a| &a.key).or(input.key.as_ref()),
        api.as_ref().and_then(|a| a.thread.end_user()),
        &agency,
    );
    // A spent budget refuses a message before anything is stored (an API request's was
    // checked before its conversation was opened; see `Runtime::begin`). No budget: no read.
    if api.is_none()
        && let Some(payer) = &payer
        && let Err(spent) = rt.spending.check(payer).await
    {
        guard.put(session);
        return Err(spent);
    }
    let mut session = session;
    // A new conversation's agents, and agents added to the agency since the conversation
    // started, get their system prompt; a client's history goes into the manager's context.
    let mut batch = session.prompts(&agency);
    batch.extend(session.seeded(&agency, &roster));
    let mut engine = engine_for(&agency, api.as_ref());
    let unanswered = session.unanswered();
    let mut steps = Vec::new();
    if std::mem::take(&mut session.from_store) {
        steps = engine.recover(&session.messages());
    }
    let input_images = std::mem::take(&mut input.images);
    // A client that answers approvals itself has the turn pause on them; others wait for an
    // answer given elsewhere.
    let pause_on_approvals = api.as_ref().is_some_and(|a| a.pause_on_approvals);
    let said = if agency_telemetry::capture_content() {
        input.text.clone()
    } else {
        String::new()
    };
    let (record, opened, held) = opening(
        &rt,
        &mut session,
        &mut engine,
        (agency.manager, &batch),
        input,
        unanswered,
    )
    .await?;
    steps.extend(opened);
    // The turn's record is written when it ends; its messages carry its id from the start, so
    // messages of a turn without a record are those of a turn a crash interrupted.
    rt.publish(|| Event::TurnStarted {
        conversation: record.conversation_id,
        turn: record.id,
        number: record.number,
    });
    let cancel = crate::Cancel::register(&rt, record.conversation_id);
    let span = crate::observe::turn_span(&agency, &record, &said);
    let mut run = TurnRun {
        engine,
        roster,
        agency,
        providers,
        rt,
        guard,
        session,
        record,
        inflight: FuturesUnordered::new(),
        trace: Vec::new(),
        reply_usage: HashMap::new(),
        answer: None,
        failure: None,
        answer_sink,
        api,
        first_call: true,
        client_calls: Vec::new(),
        input_images,
        tool_took: HashMap::new(),
        calls: Vec::new(),
        stop: cancel.stop.clone(),
        span: span.clone(),
        payer,
        pause_on_approvals,
        approvals_asked: Vec::new(),
        approved: Vec::new(),
    };
    run.hold(held);
    let stop = cancel.stop.clone();
    span.run(run.go(steps, batch, stop)).await
}

impl TurnRun {
    async fn go(
        mut self,
        steps: Vec<Step>,
        batch: Vec<Message>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> Result<TurnOutcome, RuntimeError> {
        let agency = self.agency.clone();
        self.apply(steps, batch).await?;

        let deadline = tokio::time::sleep_until(Instant::now() + agency.limits.turn_deadline);
        tokio::pin!(deadline);
        let mut deadline_passed = false;
        let mut cancelled = false;
        let mut waited_since: Option<Instant> = None;
        while self.answer.is_none() && self.failure.is_none() {
            if self.pause_on_approvals
                && self.inflight.is_empty()
                && !self.approvals_asked.is_empty()
            {
                // Nothing runs but what waits for a person: the turn pauses in the store.
                self.pause_for_approvals().await?;
                continue;
            }
            if self.inflight.is_empty() {
                // Nobody is working and nobody answered: end the turn rather than hang.
                let steps = self.engine.cut_off();
                self.apply(steps, Vec::new()).await?;
                continue;
            }
            enum Next {
                Done(Option<Done>),
                Timer,
                Cancel,
            }
            // Waiting for a person is not run time: the deadline moves on by the wait.
            let waiting = !self.pause_on_approvals && !self.approvals_asked.is_empty();
            match (waiting, waited_since) {
                (true, None) => waited_since = Some(Instant::now()),
                (false, Some(since)) => {
                    let at = deadline.deadline() + since.elapsed();
                    deadline.as_mut().reset(at);
                    waited_since = None;
                }
                _ => {}
            }
            // A cancel is seen before whatever ended at the same time (a tool call it stopped
            // ends with it): the turn stops there rather than going on with that result.
            let next = tokio::select! {
                biased;
                Ok(_) = stop.wait_for(|stop| *stop), if !cancelled => Next::Cancel,
                () = &mut deadline, if !waiting => Next::Timer,
                done = self.inflight.next() => Next::Done(done),
            };
            match next {
                Next::Cancel => {
                    cancelled = true;
                    let steps = self.engine.cancel();
                    self.apply(steps, Vec::new()).await?;
                }
                Next::Done(Some(done)) => self.on_done(done).await?,
                Next::Done(None) => {}
                Next::Timer if !deadline_passed => {
                    deadline_passed = true;
                    let steps = self.engine.on_deadline();
                    self.apply(steps, Vec::new()).await?;
                    deadline.as_mut().reset(Instant::now() + grace(&agency));
                }
                Next::Timer => {
                    let steps = self.engine.cut_off();
                    self.apply(steps, Vec::new()).await?;
                }
            }
        }
        self.ended()
    }

    /// The turn's end, told, once the loop has its answer or failure (its record was written
    /// with it).
    fn ended(mut self) -> Result<TurnOutcome, RuntimeError> {
        let conversation = self.record.conversation_id;
        let turn = self.record.id;
        self.withdraw_approvals();
        if let Some((agent, error)) = self.failure.take() {
            crate::observe::turn_failed(&self.span, &self.agency, self.engine.hops(), &error);
            self.rt.publish(|| Event::TurnFailed {
                conversation,
                turn,
                error: error.clone(),
            });
            let name = self.roster.display(Some(agent)).to_string();
            self.settle_later();
            return Err(RuntimeError::Model { agent, name, error });
        }
        // The loop above ends only with an answer or a failure.
        let (answer, stopped_by) = self
            .answer
            .take()
            .unwrap_or_else(|| (String::new(), agency_core::StopReason::Deadline));
        if stopped_by == StopReason::Budget && self.calls.is_empty() {
            // Refused before any model answered: the request is refused, as the face says.
            self.settle_later();
            return Err(RuntimeError::Budget(answer));
        }
        crate::observe::turn_ended(
            &self.span,
            &self.agency,
            stopped_by,
            self.record.hops,
            &answer,
        );
        self.rt.publish(|| Event::TurnFinished {
            conversation,
            turn,
            stopped_by,
        });
        let outcome = TurnOutcome {
            conversation_id: conversation,
            turn_id: turn,
            number: self.record.number,
            answer,
            stopped_by,
            hops: self.record.hops,
            usage: self.record.usage,
            cost: self.record.cost,
            agent_costs: self.agent_costs(),
            trace: std::mem::take(&mut self.trace),
            roster: self.roster.clone(),
            tool_calls: std::mem::take(&mut self.client_calls),
            approvals: if stopped_by == StopReason::Approval {
                std::mem::take(&mut self.approvals_asked)
            } else {
                Vec::new()
            },
        };
        self.settle_later();
        Ok(outcome)
    }

    /// Agents still working when the turn ended: their replies are persisted and routed (for
    /// the next turn) in the background; the conversation stays locked until they are in.
    fn settle_later(self) {
        if !self.engine.in_flight() {
            self.finish();
            return;
        }
        let rt = self.rt.clone();
        let handle = tokio::spawn(async move {
            let mut run = self;
            let bound = tokio::time::sleep(grace(&run.agency));
            tokio::pin!(bound);
            loop {
                let done = tokio::select! {
                    done = run.inflight.next() => done,
                    () = &mut bound => None,
                };
                let Some(done) = done else {
                    break;
                };
                if let Err(e) = run.on_done(done).await {
                    tracing::error!(error = %e, "could not persist a late reply");
                    return; // the session reloads from the store on the next turn
                }
            }
            run.record.hops = run.engine.hops();
            let record = Write {
                turns: vec![run.record.clone()],
                ..Write::default()
            };
            if let Err(e) = run.rt.store.write(record).await {
                tracing::error!(error = %e, "could not record a turn's late usage");
            }
            run.finish();
        });
        rt.track(handle);
    }

    /// Hands the session back for the next turn.
    fn finish(self) {
        let TurnRun {
            mut guard, session, ..
        } = self;
        guard.put(session);
    }

    async fn on_done(&mut self, done: Done) -> Result<(), RuntimeError> {
        match done {
            Done::Model(agent, result, took) => self.on_completion(agent, result, took).await,
            Done::Refused(agent, why) => {
                let steps = self.engine.out_of_budget(agent, &why);
                self.apply(steps, Vec::new()).await
            }
            Done::Answered(approval) => self.on_answered(*approval).await,
            Done::Tool {
                agent,
                reply,
                call,
                output,
                took,
            } => {
                self.tool_took.insert(
                    (agent, call.id.clone()),
                    u32::try_from(took.as_millis()).unwrap_or(u32::MAX),
                );
                let text = agency_core::tool::clip_result(output.text);
                let steps = self
                    .engine
                    .on_tool_result(agent, reply, &call, text, output.is_error);
                self.apply(steps, Vec::new()).await
            }
        }
    }

    /// What each agent's model calls cost so far, in the order they first answered.
    fn agent_costs(&self) -> Vec<(AgentId, Option<agency_core::Cost>)> {
        agency_core::price::costs_by_caller(self.calls.iter().copied(), |agent| {
            self.agency
                .agent(agent)
                .and_then(|a| self.providers.price(&a.model))
        })
    }

    async fn on_completion(
        &mut self,
        agent: AgentId,
        result: Result<Completion, ModelError>,
        took: Duration,
    ) -> Result<(), RuntimeError> {
        match result {
            Ok(c) => {
                self.record.usage += c.usage;
                // A call of a model without a price makes the turn's cost unknown.
                let price = self
                    .agency
                    .agent(agent)
                    .and_then(|a| self.providers.price(&a.model));
                self.record.cost = self
                    .record
                    .cost
                    .zip(price)
                    .map(|(sum, p)| sum + p.cost(c.usage));
                self.calls.push((agent, c.usage));
                let mut reply = self.message(
                    Some(agent),
                    MessageKind::Reply,
                    Some(agent),
                    None,
                    c.text,
                    None,
                );
                reply.usage = Some(c.usage);
                reply.latency_ms = Some(u32::try_from(took.as_millis()).unwrap_or(u32::MAX));
                // Past the turn's cost cap the manager is told to answer, before this reply
                // is routed (so that it starts no one else).
                let capped = match (self.agency.limits.max_turn_cost, self.record.cost) {
                    (Some(cap), Some(cost)) if cost >= cap => self.engine.on_turn_budget(),
                    _ => Vec::new(),
                };
                let steps = if c.tool_calls.is_empty() {
                    self.engine.on_reply(agent, reply.id, &reply.text)
                } else {
                    let calls = tool::unique_ids(c.tool_calls, reply.seq);
                    let steps = self
                        .engine
                        .on_tool_calls(agent, reply.id, &reply.text, &calls);
                    reply.tool = Some(ToolPart::Calls(calls));
                    steps
                };
                reply.to = self.engine.last_addressee();
                self.reply_usage
                    .insert(reply.id, (c.usage, reply.latency_ms));
                let steps = if capped.is_empty() {
                    steps
                } else {
                    [capped, steps].concat()
                };
                self.apply(steps, vec![reply]).await
            }
            Err(e) => {
                tracing::warn!(agent = agent.get(), error = %e, "a model call failed");
                let steps = self.engine.on_failure(agent, &e.to_string());
                self.apply(steps, Vec::new()).await
            }
        }
    }

    /// Persists `batch` plus the engine's deliveries in one write (with the turn's record when
    /// the turn ends, and a new conversation's row on its first write), then makes them visible
    /// in their contexts, then starts the calls.
    async fn apply(
        &mut self,
        steps: Vec<Step>,
        mut batch: Vec<Message>,
    ) -> Result<(), RuntimeError> {
        let mut invokes = Vec::new();
        let mut tool_calls = Vec::new();
        let mut asks = Vec::new();
        let mut write = Write {
            conversation: self.session.unsaved.take(),
            ..Write::default()
        };
        for step in steps {
            match step {
                Step::Deliver(d) => {
                    let user_input = d.kind == MessageKind::Input && d.from.is_none();
                    let mut m =
                        self.message(Some(d.to), d.kind, d.from, Some(d.to), d.text, d.linked);
                    if user_input {
                        m.images = std::mem::take(&mut self.input_images);
                    }
                    if let Some(result) = d.tool.as_ref().and_then(ToolPart::result) {
                        m.latency_ms = self.tool_took.remove(&(d.to, result.call_id.clone()));
                    }
                    m.tool = d.tool;
                    batch.push(m);
                }
                Step::Invoke(agent) => invokes.push(agent),
                Step::CallTool { agent, reply, call } => tool_calls.push((agent, reply, call)),
                Step::AskApproval { agent, reply, call } => asks.push((agent, reply, call)),
                Step::Answer {
                    text,
                    stopped_by,
                    linked,
                } => {
                    let manager = self.agency.manager;
                    let m = self.message(
                        None,
                        MessageKind::Answer,
                        Some(manager),
                        None,
                        text.clone(),
                        linked,
                    );
                    batch.push(m);
                    let said = ChatMessage::new(Role::Assistant, text.clone());
                    self.end(&mut write, stopped_by, Some(said));
                    self.answer = Some((text, stopped_by));
                }
                Step::Cancelled => {
                    self.end(&mut write, StopReason::Cancelled, None);
                    self.answer = Some((String::new(), StopReason::Cancelled));
                }
                Step::Pause { reply: _, calls } => {
                    let said = ChatMessage::calls("", calls.clone());
                    self.end(&mut write, StopReason::ToolCalls, Some(said));
                    self.client_calls = calls;
                    self.answer = Some((String::new(), StopReason::ToolCalls));
                }
                Step::Fail { agent, error } => {
                    self.record.error = Some(error.clone());
                    write.turns = vec![self.finished_record()];
                    self.failure = Some((agent, error));
                    self.answer_sink = None;
                }
            }
        }
        write.messages = batch;
        let written = self.rt.store.write(write).await?;
        for m in &written.messages {
            for entry in TraceEntry::of(m, |l| self.reply_usage.get(&l).copied()) {
                crate::observe::hop(&self.span, &self.agency, &self.roster, &entry);
                let (conversation, turn) = (self.record.conversation_id, self.record.id);
                self.rt.publish(|| Event::Hop {
                    conversation,
                    turn,
                    entry: entry.clone(),
                });
                self.trace.push(entry);
            }
        }
        self.rt.relay.hops(
            self.record.conversation_id,
            self.record.id,
            &written.messages,
            |l| self.reply_usage.get(&l).copied(),
        );
        self.session.extend(written.messages);
        self.start(invokes, tool_calls, asks).await
    }

    /// Starts what the steps just applied call for: agents' model calls, their tool calls
    /// (an approved one as approved), and the approvals their calls wait for.
    async fn start(
        &mut self,
        invokes: Vec<AgentId>,
        tool_calls: Vec<(AgentId, MessageId, ToolCall)>,
        asks: Vec<(AgentId, MessageId, ToolCall)>,
    ) -> Result<(), RuntimeError> {
        for agent in invokes {
            self.invoke(agent);
        }
        for (agent, reply, call) in tool_calls {
            let approved = self
                .approved
                .iter()
                .position(|a| a.agent == agent && a.reply == reply && a.call.id == call.id)
                .map(|i| self.approved.swap_remove(i));
            match approved {
                Some(approval) => self.call_approved(approval, call.arguments),
                None => self.call_tool(agent, reply, call, None),
            }
        }
        for (agent, reply, call) in asks {
            self.ask_approval(agent, reply, call).await?;
        }
        Ok(())
    }

    /// Runs one of `agent`'s tool calls; its progress goes on the event stream, and a cancel
    /// of the turn stops it with an error result.
    fn call_tool(
        &mut self,
        agent: AgentId,
        reply: MessageId,
        call: ToolCall,
        approved: Option<agency_core::Approval>,
    ) {
        let rt = self.rt.clone();
        let agency = self.agency.clone();
        let mut stop = self.stop.clone();
        let (conversation, turn) = (self.record.conversation_id, self.record.id);
        let progress = rt.listened().then(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ToolProgress>();
            let rt = rt.clone();
            let (tool, call_id) = (call.name.clone(), call.id.clone());
            tokio::spawn(async move {
                while let Some(progress) = rx.recv().await {
                    rt.publish(|| Event::ToolProgress {
                        conversation,
                        turn,
                        agent,
                        tool: tool.clone(),
                        call_id: call_id.clone(),
                        progress,
                    });
                }
            });
            tx
        });
        let parent = self.span.clone();
        let run: Call = Box::pin(async move {
            let cancelled = async move {
                // Gone, the turn cancels nothing any more.
                if stop.wait_for(|stop| *stop).await.is_err() {
                    std::future::pending::<()>().await;
                }
                "Cancelled: the turn was cancelled while the tool ran."
            };
            let scope = (&*agency).into();
            let (output, took) = match approved {
                None => {
                    crate::call::tool(&rt.tools, scope, &parent, &call, progress, cancelled).await
                }
                Some(approval) => {
                    let on = rt.clone();
                    let run = move |c: ToolCall| async move {
                        crate::call::tool(&on.tools, scope, &parent, &c, progress, cancelled).await
                    };
                    crate::approvals::run_once(&rt, &approval, &call.arguments, run).await
                }
            };
            Done::Tool {
                agent,
                reply,
                call,
                output,
                took,
            }
        });
        self.inflight.push(run);
    }

    /// The run ends `stopped_by`: its record goes with `write`, with an API request's
    /// transcript up to `last` (the answer, or the calls the turn pauses on), and the answer's
    /// stream closes (it ends with the turn, not with late replies).
    fn end(&mut self, write: &mut Write, stopped_by: StopReason, last: Option<ChatMessage>) {
        self.record.stopped_by = Some(stopped_by);
        write.turns = vec![self.finished_record()];
        if let Some(last) = last {
            let (conversation, number) = (self.session.conversation, self.record.number);
            write.thread = self
                .api
                .take()
                .map(|api| api.thread.ended(conversation, number, last));
        }
        self.answer_sink = None;
    }

    /// The turn's record as it ends now.
    fn finished_record(&mut self) -> TurnRecord {
        self.record.finished_at = Some(Utc::now());
        self.record.hops = self.engine.hops();
        self.record.clone()
    }

    /// For a manager's call while the answer streams: a channel for the call's text whose
    /// answer part (see [`AnswerStream`]) goes on to the answer's sink.
    fn answer_deltas(&self, agent: AgentId) -> Option<tokio::sync::mpsc::UnboundedSender<String>> {
        let sink = self
            .answer_sink
            .clone()
            .filter(|_| agent == self.agency.manager)?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut extract = AnswerStream::new(self.agency.protocol);
        tokio::spawn(async move {
            while let Some(delta) = rx.recv().await {
                let text = extract.push(&delta);
                if !text.is_empty() && sink.send(text).is_err() {
                    return;
                }
            }
        });
        Some(tx)
    }

    /// Tells the provider's retries of `agent`'s call to the call's observer (its span and
    /// metrics) and, while anyone listens, to the event stream.
    fn retry_hook(
        &self,
        agent: AgentId,
        observer: Arc<crate::observe::ModelCallObserver>,
    ) -> agency_providers::http::RetryHook {
        let rt = self.rt.clone();
        let (conversation, turn) = (self.record.conversation_id, self.record.id);
        agency_providers::http::RetryHook::new(move |r| {
            observer.retry(r.attempt, &r.reason);
            rt.publish(|| Event::ModelRetry {
                conversation,
                turn,
                agent,
                attempt: r.attempt,
                reason: r.reason,
            });
        })
    }

    fn invoke(&mut self, agent: AgentId) {
        let context = self
            .session
            .contexts
            .get(&agent)
            .cloned()
            .unwrap_or_default();
        let price = self
            .agency
            .agent(agent)
            .and_then(|a| self.providers.price(&a.model));
        let observer = Arc::new(crate::observe::ModelCallObserver::agent(
            &self.span,
            &self.agency,
            agent,
            &context,
            price,
        ));
        let paid = self.payer.clone().map(|payer| {
            let max = self.agency.agent(agent).and_then(|a| a.sampling.max_tokens);
            crate::spend::Paid::of(payer, price, &context, max)
        });
        let request = ModelRequest {
            answer_schema: None,
            agency: self.agency.clone(),
            roster: self.roster.clone(),
            agent,
            context,
            deltas: self.answer_deltas(agent),
            on_retry: Some(self.retry_hook(agent, observer.clone())),
            tools: Arc::default(),
            tool_use: ToolUse::default(),
        };
        // The manager is asked natively for the client's strict schema, where it can be.
        let answer_schema = match &self.api {
            Some(api) if agent == self.agency.manager => {
                api.format.as_ref().and_then(|f| f.native_schema())
            }
            _ => None,
        };
        let offered = self.engine.offers_tools(agent);
        let client = self.client_tools(agent);
        let (rt, agency) = (self.rt.clone(), self.agency.clone());
        let (providers, model) = (
            self.providers.clone(),
            self.agency.agent(agent).map(|a| a.model.clone()),
        );
        let call: Call = Box::pin(async move {
            let mut request = request;
            request.answer_schema = answer_schema;
            let mut tools = if offered {
                rt.tools.of_agent(&agency, agent).await
            } else {
                Vec::new()
            };
            if let Some((client, tool_use)) = client {
                tools.extend(client.iter().cloned());
                request.tool_use = tool_use;
            }
            request.tools = Arc::new(tools);
            let Some(model) = model else {
                let result = Err(ModelError::Failed {
                    provider: "agency".into(),
                    message: format!("no agent #{}", agent.get()),
                });
                observer.finish(&result, 0.0);
                return Done::Model(agent, result, Duration::ZERO);
            };
            let asking = crate::call::Asking::Routed(request);
            let (result, took) = match paid {
                None => crate::call::model(&providers, &model, &observer, asking).await,
                Some(paid) => {
                    let spending = &rt.spending;
                    match crate::call::paid(spending, paid, &providers, &model, &observer, asking)
                        .await
                    {
                        Ok(done) => done,
                        Err(e) => return Done::Refused(agent, e.to_string()),
                    }
                }
            };
            Done::Model(agent, result, took)
        });
        self.inflight.push(call);
        let (conversation, turn) = (self.record.conversation_id, self.record.id);
        self.rt.publish(|| Event::AgentStarted {
            conversation,
            turn,
            agent,
        });
    }

    /// The client's tools `agent` is offered besides its own, and how: the manager has them
    /// (the client's choice binds its first call), unless it was told to answer now and is
    /// offered no tools at all ([`TurnEngine::offers_tools`]).
    fn client_tools(&mut self, agent: AgentId) -> Option<(Arc<Vec<Tool>>, ToolUse)> {
        match &self.api {
            Some(api)
                if agent == self.agency.manager
                    && !api.tools.is_empty()
                    && self.engine.offers_tools(agent) =>
            {
                let mut tool_use = api.tool_use.clone();
                if !std::mem::take(&mut self.first_call) {
                    tool_use.choice = ToolChoice::Auto;
                }
                Some((api.tools.clone(), tool_use))
            }
            _ => None,
        }
    }

    fn message(
        &mut self,
        agent: Option<AgentId>,
        kind: MessageKind,
        from: Option<AgentId>,
        to: Option<AgentId>,
        text: String,
        linked: Option<MessageId>,
    ) -> Message {
        let turn = Some(self.record.id);
        self.session
            .message(turn, agent, kind, from, to, text, linked)
    }
}

fn grace(agency: &Agency) -> Duration {
    agency.limits.turn_deadline.min(MAX_GRACE)
}

mod approve;
mod opening;
use approve::{resume_approvals, withdraw_left};
use opening::{agency_of, engine_for, opening};
