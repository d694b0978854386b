//! How a turn opens: a new turn, or one resumed — paused on approvals (answers bring it
//! back, see `approve.rs`) or on the client's tools (the paused turn a request's results
//! resume, each call matched with its result).

use std::sync::Arc;

use agency_core::engine::{Held, Step, TurnEngine};
use agency_core::{
    Agency, AgentId, Face, Message, StopReason, ToolCall, TurnId, TurnRecord, Usage, tool,
};
use chrono::Utc;

use crate::api::ApiTurn;
use crate::session::{Session, TurnInput};
use crate::{Runtime, RuntimeError};

/// What a turn given `input` (the user's text, the client's results, answers to approvals,
/// the face; its images are the caller's) opens with: its record and the engine's first steps. Answers resume the turn
/// paused on those approvals (with the calls it held), results the turn paused on the
/// client's tools; anything else starts a new turn.
pub(super) async fn opening(
    rt: &Runtime,
    session: &mut Session,
    engine: &mut TurnEngine,
    (manager, batch): (AgentId, &[Message]),
    input: TurnInput,
    unanswered: Vec<AgentId>,
) -> Result<(TurnRecord, Vec<Step>, Vec<(agency_core::Approval, Held)>), RuntimeError> {
    let TurnInput {
        text,
        results,
        approvals,
        face,
        ..
    } = input;
    if !approvals.is_empty() {
        return super::resume_approvals(rt, session, engine, approvals, unanswered).await;
    }
    if results.is_empty() {
        // Only after a pause (or a crash) do agents wait for something: then, and only then,
        // are their turns' approvals read.
        if !unanswered.is_empty() {
            super::withdraw_left(rt, session, &unanswered).await?;
        }
        let steps = engine.start(text, unanswered);
        return Ok((new_record(session, face), steps, Vec::new()));
    }
    let given = (text, results, face);
    let (record, steps) =
        resume_client(rt, session, engine, (manager, batch), given, unanswered).await?;
    Ok((record, steps, Vec::new()))
}

/// The record of the conversation's next turn.
fn new_record(session: &mut Session, face: Option<agency_core::Face>) -> TurnRecord {
    session.turns += 1;
    TurnRecord {
        id: TurnId::new(),
        conversation_id: session.conversation,
        number: session.turns,
        started_at: Utc::now(),
        finished_at: None,
        stopped_by: None,
        hops: 0,
        usage: Usage::default(),
        cost: Some(agency_core::Cost::default()),
        error: None,
        face,
    }
}

/// Results of the client's tools (`given`: with the user's text sent along, and the face):
/// the turn that paused on them goes on, or a new one starts from them when it waited too
/// long. The record, and the engine's first steps.
async fn resume_client(
    rt: &Runtime,
    session: &mut Session,
    engine: &mut TurnEngine,
    (manager, batch): (AgentId, &[Message]),
    (text, results, face): (String, Vec<(String, String)>, Option<Face>),
    unanswered: Vec<AgentId>,
) -> Result<(TurnRecord, Vec<Step>), RuntimeError> {
    let Some((reply, waiting)) = session.waiting_calls(manager, batch) else {
        return Err(RuntimeError::Invalid(
            "messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
                .into(),
        ));
    };
    let results = answer(waiting, results)?;
    let (record, hops) = match paused_record(rt, session).await? {
        Some(r) => {
            let hops = r.hops;
            (r, hops)
        }
        None => (new_record(session, face), 0),
    };
    let text = Some(text).filter(|t| !t.trim().is_empty());
    let steps = engine.resume(hops, reply, results, text, unanswered);
    Ok((record, steps))
}

/// The conversation's latest turn, when it paused on the client's tools and has not waited
/// too long: it goes on (running again).
pub(super) async fn paused_record(
    rt: &Runtime,
    session: &Session,
) -> Result<Option<TurnRecord>, RuntimeError> {
    // A conversation not written yet (its calls seeded from the request) has no turns.
    if session.unsaved.is_some() || session.turns == 0 {
        return Ok(None);
    }
    let Some(last) = rt.store.last_turn(session.conversation).await? else {
        return Ok(None);
    };
    let wait = chrono::Duration::from_std(rt.client_tools_wait()).unwrap_or(chrono::Duration::MAX);
    let waiting = last.stopped_by == Some(StopReason::ToolCalls)
        && last.number == session.turns
        && last.finished_at.is_some_and(|at| Utc::now() - at <= wait);
    Ok(waiting.then_some(TurnRecord {
        finished_at: None,
        stopped_by: None,
        ..last
    }))
}

/// Each call `waiting` with its result from `results` (call id, text): every call needs one,
/// and every result a call (OpenAI's rules, in its words).
pub(super) fn answer(
    waiting: Vec<ToolCall>,
    mut results: Vec<(String, String)>,
) -> Result<Vec<(ToolCall, String, bool)>, RuntimeError> {
    let mut out = Vec::with_capacity(waiting.len());
    let mut missing = Vec::new();
    for call in waiting {
        match results.iter().position(|(id, _)| *id == call.id) {
            Some(i) => {
                let (_, text) = results.swap_remove(i);
                out.push((call, tool::clip_result(text), false));
            }
            None => missing.push(call.id),
        }
    }
    if !missing.is_empty() {
        return Err(RuntimeError::Invalid(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            missing.join(", ")
        )));
    }
    if let Some((id, _)) = results.first() {
        return Err(RuntimeError::Invalid(format!(
            "Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (no call `{id}` waits for a result)."
        )));
    }
    Ok(out)
}

/// The turn's engine: the manager may call the client's tools too, and its answer must pass
/// the client's answer format.
pub(super) fn engine_for(agency: &Agency, api: Option<&ApiTurn>) -> TurnEngine {
    let engine = TurnEngine::new(agency);
    let Some(api) = api else { return engine };
    let engine = engine.with_client_tools(api.tools.iter().map(|t| t.name.clone()));
    match api.format.clone() {
        Some(format) => engine.with_answer_check(Arc::new(format)),
        None => engine,
    }
}

/// The agency the session's turn runs on (its draft, or its published version), with its
/// roster and providers. A conversation with one agent alone (see
/// `Conversations::start_as`) runs on that agent as the whole agency.
pub(super) async fn agency_of(
    rt: &Runtime,
    session: &Session,
) -> Result<crate::AgencyView, RuntimeError> {
    let crate::AgencyView {
        agency,
        roster,
        providers,
    } = rt
        .agencies()
        .current(session.agency_id, session.version.is_some())
        .await?;
    let (agency, roster) = match session.solo(agency.manager) {
        None => (agency, roster),
        Some(agent) => {
            let solo = agency.solo(agent).ok_or_else(|| {
                RuntimeError::Invalid(format!(
                    "agent {agent} of this conversation has left agency `{}`",
                    agency.name
                ))
            })?;
            let roster = Arc::new(solo.roster());
            (Arc::new(solo), roster)
        }
    };
    Ok(crate::AgencyView {
        agency,
        roster,
        providers,
    })
}
