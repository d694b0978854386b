//! A person's approval before a tool acts (issue 36), on SQLite and PostgreSQL: a call the
//! agent's policy names waits for an answer given through the runtime's approvals (as the
//! management API gives it); approved it runs once, denied or timed out it is not run and
//! the agent reads why; a second answer changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use agency_core::approval::Answer;
use agency_core::{Approval, ApprovalState, MessageKind, ToolPart};
use agency_runtime::{LOCAL_OWNER, RuntimeError, TurnOutcome};
use common::{Act, Harness, Script, agent, draft};

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Harness::sqlite().await).await; })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some(url) = agency_store::testing::postgres_url().await else { return };
                super::$name(super::Harness::on(url, None).await).await;
            })*
        }
    };
}

both!(
    an_approved_call_runs_once_and_a_second_answer_changes_nothing,
    a_denied_call_is_not_run_and_its_agent_reads_why,
    an_unanswered_call_gets_what_the_policy_says_at_its_timeout,
    edits_are_refused_where_the_policy_does_not_allow_them,
    edited_arguments_are_what_the_call_runs_with,
    a_cancelled_turn_withdraws_what_it_waited_for,
);

/// A manager that echoes with approval, then answers with what it read.
async fn start(
    h: &Harness,
    timeout: Option<u64>,
    edits: bool,
) -> (
    Arc<Script>,
    tokio::task::JoinHandle<Result<TurnOutcome, RuntimeError>>,
) {
    let model = h.script(
        "boss",
        vec![
            Act::Call(vec![("c1", "builtin/echo", r#"{"text": "hi"}"#)]),
            Act::Say(r#"{"to": 0, "context": "done"}"#),
        ],
    );
    let mut boss = agent(1, "boss", "script/boss", &[]);
    boss.tools = vec!["builtin/*".into()];
    boss.approve = vec!["builtin/echo".into()];
    boss.approve_timeout_secs = timeout;
    boss.approve_edits = Some(edits);
    let agency = h.agency(draft("json", 16, vec![boss])).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let rt = h.rt.clone();
    let turn = tokio::spawn(async move { rt.send(c.id, "go".into()).await });
    (model, turn)
}

/// The one approval pending, once the turn asked for it.
async fn pending(h: &Harness) -> Approval {
    for _ in 0..500 {
        let mut pending = h.rt.approvals().pending(LOCAL_OWNER).await.unwrap();
        if let Some(a) = pending.pop() {
            assert!(pending.is_empty());
            return a;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no approval was asked for");
}

fn answer(approve: bool, reason: Option<&str>, arguments: Option<&str>) -> Answer {
    Answer {
        approve,
        reason: reason.map(str::to_string),
        arguments: arguments.map(str::to_string),
        by: "ada@example.com".into(),
    }
}

/// The tool results the manager's last call read: (text, is_error).
fn results(model: &Script) -> Vec<(String, bool)> {
    let seen = model.seen.lock().unwrap();
    seen.last()
        .unwrap()
        .iter()
        .filter_map(|m| match &m.tool {
            Some(ToolPart::Result(r)) => Some((m.text.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

async fn an_approved_call_runs_once_and_a_second_answer_changes_nothing(h: Harness) {
    let (model, turn) = start(&h, None, false).await;
    let asked = pending(&h).await;
    assert_eq!(asked.call.name, "builtin/echo");
    assert_eq!(asked.call.arguments, r#"{"text": "hi"}"#);
    assert_eq!(asked.state, ApprovalState::Pending);
    // Waiting for a person is not run time: the agency's deadline (1 s) passes meanwhile.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(model.seen.lock().unwrap().len(), 1, "nobody called yet");
    let given =
        h.rt.approvals()
            .answer(LOCAL_OWNER, asked.id, answer(true, None, None))
            .await
            .unwrap();
    assert_eq!(given.state, ApprovalState::Approved);
    assert_eq!(given.answered_by.as_deref(), Some("ada@example.com"));
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.answer, "done");
    assert_eq!(results(&model), [("hi".to_string(), false)]);
    let kept = h.store.approval(asked.id).await.unwrap().unwrap();
    assert!(
        kept.started_at.is_some(),
        "marked started before it went out"
    );
    assert_eq!(kept.result, Some(("hi".to_string(), false)));
    // A second answer (another click, another server) changes nothing.
    let again =
        h.rt.approvals()
            .answer(LOCAL_OWNER, asked.id, answer(false, Some("no"), None))
            .await;
    assert!(matches!(again, Err(RuntimeError::Conflict(_))), "{again:?}");
    let kept = h.store.approval(asked.id).await.unwrap().unwrap();
    assert_eq!(kept.state, ApprovalState::Approved);
    assert!(kept.reason.is_none());
    // Another account's approvals do not exist for it.
    let other = h.rt.approvals().get("someone-else", asked.id).await;
    assert!(matches!(other, Err(RuntimeError::NotFound(_))), "{other:?}");
    assert!(
        h.rt.approvals()
            .pending(LOCAL_OWNER)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_denied_call_is_not_run_and_its_agent_reads_why(h: Harness) {
    let (model, turn) = start(&h, None, false).await;
    let asked = pending(&h).await;
    h.rt.approvals()
        .answer(
            LOCAL_OWNER,
            asked.id,
            answer(false, Some("not on a Friday"), None),
        )
        .await
        .unwrap();
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.answer, "done");
    assert_eq!(
        results(&model),
        [(
            "Not run: a person denied it. Their reason: not on a Friday".to_string(),
            true
        )]
    );
    let kept = h.store.approval(asked.id).await.unwrap().unwrap();
    assert_eq!(kept.state, ApprovalState::Denied);
    assert!(
        kept.started_at.is_none() && kept.result.is_none(),
        "never run"
    );
    // The trace shows the denial as the call's result.
    let denied = out
        .trace
        .iter()
        .find(|e| e.kind == MessageKind::ToolResult)
        .unwrap();
    assert!(denied.tool.as_ref().unwrap().is_error);
}

async fn an_unanswered_call_gets_what_the_policy_says_at_its_timeout(h: Harness) {
    let (model, turn) = start(&h, Some(1), false).await;
    let asked = pending(&h).await;
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.answer, "done");
    assert_eq!(
        results(&model),
        [("Not run: nobody approved it in time.".to_string(), true)]
    );
    let kept = h.store.approval(asked.id).await.unwrap().unwrap();
    assert_eq!(kept.state, ApprovalState::Denied);
    assert_eq!(kept.answered_by.as_deref(), Some("timeout"));
    // Too late for a person: the timeout's answer stands.
    let late =
        h.rt.approvals()
            .answer(LOCAL_OWNER, asked.id, answer(true, None, None))
            .await;
    assert!(matches!(late, Err(RuntimeError::Conflict(_))), "{late:?}");
}

async fn edits_are_refused_where_the_policy_does_not_allow_them(h: Harness) {
    let (_, turn) = start(&h, None, false).await;
    let asked = pending(&h).await;
    let refused =
        h.rt.approvals()
            .answer(
                LOCAL_OWNER,
                asked.id,
                answer(true, None, Some(r#"{"text": "bye"}"#)),
            )
            .await;
    assert!(
        matches!(refused, Err(RuntimeError::Validation(_))),
        "{refused:?}"
    );
    h.rt.approvals()
        .answer(LOCAL_OWNER, asked.id, answer(false, None, None))
        .await
        .unwrap();
    turn.await.unwrap().unwrap();
}

async fn edited_arguments_are_what_the_call_runs_with(h: Harness) {
    let (model, turn) = start(&h, None, true).await;
    let asked = pending(&h).await;
    let not_an_object =
        h.rt.approvals()
            .answer(LOCAL_OWNER, asked.id, answer(true, None, Some("[1]")))
            .await;
    assert!(matches!(not_an_object, Err(RuntimeError::Validation(_))));
    h.rt.approvals()
        .answer(
            LOCAL_OWNER,
            asked.id,
            answer(true, None, Some(r#"{"text": "bye"}"#)),
        )
        .await
        .unwrap();
    turn.await.unwrap().unwrap();
    let (text, is_error) = results(&model).pop().unwrap();
    assert!(!is_error);
    assert!(
        text.starts_with("(A person changed the arguments") && text.ends_with("bye"),
        "{text}"
    );
}

/// Two servers on one PostgreSQL: a turn waiting on server A for an approval goes on when a
/// person approves on server B (A hears it through the relay), and the call runs once, on A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_given_on_another_server_resumes_the_turn_waiting_on_this_one() {
    let Some(url) = agency_store::testing::postgres_url().await else {
        return;
    };
    let a = Harness::on(url.clone(), None).await;
    let b = Harness::on(url, None).await;
    a.rt.hear_others().await.unwrap();
    b.rt.hear_others().await.unwrap();
    let (model, turn) = start(&a, None, false).await;
    let asked = pending(&b).await;
    b.rt.approvals()
        .answer(LOCAL_OWNER, asked.id, answer(true, None, None))
        .await
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), turn)
        .await
        .expect("the turn on A heard the approval given on B")
        .unwrap()
        .unwrap();
    assert_eq!(out.answer, "done");
    assert_eq!(results(&model), [("hi".to_string(), false)]);
    let kept = b.store.approval(asked.id).await.unwrap().unwrap();
    assert_eq!(kept.result, Some(("hi".to_string(), false)));
}

async fn a_cancelled_turn_withdraws_what_it_waited_for(h: Harness) {
    let (_, turn) = start(&h, None, false).await;
    let asked = pending(&h).await;
    assert!(h.rt.cancel(asked.conversation));
    let out = turn.await.unwrap().unwrap();
    assert_eq!(out.stopped_by, agency_core::StopReason::Cancelled);
    // Nobody is asked about a call that can no longer run.
    for _ in 0..500 {
        if h.rt
            .approvals()
            .pending(LOCAL_OWNER)
            .await
            .unwrap()
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let kept = h.store.approval(asked.id).await.unwrap().unwrap();
    assert_eq!(kept.state, ApprovalState::Denied);
    assert_eq!(kept.answered_by.as_deref(), Some("turn ended"));
    assert!(kept.started_at.is_none());
    let late =
        h.rt.approvals()
            .answer(LOCAL_OWNER, asked.id, answer(true, None, None))
            .await;
    assert!(matches!(late, Err(RuntimeError::Conflict(_))), "{late:?}");
}
