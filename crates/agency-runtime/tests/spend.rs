//! Spend limits (issue 35): budgets on keys, their end users, agencies and turns, held before
//! each model call by a reservation, across concurrent requests and across servers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::sync::{Arc, Mutex};

use agency_core::{
    Agency, AgencyDraft, ApiKey, ChatMessage, Cost, KeyBudgets, Period, PriceDraft, ProviderDraft,
    Role, StopReason,
};
use agency_fakes::{Fake, openai};
use agency_runtime::api::ChatTurn;
use agency_runtime::{Ask, Caller, RuntimeError, TurnRequest};
use chrono::{DateTime, Utc};
use common::Harness;

/// What one call of the fake costs: 100 prompt tokens at $10/M, 20 completion at $30/M.
const CALL: Cost = Cost(100 * 10_000_000 + 20 * 30_000_000);
/// The most a call may answer (what it reserves of output).
const MAX_TOKENS: u32 = 100;

/// An agency whose manager `boss` (and worker) run on the fake at $10/$30 per million.
fn priced(fake: &Fake) -> AgencyDraft {
    let mut d = common::draft(
        "json",
        16,
        vec![
            common::agent(1, "boss", "local/model-x", &[]),
            common::agent(2, "worker", "local/model-x", &[]),
        ],
    );
    for a in &mut d.agents {
        a.max_tokens = Some(MAX_TOKENS);
    }
    d.turn_deadline_secs = Some(60);
    d.providers = vec![ProviderDraft {
        name: "local".into(),
        kind: "openai".into(),
        base_url: Some(format!("{}/v1", fake.url)),
        prices: vec![(
            "model-x".into(),
            PriceDraft {
                input: "10".into(),
                output: "30".into(),
            },
        )],
        ..Default::default()
    }];
    d
}

async fn answering_fake() -> Fake {
    let fake = Fake::start().await;
    fake.unrecorded()
        .otherwise(openai::completion(r#"{"to": 0, "context": "hi"}"#, 100, 20));
    fake
}

fn chat(key: &ApiKey, agency: &Agency, text: &str, user: Option<&str>) -> TurnRequest {
    TurnRequest {
        caller: Caller::Key(key.clone()),
        ask: Ask::Chat {
            agency: Arc::new(agency.clone()),
            turn: Box::new(ChatTurn {
                input: vec![ChatMessage::new(Role::User, text)],
                end_user: user.map(Into::into),
                ..ChatTurn::default()
            }),
        },
        stream_text: false,
        progress: false,
        face: agency_core::Face::ChatCompletions,
    }
}

async fn ask(
    h: &Harness,
    key: &ApiKey,
    agency: &Agency,
    text: &str,
    user: Option<&str>,
) -> Result<agency_runtime::TurnOutcome, RuntimeError> {
    h.rt.begin(chat(key, agency, text, user))
        .await?
        .outcome()
        .await
}

fn budgets(usd: Option<&str>, user: Option<&str>, period: Period) -> KeyBudgets {
    agency_runtime::spend::key_budgets(usd, Some(period.as_str()), user).unwrap()
}

/// What a key spent in its current period (settled, reserved).
async fn spent(h: &Harness, key: &ApiKey) -> (Cost, Cost) {
    let (periods, _) = h.rt.spend().of_key(key).await.unwrap();
    let start = h.rt.spend().period_start(key.budgets.period);
    periods
        .iter()
        .find(|p| p.period_start == start)
        .map_or((Cost(0), Cost(0)), |p| (p.spent, p.reserved))
}

/// 64 requests at once on a key with a $0.01 budget, spread over `servers` (one store): what
/// they spent passes the budget by at most one call's reservation, and every refusal names the
/// key's budget and when it renews.
async fn race(servers: &[&Harness], fake: &Fake) {
    let agency = servers[0].agency(priced(fake)).await;
    let auth = servers[0].rt.authenticator().await.unwrap();
    let (key, _) = auth
        .create_key(
            &agency,
            "app",
            None,
            Some(100_000),
            budgets(Some("0.01"), None, Period::Day),
        )
        .await
        .unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let h = servers[i % servers.len()];
            let (rt, key, agency) = (h.rt.clone(), key.clone(), agency.clone());
            tokio::spawn(async move {
                rt.begin(chat(&key, &agency, &format!("question {i}"), None))
                    .await?
                    .outcome()
                    .await
            })
        })
        .collect();
    let (mut answered, mut refused) = (0u64, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(out) => {
                assert_eq!(out.answer, "hi");
                answered += 1;
            }
            Err(RuntimeError::Budget(m)) => {
                assert!(m.contains("API key `app`'s budget of $0.01 a day"), "{m}");
                assert!(m.contains("renews at"), "{m}");
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        answered >= 1 && refused >= 1,
        "{answered} answered, {refused} refused"
    );
    let (total, reserved) = spent(servers[0], &key).await;
    assert_eq!(reserved, Cost(0), "every reservation was settled");
    assert_eq!(
        total,
        Cost(CALL.0 * answered),
        "each answered turn made one call"
    );
    // One call reserves at most its context (under 3,000 characters: 1,000 tokens) at $10/M
    // and its largest answer at $30/M.
    let one_reservation = 1_000 * 10_000_000 + u64::from(MAX_TOKENS) * 30_000_000;
    let budget = 10_000 * 1_000_000;
    assert!(
        total.0 <= budget + one_reservation,
        "spent {total} of $0.01 ({answered} calls)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keys_budget_holds_with_64_requests_at_once() {
    let fake = answering_fake().await;
    let h = Harness::sqlite().await;
    race(&[&h], &fake).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keys_budget_holds_across_servers_on_one_postgres() {
    let Some(url) = agency_store::testing::postgres_url().await else {
        return;
    };
    let fake = answering_fake().await;
    let a = Harness::on(url.clone(), None).await;
    let b = Harness::on(url.clone(), None).await;
    let c = Harness::on(url, None).await;
    race(&[&a, &b, &c], &fake).await;
}

#[tokio::test]
async fn one_end_user_spent_leaves_the_others_served() {
    let fake = answering_fake().await;
    let h = Harness::sqlite().await;
    let agency = h.agency(priced(&fake)).await;
    let auth = h.rt.authenticator().await.unwrap();
    // Each end user may spend $0.002: two calls ($0.0016 each), the second passing it.
    let (key, _) = auth
        .create_key(
            &agency,
            "app",
            None,
            None,
            budgets(None, Some("0.002"), Period::Month),
        )
        .await
        .unwrap();
    for i in 0..2 {
        ask(&h, &key, &agency, &format!("ann {i}"), Some("ann"))
            .await
            .unwrap();
    }
    match ask(&h, &key, &agency, "ann again", Some("ann")).await {
        Err(RuntimeError::Budget(m)) => {
            assert!(m.contains("end user `ann`'s budget"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let out = ask(&h, &key, &agency, "bob", Some("bob")).await.unwrap();
    assert_eq!(out.answer, "hi");
    // A request naming no end user is paid by no end user's budget.
    ask(&h, &key, &agency, "nobody", None).await.unwrap();
    let (_, users) = h.rt.spend().of_key(&key).await.unwrap();
    let of = |name: &str| users.iter().find(|(u, _)| u == name).unwrap().1.spent;
    assert_eq!(of("ann"), Cost(CALL.0 * 2));
    assert_eq!(of("bob"), CALL);
}

#[tokio::test]
async fn a_turn_past_its_cost_cap_is_answered_at_once() {
    let fake = Fake::start().await;
    // The team would go on: the manager sends the worker work, the worker sends it back.
    fake.push(openai::completion(r#"{"to": 2, "context": "go"}"#, 100, 20))
        .push(openai::completion(
            r#"{"to": 1, "context": "more"}"#,
            100,
            20,
        ))
        .push(openai::completion(
            r#"{"to": 0, "context": "the best I have"}"#,
            100,
            20,
        ))
        .otherwise(openai::completion(
            r#"{"to": 2, "context": "go on"}"#,
            100,
            20,
        ));
    let h = Harness::sqlite().await;
    let mut d = priced(&fake);
    d.max_turn_cost_usd = Some("0.003".into());
    d.max_hops = Some(100);
    let agency = h.agency(d).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    let out = h.rt.send(c.id, "work".into()).await.unwrap();
    assert_eq!(out.stopped_by, StopReason::Budget);
    assert_eq!(out.answer, "the best I have");
    assert_eq!(
        fake.requests().len(),
        3,
        "the manager, the worker, the manager told to answer"
    );
    let turns = h.store.turns(c.id).await.unwrap();
    assert_eq!(turns[0].stopped_by, Some(StopReason::Budget));
    // The guard told the manager why.
    let guard = h
        .store
        .messages(c.id)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.kind == agency_core::MessageKind::Guard)
        .unwrap();
    assert!(guard.text.contains("cost limit"), "{}", guard.text);
}

#[tokio::test]
async fn periods_roll_over_and_a_raised_budget_applies_at_once() {
    use secrecy::ExposeSecret;
    let fake = answering_fake().await;
    let h = Harness::sqlite().await;
    let now = Arc::new(Mutex::new(
        DateTime::parse_from_rfc3339("2026-03-10T23:00:00Z")
            .unwrap()
            .with_timezone(&Utc),
    ));
    let clock = now.clone();
    h.rt.spend()
        .set_clock(Arc::new(move || *clock.lock().unwrap()));
    let agency = h.agency(priced(&fake)).await;
    let auth = h.rt.authenticator().await.unwrap();
    let (_, plain) = auth
        .create_key(
            &agency,
            "app",
            None,
            None,
            budgets(Some("0.001"), None, Period::Day),
        )
        .await
        .unwrap();
    let plain = plain.expose_secret().to_string();
    let key = || async { auth.authenticate(Some(&plain)).await.unwrap() };
    // One call passes $0.001: then the day's budget is spent.
    ask(&h, &key().await, &agency, "one", None).await.unwrap();
    match ask(&h, &key().await, &agency, "two", None).await {
        Err(RuntimeError::Budget(m)) => {
            assert!(m.contains("renews at 2026-03-11 00:00 UTC"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    // The next day it is renewed.
    *now.lock().unwrap() = DateTime::parse_from_rfc3339("2026-03-11T00:00:01Z")
        .unwrap()
        .with_timezone(&Utc);
    ask(&h, &key().await, &agency, "three", None).await.unwrap();
    assert!(ask(&h, &key().await, &agency, "four", None).await.is_err());
    // Raised, it serves again at once.
    let raised = auth
        .set_budgets(agency.id, "app", budgets(Some("1"), None, Period::Day))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raised.budgets.usd, Some(1_000_000));
    ask(&h, &key().await, &agency, "five", None).await.unwrap();
    // The key's days, newest first.
    let (periods, _) = h.rt.spend().of_key(&key().await).await.unwrap();
    let days: Vec<(String, Cost)> = periods
        .iter()
        .map(|p| (p.period_start.format("%m-%d").to_string(), p.spent))
        .collect();
    assert_eq!(
        days,
        [
            ("03-11".to_string(), Cost(CALL.0 * 2)),
            ("03-10".to_string(), CALL)
        ]
    );
}

#[tokio::test]
async fn an_agencys_budget_holds_for_the_playground_and_needs_prices() {
    let fake = answering_fake().await;
    let h = Harness::sqlite().await;
    let mut d = priced(&fake);
    d.budget_usd = Some("0.001".into());
    d.budget_period = Some("total".into());
    let agency = h.agency(d.clone()).await;
    let c = h.rt.conversations().start(&agency).await.unwrap();
    h.rt.send(c.id, "one".into()).await.unwrap();
    match h.rt.send(c.id, "two".into()).await {
        Err(RuntimeError::Budget(m)) => {
            assert!(m.contains("agency `team`'s budget of $0.001"), "{m}");
            assert!(m.contains("does not renew"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    // Refused before anything was stored.
    let inputs: Vec<String> = h
        .store
        .messages(c.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.kind == agency_core::MessageKind::Input)
        .map(|m| m.text)
        .collect();
    assert_eq!(inputs, ["one"]);
    let spent = h.rt.spend().of_agency(agency.id).await.unwrap();
    assert_eq!(spent.len(), 1);
    assert_eq!(spent[0].spent, CALL);

    // A model without a price cannot be held to a budget: refused at its field.
    d.name = "unpriced".into();
    d.agents[1].model = "local/model-y".into();
    match h.rt.agencies().save(&d, agency_runtime::LOCAL_OWNER).await {
        Err(RuntimeError::Validation(v)) => {
            assert_eq!(v.0[0].path, "agents[1].model", "{v}");
            assert!(v.0[0].message.contains("has no price"), "{v}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_agencys_budget_holds_for_its_rooms() {
    // A room made of an agency's agents spends from the agency's budget: the call past it is
    // not made, and the room says why in the agent's place (Retry stays possible). A room's
    // agent is asked streamed.
    let fake = Fake::start().await;
    fake.unrecorded()
        .otherwise(openai::stream(&["hi"], 100, 20));
    let h = Harness::sqlite().await;
    let mut d = priced(&fake);
    d.budget_usd = Some("0.001".into());
    d.budget_period = Some("total".into());
    let agency = h.agency(d).await;
    let owner = agency_runtime::LOCAL_OWNER;
    let (room, participants) =
        h.rt.rooms()
            .create(owner, "team room", Some(agency.id))
            .await
            .unwrap();
    let boss = participants.iter().find(|p| p.name == "boss").unwrap().id;
    let ask = |text: &'static str| {
        let rt = h.rt.clone();
        async move {
            let posted = rt
                .rooms()
                .post(owner, room.id, &format!("@boss {text}"), None)
                .await
                .unwrap();
            posted.answers().await.1
        }
    };
    let first = ask("one").await;
    assert_eq!(first.len(), 1);
    assert!(
        matches!(first[0].author, agency_core::room::Author::Agent { id, .. } if id == boss),
        "{first:?}"
    );
    let second = ask("two").await;
    assert!(
        matches!(second[0].author, agency_core::room::Author::Error { id, .. } if id == boss),
        "{second:?}"
    );
    assert!(
        second[0].text.contains("agency `team`'s budget of $0.001"),
        "{}",
        second[0].text
    );
    let spent = h.rt.spend().of_agency(agency.id).await.unwrap();
    assert_eq!(
        spent[0].spent, CALL,
        "one call was made and paid; the refused one never"
    );
}
