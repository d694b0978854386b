use super::*;
use crate::agency::{AgencyDraft, AgentDraft};
use crate::ids::AgencyId;

const M: u32 = 10;
const A: u32 = 20;
const B: u32 = 30;

fn id(n: u32) -> AgentId {
    AgentId::new(n).unwrap()
}

fn agency(max_hops: u32) -> Agency {
    let agent = |n: u32, name: &str| AgentDraft {
        id: Some(n),
        name: name.into(),
        model: "builtin/rules".into(),
        tools: vec!["files/read".into(), "builtin/*".into()],
        ..Default::default()
    };
    AgencyDraft {
        name: "team".into(),
        protocol: "json".into(),
        manager: "manager".into(),
        max_hops: Some(max_hops),
        agents: vec![agent(M, "manager"), agent(A, "alice"), agent(B, "bob")],
        ..Default::default()
    }
    .validate(AgencyId::new(), "local", &|_| true)
    .unwrap()
}

fn to(n: u32, text: &str) -> String {
    format!(r#"{{"to": {n}, "context": "{text}"}}"#)
}

struct T {
    e: TurnEngine,
}

impl T {
    fn new(max_hops: u32) -> (Self, Vec<Step>) {
        let mut e = TurnEngine::new(&agency(max_hops));
        let steps = e.start("hello".into(), []);
        (Self { e }, steps)
    }

    fn reply(&mut self, agent: u32, raw: &str) -> Vec<Step> {
        self.e.on_reply(id(agent), MessageId::new(), raw)
    }
}

/// The steps without ids: `deliver 10<-20 delivery "x"`, `invoke 20`, `answer ...`.
fn show(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|s| match s {
            Step::Deliver(d) => format!(
                "deliver {}<-{} {} {:?}",
                d.to.get(),
                d.from.map_or(0, AgentId::get),
                d.kind.as_str(),
                d.text.chars().take(24).collect::<String>()
            ),
            Step::Invoke(a) => format!("invoke {}", a.get()),
            Step::Answer {
                text, stopped_by, ..
            } => format!("answer {} {text:?}", stopped_by.as_str()),
            Step::Fail { agent, error } => format!("fail {} {error}", agent.get()),
            Step::Cancelled => "cancelled".to_string(),
            Step::CallTool { agent, call, .. } => {
                format!("call {} {} {}", agent.get(), call.name, call.arguments)
            }
            Step::AskApproval { agent, call, .. } => {
                format!("ask {} {} {}", agent.get(), call.name, call.arguments)
            }
            Step::Pause { calls, .. } => format!(
                "pause {}",
                calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        })
        .collect()
}

#[test]
fn the_user_message_goes_to_the_manager() {
    let (_, steps) = T::new(16);
    assert_eq!(show(&steps), ["deliver 10<-0 input \"hello\"", "invoke 10"]);
}

#[test]
fn a_chain_ends_when_the_manager_answers_the_user() {
    let (mut t, _) = T::new(16);
    assert_eq!(
        show(&t.reply(M, &to(A, "build"))),
        ["deliver 20<-10 delivery \"build\"", "invoke 20"]
    );
    assert_eq!(
        show(&t.reply(A, &to(M, "built"))),
        ["deliver 10<-20 delivery \"built\"", "invoke 10"]
    );
    assert_eq!(
        show(&t.reply(M, &to(0, "done"))),
        ["answer answered \"done\""]
    );
    assert!(t.e.is_ended());
    assert_eq!(t.e.hops(), 3);
}

#[test]
fn a_fan_out_calls_agents_concurrently_and_a_busy_agent_waits() {
    let (mut t, _) = T::new(16);
    let fan = format!("[{}, {}]", to(A, "part a"), to(B, "part b"));
    assert_eq!(
        show(&t.reply(M, &fan)),
        [
            "deliver 20<-10 delivery \"part a\"",
            "deliver 30<-10 delivery \"part b\"",
            "invoke 20",
            "invoke 30"
        ]
    );
    assert_eq!(
        show(&t.reply(A, &to(M, "a done"))),
        ["deliver 10<-20 delivery \"a done\"", "invoke 10"]
    );
    // The manager is busy: bob's reply waits, and is delivered before its next call.
    assert_eq!(show(&t.reply(B, &to(M, "b done"))), Vec::<String>::new());
    assert_eq!(
        show(&t.reply(M, &to(A, "more"))),
        [
            "deliver 10<-30 delivery \"b done\"",
            "deliver 20<-10 delivery \"more\"",
            "invoke 10",
            "invoke 20"
        ]
    );
}

#[test]
fn only_the_manager_reaches_the_user() {
    let (mut t, _) = T::new(16);
    t.reply(M, &to(A, "go"));
    assert_eq!(
        show(&t.reply(A, &to(0, "hi user"))),
        ["deliver 10<-20 delivery \"hi user\"", "invoke 10"]
    );
    assert!(!t.e.is_ended());
}

#[test]
fn invalid_replies_are_corrected_twice_then_passed_on() {
    let (mut t, _) = T::new(16);
    t.reply(M, &to(A, "go"));
    for _ in 0..MAX_CORRECTIONS {
        let steps = t.reply(A, "no json here");
        assert_eq!(show(&steps)[1], "invoke 20");
        let Step::Deliver(d) = &steps[0] else {
            panic!("{steps:?}")
        };
        assert_eq!(d.kind, MessageKind::Correction);
        assert!(d.text.contains("is not a JSON object"), "{}", d.text);
        assert!(
            d.text
                .contains(r#"{"to": <id>, "context": "<your message>"}"#)
        );
    }
    assert_eq!(
        show(&t.reply(A, "still no json")),
        ["deliver 10<-20 delivery \"still no json\"", "invoke 10"]
    );
    // Unknown ids and self-addressing are invalid too.
    let steps = t.reply(M, &to(99, "x"));
    assert!(
        matches!(&steps[0], Step::Deliver(d) if d.kind == MessageKind::Correction && d.text.contains("no agent #99"))
    );
    let steps = t.reply(M, &to(M, "x"));
    assert!(matches!(&steps[0], Step::Deliver(d) if d.text.contains("addressed yourself")));
    assert_eq!(
        show(&t.reply(M, "plain words")),
        ["answer answered \"plain words\""]
    );
}

#[test]
fn a_valid_reply_resets_the_corrections() {
    let (mut t, _) = T::new(16);
    t.reply(M, &to(A, "go"));
    t.reply(A, "bad");
    t.reply(A, "bad");
    t.reply(A, &to(B, "ok"));
    t.reply(B, &to(A, "back"));
    let steps = t.reply(A, "bad");
    assert!(matches!(&steps[0], Step::Deliver(d) if d.kind == MessageKind::Correction));
}

#[test]
fn the_hop_limit_makes_the_manager_answer() {
    let (mut t, _) = T::new(4);
    t.reply(M, &to(A, "1"));
    t.reply(A, &to(B, "2"));
    t.reply(B, &to(A, "3"));
    // Fourth hop: alice is told nothing more; the manager is told to answer.
    let steps = t.reply(A, &to(B, "4"));
    let shown = show(&steps);
    assert_eq!(shown[0], "deliver 30<-20 delivery \"4\"");
    assert!(
        shown[1].starts_with("deliver 10<-0 guard \"Stop now: this turn"),
        "{shown:?}"
    );
    assert_eq!(shown[2], "invoke 10");
    assert_eq!(shown.len(), 3, "bob is not called any more");
    // Whoever the manager addresses now, its reply is the answer.
    assert_eq!(
        show(&t.reply(M, &to(A, "keep going"))),
        ["answer max_hops \"keep going\""]
    );
}

#[test]
fn a_repeated_exchange_is_a_loop() {
    let (mut t, _) = T::new(100);
    t.reply(M, &to(A, "start"));
    t.reply(A, &to(B, "ping"));
    t.reply(B, &to(A, "pong"));
    t.reply(A, &to(B, "ping"));
    let shown = show(&t.reply(B, &to(A, "pong")));
    assert!(
        shown
            .iter()
            .any(|s| s.starts_with("deliver 10<-0 guard \"Stop now: agents were")),
        "{shown:?}"
    );
    assert_eq!(shown.last().unwrap(), "invoke 10");
    assert_eq!(
        show(&t.reply(M, &to(0, "sorry"))),
        ["answer loop \"sorry\""]
    );
}

#[test]
fn different_messages_are_not_a_loop() {
    let (mut t, _) = T::new(100);
    t.reply(M, &to(A, "start"));
    for i in 0..20 {
        let steps = t.reply(
            if i % 2 == 0 { A } else { B },
            &to(if i % 2 == 0 { B } else { A }, &i.to_string()),
        );
        assert!(!show(&steps).iter().any(|s| s.contains("guard")));
    }
}

#[test]
fn the_deadline_waits_for_a_busy_manager_then_makes_it_answer() {
    let (mut t, _) = T::new(16);
    // The manager is busy with its first call when the deadline passes.
    assert_eq!(show(&t.e.on_deadline()), Vec::<String>::new());
    // Its reply was written before it saw the guard: routed, but alice is not called.
    let shown = show(&t.reply(M, &to(A, "do it")));
    assert!(
        shown[0].starts_with("deliver 10<-0 guard \"Stop now: this turn reac"),
        "{shown:?}"
    );
    assert_eq!(
        &shown[1..],
        ["deliver 20<-10 delivery \"do it\"", "invoke 10"]
    );
    assert_eq!(
        show(&t.reply(M, "not json at all")),
        ["answer deadline \"not json at all\""]
    );
}

#[test]
fn a_manager_that_never_answers_is_cut_off() {
    let (mut t, _) = T::new(16);
    t.e.on_deadline();
    assert_eq!(
        show(&t.e.cut_off()),
        ["answer deadline \"The agency could not finish answering in time.\""]
    );
    assert!(t.e.is_ended());
}

#[test]
fn late_replies_are_routed_but_start_nothing() {
    let (mut t, _) = T::new(16);
    t.reply(M, &format!("[{}, {}]", to(A, "a"), to(B, "b")));
    t.reply(A, &to(M, "a done"));
    assert_eq!(
        show(&t.reply(M, &to(0, "answer"))),
        ["answer answered \"answer\""]
    );
    assert!(t.e.in_flight(), "bob is still working");
    assert_eq!(
        show(&t.reply(B, &to(M, "b late"))),
        ["deliver 10<-30 delivery \"b late\""]
    );
    assert!(!t.e.in_flight());
}

#[test]
fn what_waits_for_an_idle_agent_is_delivered_when_the_turn_ends() {
    let (mut t, _) = T::new(16);
    t.reply(M, &format!("[{}, {}]", to(A, "a"), to(B, "b")));
    t.reply(A, &to(M, "a done")); // manager busy again
    t.reply(B, &to(M, "b done")); // waits for the manager
    let shown = show(&t.reply(M, &to(0, "answer")));
    assert_eq!(
        shown,
        [
            "deliver 10<-30 delivery \"b done\"",
            "answer answered \"answer\""
        ]
    );
}

#[test]
fn unanswered_agents_from_an_earlier_turn_are_called() {
    let mut e = TurnEngine::new(&agency(16));
    let steps = e.start("hi".into(), [id(B)]);
    assert_eq!(
        show(&steps),
        ["deliver 10<-0 input \"hi\"", "invoke 10", "invoke 30"]
    );
}

#[test]
fn failures() {
    let (mut t, _) = T::new(16);
    t.reply(M, &to(A, "go"));
    let shown = show(&t.e.on_failure(id(A), "503 from openai"));
    assert_eq!(
        shown,
        [
            "deliver 10<-20 failure \"#20 (alice) could not an\"",
            "invoke 10"
        ]
    );
    assert_eq!(show(&t.e.on_failure(id(M), "timeout")), ["fail 10 timeout"]);
    assert!(t.e.is_ended());
}

#[test]
fn replies_from_idle_or_unknown_agents_are_ignored() {
    let (mut t, _) = T::new(16);
    assert!(t.reply(A, &to(M, "unasked")).is_empty());
    assert!(t.reply(99, &to(M, "stranger")).is_empty());
}

#[test]
fn a_cancelled_turn_ends_at_once_and_late_replies_start_nothing() {
    let (mut t, _) = T::new(16);
    t.reply(M, &format!("[{}, {}]", to(A, "a"), to(B, "b")));
    assert_eq!(show(&t.e.cancel()), ["cancelled"]);
    assert!(t.e.is_ended());
    assert!(t.e.in_flight(), "alice and bob are still working");
    // Their replies are routed for the next turn; the manager is not called.
    assert_eq!(
        show(&t.reply(A, &to(M, "a done"))),
        ["deliver 10<-20 delivery \"a done\""]
    );
    assert_eq!(
        show(&t.reply(B, &to(0, "b done"))),
        ["deliver 10<-30 delivery \"b done\""]
    );
    assert!(!t.e.in_flight());
    // Cancelling again, or after the turn ended, does nothing.
    assert_eq!(show(&t.e.cancel()), Vec::<String>::new());
}

#[test]
fn a_cancel_wins_over_a_guard_and_the_managers_late_answer_is_not_an_answer() {
    let (mut t, _) = T::new(16);
    t.e.on_deadline();
    assert_eq!(show(&t.e.cancel()), ["cancelled"]);
    // The manager's reply to the user comes too late to be the turn's answer, and calls no one
    // (the guard that waited for it is delivered, for the record).
    let shown = show(&t.reply(M, &to(0, "here you go")));
    assert!(
        shown
            .iter()
            .all(|s| !s.starts_with("answer") && !s.starts_with("invoke")),
        "{shown:?}"
    );
    assert_eq!(show(&t.e.cut_off()), Vec::<String>::new());
    assert_eq!(show(&t.e.on_deadline()), Vec::<String>::new());
}

#[test]
fn stop_reasons_read_back() {
    for r in [
        StopReason::Answered,
        StopReason::MaxHops,
        StopReason::Deadline,
        StopReason::Loop,
        StopReason::Cancelled,
    ] {
        assert_eq!(StopReason::parse(r.as_str()), Some(r));
    }
    assert_eq!(StopReason::Cancelled.as_str(), "cancelled");
    assert!(!StopReason::Cancelled.is_guard() && !StopReason::Answered.is_guard());
    assert!(StopReason::Deadline.is_guard());
}

fn call(id: &str, name: &str, args: &str) -> crate::tool::ToolCall {
    crate::tool::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

impl T {
    fn calls(
        &mut self,
        agent: u32,
        reply: MessageId,
        calls: &[crate::tool::ToolCall],
    ) -> Vec<Step> {
        self.e.on_tool_calls(id(agent), reply, "", calls)
    }

    fn result(
        &mut self,
        agent: u32,
        reply: MessageId,
        c: &crate::tool::ToolCall,
        text: &str,
    ) -> Vec<Step> {
        self.e
            .on_tool_result(id(agent), reply, c, text.into(), false)
    }
}

#[test]
fn tool_calls_run_together_and_their_results_go_back_to_the_caller_alone() {
    let (mut t, _) = T::new(16);
    let reply = MessageId::new();
    let (a, b) = (
        call("1", "files/read", "{\"path\":\"a\"}"),
        call("2", "builtin/now", "{}"),
    );
    assert_eq!(
        show(&t.calls(M, reply, &[a.clone(), b.clone()])),
        [
            "call 10 files/read {\"path\":\"a\"}",
            "call 10 builtin/now {}"
        ]
    );
    // Something for the manager while its tools run waits until both results are in.
    t.e.on_failure(id(A), "x"); // alice was not busy: nothing happens
    assert_eq!(
        show(&t.result(M, reply, &b, "noon")),
        ["deliver 10<-0 tool_result \"noon\""]
    );
    let steps = t.result(M, reply, &a, "text of a");
    assert_eq!(
        show(&steps),
        ["deliver 10<-0 tool_result \"text of a\"", "invoke 10"]
    );
    let Step::Deliver(d) = &steps[0] else {
        panic!()
    };
    assert_eq!(d.linked, Some(reply));
    assert_eq!(
        d.tool
            .as_ref()
            .and_then(|t| t.result())
            .map(|r| r.call_id.as_str()),
        Some("1")
    );
    assert_eq!(
        t.e.hops(),
        3,
        "the reply with calls and each result are hops"
    );
    assert_eq!(
        show(&t.reply(M, &to(0, "done"))),
        ["answer answered \"done\""]
    );
}

#[test]
fn a_tool_the_agent_may_not_use_gets_an_error_result_at_once() {
    let (mut t, _) = T::new(16);
    let reply = MessageId::new();
    let steps = t.calls(M, reply, &[call("1", "files/write", "{}")]);
    assert_eq!(
        show(&steps),
        [
            "deliver 10<-0 tool_result \"Not run: `files/write` i\"",
            "invoke 10"
        ]
    );
    let Step::Deliver(d) = &steps[0] else {
        panic!()
    };
    assert!(
        d.tool
            .as_ref()
            .and_then(|t| t.result())
            .is_some_and(|r| r.is_error)
    );
    assert!(d.text.contains("files/read, builtin/*"), "{}", d.text);
}

#[test]
fn messages_for_an_agent_wait_while_its_tools_run_and_follow_their_results() {
    let (mut t, _) = T::new(16);
    let fan = format!("[{}, {}]", to(A, "a"), to(B, "b"));
    t.reply(M, &fan);
    let reply = MessageId::new();
    let c = call("1", "files/read", "{}");
    assert_eq!(
        show(&t.calls(A, reply, std::slice::from_ref(&c))),
        ["call 20 files/read {}"]
    );
    // bob answers alice while her tool runs: it waits.
    assert_eq!(show(&t.reply(B, &to(A, "hi alice"))), Vec::<String>::new());
    assert_eq!(
        show(&t.result(A, reply, &c, "file")),
        [
            "deliver 20<-0 tool_result \"file\"",
            "deliver 20<-30 delivery \"hi alice\"",
            "invoke 20"
        ]
    );
}

#[test]
fn tool_hops_count_toward_the_hop_limit() {
    let (mut t, _) = T::new(3);
    let reply = MessageId::new();
    let (a, b) = (
        call("1", "builtin/now", "{}"),
        call("2", "builtin/now", "{\"x\":1}"),
    );
    t.calls(M, reply, &[a.clone(), b.clone()]);
    t.result(M, reply, &a, "1");
    // The third hop trips the limit; the guard waits for the manager's last result.
    let steps = t.result(M, reply, &b, "2");
    assert_eq!(
        show(&steps),
        [
            "deliver 10<-0 tool_result \"2\"",
            "deliver 10<-0 guard \"Stop now: this turn reac\"",
            "invoke 10"
        ]
    );
    // Told to answer, the manager is offered no tools (the other agents still are).
    assert!(!t.e.offers_tools(id(M)));
    assert!(t.e.offers_tools(id(A)));
    // Should it call one anyway, it is not run, and its text is the answer.
    let reply = MessageId::new();
    let steps = t.e.on_tool_calls(
        id(M),
        reply,
        "best I have",
        &[call("3", "builtin/now", "{}")],
    );
    assert_eq!(
        show(&steps),
        [
            "deliver 10<-0 tool_result \"Not run: you were told t\"",
            "answer max_hops \"best I have\""
        ]
    );
}

#[test]
fn a_manager_whose_context_holds_its_question_is_called_with_its_tools() {
    // A room's agent: nothing is delivered, it is called on what its context holds.
    let mut e = TurnEngine::new(&agency(16));
    assert!(e.offers_tools(id(M)));
    assert_eq!(show(&e.start_on_context()), ["invoke 10"]);
    assert!(e.offers_tools(id(M)), "nothing told it to answer yet");
}

#[test]
fn the_same_call_answered_the_same_way_three_times_is_a_loop() {
    let (mut t, _) = T::new(100);
    for n in 0..2 {
        let reply = MessageId::new();
        let c = call(&n.to_string(), "builtin/now", "{}");
        t.calls(M, reply, std::slice::from_ref(&c));
        assert_eq!(show(&t.result(M, reply, &c, "same"))[1], "invoke 10");
    }
    let reply = MessageId::new();
    let c = call("3", "builtin/now", "{}");
    t.calls(M, reply, std::slice::from_ref(&c));
    let steps = show(&t.result(M, reply, &c, "same"));
    assert!(steps[1].starts_with("deliver 10<-0 guard"), "{steps:?}");
    assert_eq!(show(&t.reply(M, &to(0, "ok")))[0], "answer loop \"ok\"");
}

#[test]
fn results_after_a_cancel_are_kept_and_start_nothing() {
    let (mut t, _) = T::new(16);
    let reply = MessageId::new();
    let c = call("1", "builtin/now", "{}");
    t.calls(M, reply, std::slice::from_ref(&c));
    assert_eq!(show(&t.e.cancel()), ["cancelled"]);
    assert!(t.e.in_flight(), "the tool is still running");
    assert_eq!(
        show(&t.result(M, reply, &c, "late")),
        ["deliver 10<-0 tool_result \"late\""]
    );
    assert!(!t.e.in_flight());
    // A late reply's calls are not run: each gets its error result.
    let steps = t.e.on_tool_calls(id(M), MessageId::new(), "", &[c]);
    assert!(steps.is_empty(), "the manager was not busy");
}

fn with_client_tools(max_hops: u32) -> (T, Vec<Step>) {
    let mut e = TurnEngine::new(&agency(max_hops)).with_client_tools(["get_weather".to_string()]);
    let steps = e.start("hello".into(), []);
    (T { e }, steps)
}

#[test]
fn a_call_of_the_clients_tool_pauses_the_turn_once_the_managers_own_tools_answered() {
    let (mut t, _) = with_client_tools(16);
    let reply = MessageId::new();
    let (mine, theirs) = (
        call("1", "builtin/now", "{}"),
        call("2", "get_weather", "{\"city\":\"Oslo\"}"),
    );
    assert_eq!(
        show(&t.calls(M, reply, &[mine.clone(), theirs.clone()])),
        ["call 10 builtin/now {}"],
        "the client's call is not run here"
    );
    let steps = t.result(M, reply, &mine, "noon");
    assert_eq!(
        show(&steps),
        ["deliver 10<-0 tool_result \"noon\"", "pause get_weather"]
    );
    let Some(Step::Pause {
        reply: paused,
        calls,
    }) = steps.last()
    else {
        panic!()
    };
    assert_eq!(
        (*paused, calls.as_slice()),
        (reply, std::slice::from_ref(&theirs))
    );
    assert!(t.e.is_ended());
    assert_eq!(t.e.hops(), 2);

    // The client's result resumes it in a new engine, hops carried on.
    let mut e = TurnEngine::new(&agency(16)).with_client_tools(["get_weather".to_string()]);
    let steps = e.resume(2, reply, vec![(theirs, "sunny".into(), false)], None, []);
    assert_eq!(
        show(&steps),
        ["deliver 10<-0 tool_result \"sunny\"", "invoke 10"]
    );
    assert_eq!(e.hops(), 3);
    assert_eq!(
        show(&e.on_reply(id(M), MessageId::new(), &to(0, "Sunny in Oslo"))),
        ["answer answered \"Sunny in Oslo\""]
    );
}

#[test]
fn the_pause_waits_for_the_agents_still_working_and_what_they_send_the_manager() {
    let (mut t, _) = with_client_tools(16);
    let fan = format!("[{}, {}]", to(A, "a"), to(B, "b"));
    t.reply(M, &fan);
    t.reply(A, &to(M, "from alice"));
    let reply = MessageId::new();
    let theirs = call("9", "get_weather", "{}");
    assert_eq!(
        show(&t.calls(M, reply, std::slice::from_ref(&theirs))),
        Vec::<String>::new(),
        "bob is still working"
    );
    assert_eq!(
        show(&t.reply(B, &to(M, "from bob"))),
        ["deliver 10<-30 delivery \"from bob\"", "pause get_weather"]
    );
}

#[test]
fn only_the_manager_may_call_the_clients_tools() {
    let (mut t, _) = with_client_tools(16);
    t.reply(M, &to(A, "a"));
    let steps = t.calls(A, MessageId::new(), &[call("1", "get_weather", "{}")]);
    assert_eq!(
        show(&steps),
        [
            "deliver 20<-0 tool_result \"Not run: `get_weather` i\"",
            "invoke 20"
        ]
    );
    // The manager calling a tool that is neither is told of both kinds.
    let (mut t, _) = with_client_tools(16);
    let steps = t.calls(M, MessageId::new(), &[call("1", "get_time", "{}")]);
    let Step::Deliver(d) = &steps[0] else {
        panic!()
    };
    assert!(
        d.text.contains("The client's tools: get_weather."),
        "{}",
        d.text
    );
}

#[test]
fn a_resumed_turn_past_its_hop_limit_is_told_to_answer() {
    let mut e = TurnEngine::new(&agency(3)).with_client_tools(["get_weather".to_string()]);
    let steps = e.resume(
        3,
        MessageId::new(),
        vec![(call("1", "get_weather", "{}"), "sunny".into(), false)],
        Some("and tomorrow?".into()),
        [],
    );
    assert_eq!(
        show(&steps),
        [
            "deliver 10<-0 tool_result \"sunny\"",
            "deliver 10<-0 input \"and tomorrow?\"",
            "deliver 10<-0 guard \"Stop now: this turn reac\"",
            "invoke 10"
        ]
    );
}

#[derive(Debug)]
struct Braces;

impl AnswerCheck for Braces {
    fn check(&self, answer: &str) -> Result<String, String> {
        let t = answer.trim();
        if t.starts_with('{') && t.ends_with('}') {
            Ok(t.to_string())
        } else {
            Err("it is not a JSON object".into())
        }
    }
}

#[test]
fn an_answer_out_of_format_is_corrected_twice_then_the_turn_fails() {
    let mut e = TurnEngine::new(&agency(16)).with_answer_check(std::sync::Arc::new(Braces));
    e.start("hello".into(), []);
    let mut t = T { e };
    for _ in 0..2 {
        assert_eq!(
            show(&t.reply(M, &to(0, "plain words"))),
            [
                "deliver 10<-0 correction \"Your answer could not be\"",
                "invoke 10"
            ]
        );
    }
    assert_eq!(
        show(&t.reply(M, &to(0, "still plain"))),
        ["fail 10 the answer is not in the response format asked for: it is not a JSON object"]
    );

    let mut e = TurnEngine::new(&agency(16)).with_answer_check(std::sync::Arc::new(Braces));
    e.start("hello".into(), []);
    let mut t = T { e };
    t.reply(M, &to(0, "plain"));
    let ok = r#"{\"a\": 1}"#;
    assert_eq!(
        show(&t.reply(M, &to(0, ok))),
        ["answer answered \"{\\\"a\\\": 1}\""]
    );
}

/// A stored message of turn `turn` in `agent`'s context.
fn stored(
    turn: Option<crate::ids::TurnId>,
    agent: u32,
    kind: MessageKind,
    from: Option<u32>,
    linked: Option<MessageId>,
    text: &str,
) -> Message {
    Message {
        id: MessageId::new(),
        conversation_id: crate::ids::ConversationId::new(),
        turn_id: turn,
        seq: 0,
        agent: Some(id(agent)),
        kind,
        linked,
        from: from.map(id),
        to: Some(id(agent)),
        text: text.into(),
        tool: None,
        images: Vec::new(),
        usage: None,
        latency_ms: None,
        included: true,
        created_at: chrono::DateTime::UNIX_EPOCH,
    }
}

#[test]
fn what_a_crash_left_undelivered_is_delivered_once_and_its_addressee_called() {
    use MessageKind::{Correction, Delivery as Delivered, Input, Reply};
    let (earlier, turn) = (
        Some(crate::ids::TurnId::new()),
        Some(crate::ids::TurnId::new()),
    );
    // An earlier turn's reply whose delivery is not stored: that turn has ended, not ours.
    let old = stored(earlier, B, Reply, None, None, &to(A, "old news"));
    let input = stored(turn, M, Input, None, None, "hello");
    // The manager sent to alice and bob; both deliveries were stored.
    let fan = stored(
        turn,
        M,
        Reply,
        None,
        None,
        &format!("[{}, {}]", to(A, "build"), to(B, "test")),
    );
    let to_alice = stored(turn, A, Delivered, Some(M), Some(fan.id), "build");
    let to_bob = stored(turn, B, Delivered, Some(M), Some(fan.id), "test");
    // Bob answered alice while she worked: only the engine held that delivery.
    let lost = stored(turn, B, Reply, None, None, &to(A, "tests pass"));
    // Bob's invalid reply was corrected (stored with it); alice's, past corrections, went to
    // the manager raw and was lost.
    let invalid = stored(turn, B, Reply, None, None, "no idea");
    let corrected = stored(turn, B, Correction, None, Some(invalid.id), "send it again");
    let raw = stored(turn, A, Reply, None, None, "  plain words  ");
    // The manager's answer to the user is not a delivery.
    let answer = stored(turn, M, Reply, None, None, &to(0, "done"));
    let messages = [
        &old, &input, &fan, &to_alice, &to_bob, &lost, &invalid, &corrected, &raw, &answer,
    ];
    let mut e = TurnEngine::new(&agency(16));
    let recovered = e.recover(&messages);
    assert_eq!(
        show(&recovered),
        [
            "deliver 20<-30 delivery \"tests pass\"",
            "deliver 10<-20 delivery \"plain words\""
        ]
    );
    let Step::Deliver(d) = &recovered[0] else {
        panic!("not a delivery")
    };
    assert_eq!(d.linked, Some(lost.id));
    // Then the user's message: alice and the manager are called with what reached them.
    assert_eq!(
        show(&e.start("next".into(), [])),
        ["deliver 10<-0 input \"next\"", "invoke 10", "invoke 20"]
    );
    // Once delivered (stored, linked), the same messages recover nothing.
    let delivered = stored(turn, A, Delivered, Some(B), Some(lost.id), "tests pass");
    let passed = stored(turn, M, Delivered, Some(A), Some(raw.id), "plain words");
    let mut all = messages.to_vec();
    all.extend([&delivered, &passed]);
    assert!(TurnEngine::new(&agency(16)).recover(&all).is_empty());
}

#[test]
fn past_its_cost_cap_the_manager_is_told_to_answer() {
    let (mut t, _) = T::new(16);
    t.reply(M, &to(A, "build"));
    // Alice is working when the cap is passed: the manager is told, and answers once called.
    let steps = t.e.on_turn_budget();
    assert_eq!(
        show(&steps),
        [
            "deliver 10<-0 guard \"Stop now: this turn reac\"",
            "invoke 10"
        ]
    );
    assert_eq!(
        show(&t.reply(M, &to(A, "more"))),
        ["answer budget \"more\""]
    );
    assert!(t.e.is_ended());
    // Once ended, nothing more.
    assert!(t.e.on_turn_budget().is_empty());
}

#[test]
fn a_spent_budget_ends_the_turn_with_why() {
    let (mut t, _) = T::new(16);
    t.reply(M, &to(A, "build"));
    // Alice's call was refused: the turn ends with the reason as its answer.
    let steps = t.e.out_of_budget(id(A), "the key's budget is spent");
    assert_eq!(
        show(&steps),
        ["answer budget \"the key's budget is spent\""]
    );
    assert!(t.e.is_ended());
    assert!(t.e.out_of_budget(id(M), "again").is_empty());
}

fn with_approvals() -> TurnEngine {
    let agent = |n: u32, name: &str| AgentDraft {
        id: Some(n),
        name: name.into(),
        model: "builtin/rules".into(),
        tools: vec!["files/*".into(), "builtin/*".into()],
        approve: vec!["files/write".into()],
        ..Default::default()
    };
    let agency = AgencyDraft {
        name: "team".into(),
        protocol: "json".into(),
        manager: "manager".into(),
        agents: vec![agent(M, "manager"), agent(A, "alice")],
        ..Default::default()
    }
    .validate(AgencyId::new(), "local", &|_| true)
    .unwrap();
    TurnEngine::new(&agency)
}

#[test]
fn a_call_the_policy_names_asks_for_approval_and_the_agent_waits_for_it() {
    let mut e = with_approvals();
    e.start("hello".into(), []);
    let reply = MessageId::new();
    let (w, r) = (
        call("1", "files/write", "{\"path\":\"a\"}"),
        call("2", "files/read", "{}"),
    );
    let steps = e.on_tool_calls(id(M), reply, "", &[w.clone(), r.clone()]);
    assert_eq!(
        show(&steps),
        [
            "ask 10 files/write {\"path\":\"a\"}",
            "call 10 files/read {}"
        ]
    );
    let steps = e.on_tool_result(id(M), reply, &r, "text".into(), false);
    assert_eq!(show(&steps), ["deliver 10<-0 tool_result \"text\""]);
    // A denial is the call's error result; then the agent is called again.
    let steps = e.on_tool_result(
        id(M),
        reply,
        &w,
        "Not run: a person denied it.".into(),
        true,
    );
    assert_eq!(
        show(&steps),
        [
            "deliver 10<-0 tool_result \"Not run: a person denied\"",
            "invoke 10"
        ]
    );
}

#[test]
fn a_turn_paused_on_approvals_resumes_with_the_answers_in_a_new_engine() {
    let mut e = with_approvals();
    e.start("hello".into(), []);
    e.on_reply(id(M), MessageId::new(), &to(A, "write it"));
    let reply = MessageId::new();
    let (w1, w2, w3) = (
        call("1", "files/write", "{}"),
        call("2", "files/write", "{\"n\":2}"),
        call("3", "files/write", "{\"n\":3}"),
    );
    let steps = e.on_tool_calls(id(A), reply, "", &[w1.clone(), w2.clone(), w3.clone()]);
    assert_eq!(steps.len(), 3);
    assert!(show(&e.pause_for_approval()).is_empty());
    assert!(e.is_ended() && !e.in_flight());
    let hops = e.hops();

    let mut e = with_approvals();
    let held = |call: &crate::tool::ToolCall, outcome| Held {
        agent: id(A),
        reply,
        call: call.clone(),
        outcome,
    };
    let steps = e.resume_held(
        hops,
        vec![
            held(&w1, HeldOutcome::Run),
            held(&w2, HeldOutcome::Result("Not run: denied.".into(), true)),
            held(&w3, HeldOutcome::Wait),
        ],
        [],
    );
    assert_eq!(
        show(&steps),
        [
            "call 20 files/write {}",
            "deliver 20<-0 tool_result \"Not run: denied.\""
        ]
    );
    assert_eq!(e.hops(), hops + 1);
    e.on_tool_result(id(A), reply, &w1, "ok".into(), false);
    let steps = e.on_tool_result(id(A), reply, &w3, "ok 3".into(), false);
    assert_eq!(
        show(&steps),
        ["deliver 20<-0 tool_result \"ok 3\"", "invoke 20"]
    );
}
