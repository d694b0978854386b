//! The memory cycle: observations rated by the agent's model, reflections once the decayed
//! importance passes the agent's threshold.
#![allow(clippy::unwrap_used)]

mod common;

use agency_core::memory::{FALLBACK_IMPORTANCE, MemoryKind};
use common::{Act, Harness, agent, draft};

#[tokio::test]
async fn observations_are_rated_and_reflected_on_past_the_threshold() {
    let h = Harness::sqlite().await;
    let mut watcher = agent(2, "watcher", "builtin/rules", &[]);
    watcher.reflection_threshold = Some(1.5);
    let a = h
        .agency(draft(
            "json",
            8,
            vec![agent(1, "boss", "builtin/rules", &[]), watcher],
        ))
        .await;
    let w = a.agent_by_handle("watcher").unwrap().id;
    let first =
        h.rt.memory()
            .observe(a.id, w, "Pump 3 pressure exceeded the limit")
            .await
            .unwrap();
    assert_eq!(first.observation.importance, 0.9);
    assert_eq!(first.observation.kind, MemoryKind::Observation);
    assert_eq!(first.reflection, None);
    let low =
        h.rt.memory()
            .observe(a.id, w, "The shift changed")
            .await
            .unwrap();
    assert_eq!(low.observation.importance, 0.3);
    assert_eq!(low.reflection, None);
    // 0.9 + 0.3 + 0.9 = 2.1 >= 1.5 (nothing has decayed yet).
    let third =
        h.rt.memory()
            .observe(a.id, w, "Pump 3 is leaking")
            .await
            .unwrap();
    let r = third.reflection.unwrap();
    assert_eq!(r.kind, MemoryKind::Reflection);
    assert_eq!(r.importance, 0.9);
    assert_eq!(
        r.sources,
        vec![
            first.observation.id,
            low.observation.id,
            third.observation.id
        ]
    );
    assert_eq!(
        r.content,
        "3 observations to act on: Pump 3 pressure exceeded the limit; The shift changed; Pump 3 is leaking"
    );
    assert_eq!(
        h.rt.memory().get(a.id, r.id).await.unwrap(),
        Some(r.clone())
    );
    // Another agency's reader finds nothing.
    assert_eq!(
        h.rt.memory()
            .get(agency_core::AgencyId::new(), r.id)
            .await
            .unwrap(),
        None
    );
    // The reflection led to a plan: one task per important observation.
    let made = third.plan.unwrap();
    assert!(made.new);
    assert_eq!(made.plan.reflection, Some(r.id));
    assert_eq!(
        made.plan
            .tasks
            .iter()
            .map(|t| t.description.as_str())
            .collect::<Vec<_>>(),
        [
            "Follow up: Pump 3 pressure exceeded the limit",
            "Follow up: Pump 3 is leaking"
        ]
    );
    assert_eq!(
        made.plan
            .pddl()
            .lines()
            .filter(|l| !l.starts_with(';'))
            .collect::<Vec<_>>(),
        [
            "(investigate observation-1)",
            "(report observation-1 manager)",
            "(investigate observation-3)",
            "(report observation-3 manager)"
        ]
    );
    assert_eq!(
        h.rt.memory().active_plan(a.id, w).await.unwrap(),
        Some(made.plan.clone())
    );
    // Counting starts again after a reflection.
    let next =
        h.rt.memory()
            .observe(a.id, w, "Pump 3 failed")
            .await
            .unwrap();
    assert_eq!(next.reflection, None);
    assert_eq!(next.plan, None);
    // The next reflection adjusts the same plan.
    let again =
        h.rt.memory()
            .observe(a.id, w, "Pump 3 stopped")
            .await
            .unwrap();
    assert!(again.reflection.is_some());
    let adjusted = again.plan.unwrap();
    assert!(!adjusted.new);
    assert_eq!(adjusted.plan.id, made.plan.id);
    assert_eq!(adjusted.plan.current_tasks().count(), 2);
    assert_eq!(adjusted.plan.tasks.len(), 4);

    // The manager keeps the default threshold (2.0): two important observations are not enough.
    let boss = a.manager;
    for text in ["alarm one", "alarm two"] {
        assert_eq!(
            h.rt.memory()
                .observe(a.id, boss, text)
                .await
                .unwrap()
                .reflection,
            None
        );
    }
    assert!(
        h.rt.memory()
            .observe(a.id, boss, "alarm three")
            .await
            .unwrap()
            .reflection
            .is_some()
    );
}

#[tokio::test]
async fn a_model_that_cannot_rate_keeps_the_observation() {
    let h = Harness::sqlite().await;
    h.script("vague", vec![Act::Say("It is hard to say.")]);
    h.script("wrapped", vec![Act::Say(r#"{"to": 0, "context": "0.7"}"#)]);
    h.script("broken", vec![Act::Fail("provider down")]);
    let a = h
        .agency(draft(
            "json",
            8,
            vec![
                agent(1, "boss", "script/vague", &[]),
                agent(2, "wrapped", "script/wrapped", &[]),
                agent(3, "broken", "script/broken", &[]),
            ],
        ))
        .await;
    let vague =
        h.rt.memory()
            .observe(a.id, a.manager, "something")
            .await
            .unwrap();
    assert_eq!(vague.observation.importance, FALLBACK_IMPORTANCE);
    let id = |n: &str| a.agent_by_handle(n).unwrap().id;
    // An answer in the agency's reply format is read for its text.
    let wrapped =
        h.rt.memory()
            .observe(a.id, id("wrapped"), "something")
            .await
            .unwrap();
    assert_eq!(wrapped.observation.importance, 0.7);
    // A failing model: kept at the fallback importance, and stored.
    let broken =
        h.rt.memory()
            .observe(a.id, id("broken"), "something")
            .await
            .unwrap();
    assert_eq!(broken.observation.importance, FALLBACK_IMPORTANCE);
    assert_eq!(
        h.rt.memory()
            .get(a.id, broken.observation.id)
            .await
            .unwrap(),
        Some(broken.observation.clone())
    );
    // Empty or unknown: refused, nothing stored.
    assert!(h.rt.memory().observe(a.id, a.manager, "   ").await.is_err());
    let nobody = agency_core::AgentId::new(99).unwrap();
    assert!(h.rt.memory().observe(a.id, nobody, "x").await.is_err());
}

#[tokio::test]
async fn a_reflection_without_a_readable_plan_makes_none() {
    let h = Harness::sqlite().await;
    h.script(
        "prose",
        vec![
            Act::Say("0.9"),
            Act::Say("Pumps wear out."),
            Act::Say("Nothing needs doing."),
            Act::Say("0.8"),
            Act::Say("Still fine."),
            Act::Say(r#"{"tasks": []}"#),
        ],
    );
    let mut boss = agent(1, "boss", "script/prose", &[]);
    boss.reflection_threshold = Some(0.5);
    let a = h.agency(draft("directives", 8, vec![boss])).await;
    let o =
        h.rt.memory()
            .observe(a.id, a.manager, "pump noise")
            .await
            .unwrap();
    assert_eq!(o.reflection.unwrap().content, "Pumps wear out.");
    assert_eq!(o.plan, None);
    let o =
        h.rt.memory()
            .observe(a.id, a.manager, "pump noise")
            .await
            .unwrap();
    assert_eq!(o.reflection.unwrap().content, "Still fine.");
    assert_eq!(o.plan, None);
    assert_eq!(
        h.rt.memory().active_plan(a.id, a.manager).await.unwrap(),
        None
    );
}
