#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agency_core::{AgencyDraft, AgencyId, AgentDraft, McpServerDraft, ProviderDraft, RuleDraft};
use agency_file::{AgencyFile, FileError, Problem, to_yaml};
use proptest::prelude::*;

const EXAMPLE: &str = r#"name: studio
protocol: json
manager: manager
max_hops: 16
agents:
  - { id: 4522, name: manager, model: builtin/rules, instructions: "You run a studio.",
      rules: [ { when: user, do: "Please build: {{message}}", send_to: programmer },
               { when: programmer, do: "Done: {{message}}", send_to: user } ] }
  - { id: 143, name: programmer, model: builtin/rules,
      rules: [ { when: manager, do: "fn main() {} // {{message}}", send_to: manager } ] }
"#;

fn rule(when: &str, action: &str, send_to: &[&str]) -> RuleDraft {
    RuleDraft {
        when: when.into(),
        action: action.into(),
        send_to: send_to.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn example_draft() -> AgencyDraft {
    AgencyDraft {
        name: "studio".into(),
        handle: None,
        protocol: "json".into(),
        manager: "manager".into(),
        max_hops: Some(16),
        turn_deadline_secs: None,
        providers: vec![],
        agents: vec![
            AgentDraft {
                id: Some(4522),
                name: "manager".into(),
                handle: None,
                role: None,
                model: "builtin/rules".into(),
                temperature: None,
                top_p: None,
                max_tokens: None,
                instructions: Some("You run a studio.".into()),
                reflection_threshold: None,
                reflection_half_life_hours: None,
                rules: vec![
                    rule("user", "Please build: {{message}}", &["programmer"]),
                    rule("programmer", "Done: {{message}}", &["user"]),
                ],
                ..Default::default()
            },
            AgentDraft {
                id: Some(143),
                name: "programmer".into(),
                handle: None,
                role: None,
                model: "builtin/rules".into(),
                temperature: None,
                top_p: None,
                max_tokens: None,
                instructions: None,
                reflection_threshold: None,
                reflection_half_life_hours: None,
                rules: vec![rule("manager", "fn main() {} // {{message}}", &["manager"])],
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

fn parse(text: &str) -> AgencyFile {
    match AgencyFile::parse("studio.yaml", text) {
        Ok(file) => file,
        Err(e) => panic!("should parse:\n{e}\n---\n{text}"),
    }
}

/// The one problem a bad file has.
fn problem(text: &str) -> Problem {
    let e = AgencyFile::parse("bad.yaml", text).expect_err("should not parse");
    assert_eq!(e.problems.len(), 1, "one problem expected: {e}");
    e.problems.into_iter().next().unwrap()
}

fn validate(file: &AgencyFile) -> FileError {
    let errors = file
        .draft
        .validate(AgencyId::new(), "local", &|_| true)
        .expect_err("should not validate");
    file.locate(errors)
}

#[test]
fn the_example_parses_into_the_draft() {
    let file = parse(EXAMPLE);
    let d = &file.draft;
    assert_eq!(d.name, "studio");
    assert_eq!(d.manager, "manager");
    assert_eq!(d.max_hops, Some(16));
    assert_eq!(d.agents[0].id, Some(4522));
    assert_eq!(d.agents[1].id, Some(143));
    assert_eq!(d.agents[1].name, "programmer");
    assert_eq!(d.agents[0].rules[0].send_to, vec!["programmer"]);
    assert_eq!(d.agents[0].rules[1].action, "Done: {{message}}");
    assert_eq!(*d, example_draft());
    // And it is a valid agency.
    let agency = d.validate(AgencyId::new(), "local", &|_| true).unwrap();
    assert_eq!(agency.manager.get(), 4522);
}

#[test]
fn defaults_and_lists_of_recipients() {
    let file = parse(
        "name: s\nmanager: m\nagents:\n  - name: m\n    model: builtin/rules\n    rules:\n      \
         - when: any\n        do: x\n        send_to: [a, b]\n      - when: any\n        do: y\n        \
         send_to:\n          - c\n",
    );
    let d = &file.draft;
    assert_eq!(d.protocol, "json", "protocol defaults to json");
    assert_eq!(d.handle, None);
    assert_eq!(d.max_hops, None);
    assert_eq!(d.turn_deadline_secs, None);
    assert_eq!(d.agents[0].id, None);
    assert_eq!(d.agents[0].instructions, None);
    assert_eq!(d.agents[0].rules[0].send_to, vec!["a", "b"]);
    assert_eq!(d.agents[0].rules[1].send_to, vec!["c"]);
}

#[test]
fn null_is_absent_but_quoted_null_is_text() {
    let d = parse(
        "name: s\nhandle: null\nprotocol:\nmanager: m\nmax_hops: ~\nagents:\n  - name: m\n    \
         model: builtin/rules\n    role: \"null\"\n    instructions: ''\n    rules: null\n",
    )
    .draft;
    assert_eq!(d.handle, None);
    assert_eq!(d.protocol, "json");
    assert_eq!(d.max_hops, None);
    assert_eq!(d.agents[0].role.as_deref(), Some("null"));
    assert_eq!(d.agents[0].instructions.as_deref(), Some(""));
    assert!(d.agents[0].rules.is_empty());
}

#[test]
fn the_same_agency_as_json_parses_identically() {
    let json = serde_json::json!({
        "name": "studio",
        "protocol": "json",
        "manager": "manager",
        "max_hops": 16,
        "agents": [
            { "id": 4522, "name": "manager", "model": "builtin/rules",
              "instructions": "You run a studio.",
              "rules": [
                  { "when": "user", "do": "Please build: {{message}}", "send_to": "programmer" },
                  { "when": "programmer", "do": "Done: {{message}}", "send_to": ["user"] }
              ] },
            { "id": 143, "name": "programmer", "model": "builtin/rules", "handle": null,
              "rules": [ { "when": "manager", "do": "fn main() {} // {{message}}", "send_to": "manager" } ] }
        ]
    });
    for text in [
        serde_json::to_string(&json).unwrap(),
        serde_json::to_string_pretty(&json).unwrap(),
    ] {
        assert_eq!(parse(&text).draft, example_draft(), "{text}");
    }
}

#[test]
fn validation_errors_point_at_their_lines() {
    let broken = EXAMPLE
        .replace("manager: manager", "manager: boss")
        .replace("send_to: manager } ] }", "send_to: [nobody] } ] }");
    let e = validate(&parse(&broken));
    let at = |path: &str| {
        let p = e
            .problems
            .iter()
            .find(|p| p.path == path)
            .unwrap_or_else(|| panic!("no problem at {path}: {e}"));
        (p.line, p.column)
    };
    assert_eq!(at("manager"), (Some(3), Some(10)));
    let (line, column) = at("agents[1].rules[0].send_to");
    assert_eq!(line, Some(10));
    assert_eq!(
        column,
        Some(broken.lines().nth(9).unwrap().find("[nobody]").unwrap() + 1)
    );
    let text = e.to_string();
    assert!(
        text.contains("studio.yaml:3:10: manager: `boss` is not one of the agents"),
        "{text}"
    );
    assert!(text.contains("studio.yaml:10:"), "{text}");
}

#[test]
fn block_style_positions_and_parent_fallback() {
    let text = "name: studio\nmanager: m\nagents:\n  - name: m\n    model: builtin/rules\n  \
                - id: 7\n    name: m\n    model: nope\n    rules:\n      - when: user\n        \
                do: hi\n        send_to: []\n";
    let file = parse(text);
    let e = validate(&file);
    let find = |path: &str| e.problems.iter().find(|p| p.path == path).unwrap();
    // A list item is found at its first key, not at the `:` where marked-yaml marks it.
    assert_eq!(find("agents[1].name").line, Some(7));
    assert_eq!(find("agents[1].model").line, Some(8));
    assert_eq!(find("agents[1].model").column, Some(12));
    assert_eq!(find("agents[1].rules[0].send_to").line, Some(12));

    // Paths the file has no field for fall back to the closest parent, then to nothing.
    let errors = |path: &str| {
        agency_core::ValidationErrors(vec![agency_core::ValidationError {
            path: path.into(),
            message: "m".into(),
        }])
    };
    let p = &file.locate(errors("agents[1].handle")).problems[0];
    assert_eq!((p.line, p.column), (Some(6), Some(5)));
    let p = &file.locate(errors("agents[0].rules[3].when")).problems[0];
    assert_eq!(p.line, Some(4), "agents[0] itself");
    let p = &file.locate(errors("elsewhere")).problems[0];
    assert_eq!((p.line, p.column), (None, None));
    assert_eq!(
        file.locate(errors("elsewhere")).to_string(),
        "studio.yaml: elsewhere: m"
    );
}

#[test]
fn a_syntax_error_has_a_line() {
    let p = problem("name: studio\nmanager: [m\nagents: []\n");
    assert!(p.line.is_some_and(|l| l >= 2), "{p:?}");
    assert!(p.message.starts_with("YAML syntax error:"), "{p:?}");

    let p = problem("name: studio\n  manager: m\n");
    assert_eq!(p.line, Some(2));
    assert!(
        p.message.contains("mapping values are not allowed"),
        "{p:?}"
    );
}

#[test]
fn a_wrong_type_has_a_line_and_says_what_was_found() {
    let p = problem("name: s\nmanager: m\nmax_hops: lots\nagents: []\n");
    assert_eq!((p.line, p.column), (Some(3), Some(11)));
    assert_eq!(p.path, "max_hops");
    assert_eq!(p.message, "must be a whole number, found `lots`");

    let p = problem("name: s\nmanager: m\nagents:\n  - name: [a]\n    model: builtin/rules\n");
    assert_eq!((p.line, p.path.as_str()), (Some(4), "agents[0].name"));
    assert_eq!(p.message, "must be text, found a list");

    let p = problem("name: s\nmanager: m\nagents:\n  - name: a\n    model: x\n    id: -1\n");
    assert_eq!((p.line, p.path.as_str()), (Some(6), "agents[0].id"));

    let p = problem("name: s\nmanager: m\nturn_deadline_secs: 99999999999999999999\nagents: []\n");
    assert_eq!(p.line, Some(3));
    assert!(p.message.contains("too large"), "{p:?}");

    let p = problem("name: s\nmanager: m\nagents: manager\n");
    assert_eq!((p.line, p.path.as_str()), (Some(3), "agents"));
    assert!(p.message.contains("must be a list of agents"), "{p:?}");

    let p = problem("name: s\nmanager: m\nagents:\n  - just-a-name\n");
    assert_eq!((p.line, p.path.as_str()), (Some(4), "agents[0]"));
    assert!(p.message.contains("expected an agent"), "{p:?}");
}

#[test]
fn an_unknown_field_is_named_with_its_line() {
    let p = problem(
        "name: s\nmanager: m\nagents:\n  - name: m\n    model: builtin/rules\n    rules:\n      \
         - when: user\n        do: x\n        sendto: user\n        send_to: user\n",
    );
    assert_eq!((p.line, p.column), (Some(9), Some(9)));
    assert_eq!(p.path, "agents[0].rules[0].sendto");
    assert!(p.message.contains("unknown field `sendto`"), "{p:?}");
    assert!(p.message.contains("did you mean `send_to`?"), "{p:?}");

    let p = problem("name: s\nmanager: m\ncolour: blue\nagents: []\n");
    assert_eq!((p.line, p.path.as_str()), (Some(3), "colour"));
}

#[test]
fn missing_fields_are_each_reported() {
    let e = AgencyFile::parse(
        "bad.yaml",
        "name: s\nagents:\n  - name: a\n  - model: builtin/rules\n    rules: [{when: user}]\n",
    )
    .unwrap_err();
    let got: Vec<(Option<usize>, &str)> = e
        .problems
        .iter()
        .map(|p| (p.line, p.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(1), "manager"),
            (Some(3), "agents[0].model"),
            (Some(4), "agents[1].name"),
            (Some(5), "agents[1].rules[0].do"),
            (Some(5), "agents[1].rules[0].send_to"),
        ],
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("bad.yaml:3:5: agents[0].model: an agent needs a `model` field"),
        "{e}"
    );
    let p = problem("name:\nmanager: m\nagents: []\n");
    assert_eq!((p.line, p.path.as_str()), (Some(1), "name"));
    assert!(p.message.contains("needs a value"), "{p:?}");
}

#[test]
fn the_top_level_must_be_a_mapping() {
    for text in ["- name: s\n", "just text\n", "[1, 2]", "---\n"] {
        let p = problem(text);
        assert!(p.line.is_some(), "{text:?}: {p:?}");
        assert!(p.message.contains("must be a mapping"), "{text:?}: {p:?}");
    }
    // An empty file is an empty mapping: every required field is missing.
    let e = AgencyFile::parse("empty.yaml", "").unwrap_err();
    assert_eq!(e.problems.len(), 3, "{e}");
}

#[test]
fn what_marked_yaml_would_let_through_silently_is_an_error() {
    let p = problem("name: a\nmanager: m\nname: b\nagents: []\n");
    assert_eq!(p.line, Some(3));
    assert!(p.message.contains("`name` is given twice"), "{p:?}");
    assert!(p.message.contains("first on line 1"), "{p:?}");

    let p = problem("name: a\nmanager: m\nagents: []\n---\nname: b\n");
    assert_eq!(p.line, Some(5));
    assert!(p.message.contains("second YAML document"), "{p:?}");

    // A document end marker with nothing after it is fine, and so is a leading `---`.
    parse("---\nname: a\nmanager: m\nagents: []\n...\n");

    let p = problem("name: &n a\nmanager: *n\nagents: []\n");
    assert_eq!(p.line, Some(1));
    assert!(p.message.contains("anchors"), "{p:?}");
}

#[test]
fn byte_order_marks_and_crlf_are_fine() {
    let text = format!("\u{feff}{}", EXAMPLE.replace('\n', "\r\n"));
    let file = parse(&text);
    assert_eq!(file.draft, example_draft());
    let bad = "\u{feff}manager: m\r\nname: s\r\nagents: []\r\nbogus: 1\r\n";
    let p = problem(bad);
    assert_eq!((p.line, p.column), (Some(4), Some(1)));
}

#[test]
fn to_yaml_is_readable() {
    let yaml = to_yaml(&example_draft());
    assert_eq!(
        yaml,
        r#"name: studio
protocol: json
manager: manager
max_hops: 16
agents:
  - id: 4522
    name: manager
    model: builtin/rules
    instructions: You run a studio.
    rules:
      - when: user
        do: "Please build: {{message}}"
        send_to: [programmer]
      - when: programmer
        do: "Done: {{message}}"
        send_to: [user]
  - id: 143
    name: programmer
    model: builtin/rules
    rules:
      - when: manager
        do: "fn main() {} // {{message}}"
        send_to: [manager]
"#
    );
}

fn round_trip(d: &AgencyDraft) {
    let yaml = to_yaml(d);
    match AgencyFile::parse("round-trip.yaml", &yaml) {
        Ok(file) => assert_eq!(file.draft, *d, "written as:\n{yaml}"),
        Err(e) => panic!("does not read back:\n{e}\nwritten as:\n{yaml}"),
    }
}

const TRICKY: &[&str] = &[
    "",
    " ",
    "  leading spaces",
    "trailing spaces  ",
    "say \"hi\"",
    "it's",
    "'single'",
    "key: value",
    "ends with colon:",
    "# not a comment",
    "a # b",
    "line one\nline two",
    "line one\nline two\n",
    "line one\n\n  indented\n\n\n",
    "\nstarts with a newline",
    "\n",
    "\n\n",
    "tab\there",
    "back\\slash",
    "crlf\r\nline",
    "null",
    "~",
    "true",
    "no",
    "12",
    "0x1f",
    "1e3",
    "-",
    "- item",
    "---",
    "...",
    "[a, b]",
    "{a: b}",
    "*alias",
    "&anchor",
    "!tag",
    "%directive",
    "@at",
    "`tick`",
    "|",
    ">",
    "?",
    "日本語のテキスト",
    "émoji 🎉",
    "\u{0}\u{7}\u{1b}\u{7f}\u{85}\u{a0}\u{2028}\u{2029}\u{feff}\u{fffe}",
    "{{message}}",
];

#[test]
fn tricky_strings_round_trip() {
    for s in TRICKY {
        let s = s.to_string();
        let d = AgencyDraft {
            name: s.clone(),
            handle: Some(s.clone()),
            protocol: s.clone(),
            manager: s.clone(),
            max_hops: Some(0),
            turn_deadline_secs: Some(u64::MAX),
            providers: vec![ProviderDraft {
                name: s.clone(),
                kind: s.clone(),
                base_url: Some(s.clone()),
                api_key_env: Some(s.clone()),
                max_concurrency: Some(u32::MAX),
                requests_per_minute: Some(0),
                prices: vec![(
                    s.clone(),
                    agency_core::PriceDraft {
                        input: s.clone(),
                        output: s.clone(),
                    },
                )],
            }],
            agents: vec![AgentDraft {
                id: Some(u32::MAX),
                name: s.clone(),
                handle: Some(s.clone()),
                role: Some(s.clone()),
                model: s.clone(),
                temperature: Some(-0.5),
                top_p: Some(1e-9),
                max_tokens: Some(u32::MAX),
                instructions: Some(s.clone()),
                reflection_threshold: Some(1e-300),
                reflection_half_life_hours: Some(-3.5),
                rules: vec![
                    RuleDraft {
                        when: s.clone(),
                        action: s.clone(),
                        send_to: vec![s.clone()],
                        ..Default::default()
                    },
                    RuleDraft {
                        when: s.clone(),
                        action: s.clone(),
                        send_to: vec![s.clone(), s.clone()],
                        ..Default::default()
                    },
                    RuleDraft {
                        when: s.clone(),
                        action: s.clone(),
                        send_to: vec![],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        round_trip(&d);
    }
}

#[test]
fn empty_and_absent_round_trip() {
    round_trip(&AgencyDraft::default());
    round_trip(&AgencyDraft {
        agents: vec![AgentDraft::default(), AgentDraft::default()],
        ..Default::default()
    });
    round_trip(&example_draft());
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z]{1,8}",
        "[ a-zA-Z0-9:#'\"\\\\{}\\[\\],&*!|>%@`~?.-]{0,16}",
        "[a-z]{1,4}(\n{1,3}[ ]{0,3}[a-z #:-]{0,6}){1,4}\n{0,3}",
        "[ \n\t\r\u{85}\u{a0}\u{2028}\u{feff}a]{0,8}",
        prop::sample::select(TRICKY).prop_map(String::from),
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

prop_compose! {
    fn rule_draft()(when in text(), action in text(),
                    send_to in prop::collection::vec(text(), 0..3),
                    call in prop::option::of(text()),
                    with in prop::option::of(json_value().prop_filter("null is no value", |v| !v.is_null()))) -> RuleDraft {
        RuleDraft { when, action, send_to, call, with }
    }
}

fn decimal() -> impl Strategy<Value = Option<f64>> {
    prop::option::of(prop_oneof![
        -1e9f64..1e9,
        Just(0.0),
        Just(1.0),
        Just(0.1),
        Just(2.5e-7)
    ])
}

prop_compose! {
    fn approval()(approve in prop::collection::vec(text(), 0..3),
                  timeout in any::<Option<u64>>(),
                  on_timeout in prop::option::of(text()),
                  edits in any::<Option<bool>>())
                  -> (Vec<String>, Option<u64>, Option<String>, Option<bool>) {
        (approve, timeout, on_timeout, edits)
    }
}

prop_compose! {
    fn agent_draft()(id in any::<Option<u32>>(), name in text(),
                     handle in prop::option::of(text()), role in prop::option::of(text()),
                     model in text(), temperature in decimal(), top_p in decimal(),
                     max_tokens in any::<Option<u32>>(), instructions in prop::option::of(text()),
                     rules in prop::collection::vec(rule_draft(), 0..3),
                     memory in (decimal(), decimal(), any::<Option<bool>>()),
                     tools in prop::collection::vec(text(), 0..3),
                     approval in approval().boxed()) -> AgentDraft {
        let (approve, approve_timeout_secs, approve_on_timeout, approve_edits) = approval;
        let (reflection_threshold, reflection_half_life_hours, observe_chats) = memory;
        AgentDraft { id, name, handle, role, model, temperature, top_p, max_tokens, instructions, rules,
                     reflection_threshold, reflection_half_life_hours, observe_chats, tools, approve,
                     approve_timeout_secs, approve_on_timeout, approve_edits }
    }
}

prop_compose! {
    fn provider_drafts()(names in prop::collection::btree_set("[a-z][a-z0-9_-]{0,7}", 0..3),
                         kind in text(), base_url in prop::option::of(text()),
                         api_key_env in prop::option::of(text()),
                         max_concurrency in any::<Option<u32>>(),
                         requests_per_minute in any::<Option<u32>>(),
                         prices in prop::collection::btree_map(text(), (text(), text()), 0..3)) -> Vec<ProviderDraft> {
        names
            .into_iter()
            .map(|name| ProviderDraft {
                name,
                kind: kind.clone(),
                base_url: base_url.clone(),
                api_key_env: api_key_env.clone(),
                max_concurrency,
                requests_per_minute,
                prices: prices
                    .iter()
                    .map(|(m, (input, output))| {
                        (m.clone(), agency_core::PriceDraft { input: input.clone(), output: output.clone() })
                    })
                    .collect(),
            })
            .collect()
    }
}

prop_compose! {
    fn mcp_server_drafts()(names in prop::collection::btree_set("[a-z][a-z0-9_-]{0,7}", 0..3),
                           url in prop::option::of(text()), command in prop::option::of(text()),
                           args in prop::collection::vec(text(), 0..3),
                           env in prop::collection::btree_map(text(), text(), 0..3),
                           headers_env in prop::collection::btree_map(text(), text(), 0..2),
                           timeout_secs in any::<Option<u64>>(),
                           max_concurrency in any::<Option<u32>>()) -> Vec<McpServerDraft> {
        names
            .into_iter()
            .map(|name| McpServerDraft {
                name,
                url: url.clone(),
                command: command.clone(),
                args: args.clone(),
                env: env.clone().into_iter().collect(),
                headers_env: headers_env.clone().into_iter().collect(),
                timeout_secs,
                max_concurrency,
            })
            .collect()
    }
}

prop_compose! {
    fn agency_draft()(name in text(), handle in prop::option::of(text()), protocol in text(),
                      manager in text(),
                      limits in (any::<Option<u32>>(), any::<Option<u64>>(),
                                 prop::option::of(text()), prop::option::of(text()),
                                 prop::option::of(text())),
                      providers in provider_drafts(),
                      mcp_servers in mcp_server_drafts(),
                      agents in prop::collection::vec(agent_draft().boxed(), 0..3)) -> AgencyDraft {
        let (max_hops, turn_deadline_secs, max_turn_cost_usd, budget_usd, budget_period) = limits;
        AgencyDraft { name, handle, protocol, manager, max_hops, turn_deadline_secs, max_turn_cost_usd, budget_usd, budget_period, providers, mcp_servers, agents }
    }
}

/// Every draft written as YAML reads back as itself. Run on a thread with a larger stack: a
/// whole draft's strategy (nested JSON arguments inside rules inside agents) builds its value
/// trees recursively, deeper than a test thread's 2 MiB in a debug build.
#[test]
fn every_draft_round_trips() {
    let run = || {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(512));
        let checked = runner.run(&agency_draft(), |d| {
            let yaml = to_yaml(&d);
            let file = AgencyFile::parse("p.yaml", &yaml);
            prop_assert!(file.is_ok(), "{}\nwritten as:\n{yaml}", file.unwrap_err());
            prop_assert_eq!(file.unwrap().draft, d, "written as:\n{}", yaml);
            Ok(())
        });
        if let Err(e) = checked {
            panic!("{e}");
        }
    };
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_gets_an_answer_not_a_panic(text in prop_oneof![
        any::<String>(),
        "[a-z_ :\n\t#'\"\\[\\]{},&*!|>%@?~-]{0,60}",
    ]) {
        let _ = AgencyFile::parse("fuzz.yaml", &text);
    }

    #[test]
    fn a_damaged_file_gets_an_answer_not_a_panic(cut in 0..EXAMPLE.len(), junk in "[ \n:\\[\\]{}\"'#,-]{0,4}") {
        if let Some(head) = EXAMPLE.get(..cut) {
            let tail = &EXAMPLE[cut..];
            let _ = AgencyFile::parse("fuzz.yaml", &format!("{head}{junk}{tail}"));
        }
    }
}

#[test]
fn providers_and_sampling_read_and_locate() {
    let text = "name: mixed
providers:
  local:
    kind: openai
    base_url: http://127.0.0.1:11434/v1
  claude: { kind: anthropic, api_key_env: ANTHROPIC_API_KEY }
manager: boss
agents:
  - name: boss
    model: claude/claude-sonnet-4-5
    temperature: 0.3
    max_tokens: 800
  - { name: coder, model: local/qwen2.5, top_p: 0.9 }
";
    let file = parse(text);
    let d = &file.draft;
    assert_eq!(
        d.providers,
        vec![
            ProviderDraft {
                name: "local".into(),
                kind: "openai".into(),
                base_url: Some("http://127.0.0.1:11434/v1".into()),
                ..Default::default()
            },
            ProviderDraft {
                name: "claude".into(),
                kind: "anthropic".into(),
                api_key_env: Some("ANTHROPIC_API_KEY".into()),
                ..Default::default()
            },
        ]
    );
    assert_eq!(
        (
            d.agents[0].temperature,
            d.agents[0].max_tokens,
            d.agents[0].top_p
        ),
        (Some(0.3), Some(800), None)
    );
    assert_eq!(d.agents[1].top_p, Some(0.9));
    round_trip(d);

    // The core's errors land on the right lines.
    let mut broken = d.clone();
    broken.providers[0].kind = "openia".into();
    broken.agents[0].temperature = Some(7.0);
    let errors = broken
        .validate(agency_core::AgencyId::new(), "local", &|_| false)
        .unwrap_err();
    let located = file.locate(errors).to_string();
    assert!(
        located.contains("studio.yaml:4:11: providers.local.kind: `openia` is not a provider kind"),
        "{located}"
    );
    assert!(
        located.contains("studio.yaml:11:18: agents[0].temperature: must be from 0 to 2"),
        "{located}"
    );

    let bad = AgencyFile::parse(
        "bad.yaml",
        "name: x\nmanager: a\nproviders: [openai]\nagents: []\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("bad.yaml:3:12: providers: must map provider names to settings"),
        "{bad}"
    );
    let bad = AgencyFile::parse(
        "bad.yaml",
        "name: x\nmanager: a\nagents: [{name: a, model: b/c, temperature: hot}]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("agents[0].temperature: must be a number"),
        "{bad}"
    );
}

#[test]
fn server_configuration_names_providers() {
    let text = "providers:\n  vllm: { kind: openai, base_url: \"http://10.0.0.5:8000/v1\", max_concurrency: 4 }\n  claude:\n    kind: anthropic\n    requests_per_minute: 50\n";
    let config = agency_file::ConfigFile::parse("agency.yaml", text).unwrap();
    let providers = config.validate().unwrap();
    assert_eq!(providers.len(), 2);
    assert_eq!(
        (providers[0].name.as_str(), providers[0].max_concurrency),
        ("vllm", Some(4))
    );
    assert_eq!(providers[1].requests_per_minute, Some(50));

    let bad = agency_file::ConfigFile::parse("agency.yaml", "providers:\n  x: { kind: openia }\n")
        .unwrap();
    let e = bad.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("agency.yaml:2:14: providers.x.kind: `openia` is not a provider kind"),
        "{e}"
    );
    let e = agency_file::ConfigFile::parse("agency.yaml", "providers: {}\nagents: []\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown field `agents` in a server configuration"),
        "{e}"
    );
}

#[test]
fn memory_settings_read_locate_and_round_trip() {
    let text = "name: plant
manager: boss
agents:
  - name: boss
    model: builtin/rules
    reflection_threshold: 1.5
    reflection_half_life_hours: 6
  - { name: watcher, model: builtin/rules }
";
    let file = parse(text);
    let d = &file.draft;
    assert_eq!(d.agents[0].reflection_threshold, Some(1.5));
    assert_eq!(d.agents[0].reflection_half_life_hours, Some(6.0));
    assert_eq!(d.agents[1].reflection_threshold, None);
    round_trip(d);
    let a = d
        .validate(agency_core::AgencyId::new(), "local", &|_| true)
        .unwrap();
    assert_eq!(a.agents[0].memory.policy().threshold, 1.5);
    assert_eq!(a.agents[0].memory.policy().half_life_hours, 6.0);
    // Unset: the documented defaults.
    assert_eq!(a.agents[1].memory.policy().threshold, 2.0);
    assert_eq!(a.agents[1].memory.policy().half_life_hours, 24.0);
    // Exported and read back: the same agency.
    let again = parse(&to_yaml(&a.to_draft()));
    assert_eq!(again.draft.agents[0].reflection_threshold, Some(1.5));

    let mut broken = d.clone();
    broken.agents[0].reflection_threshold = Some(0.0);
    broken.agents[0].reflection_half_life_hours = Some(-1.0);
    let located = file
        .locate(
            broken
                .validate(agency_core::AgencyId::new(), "local", &|_| true)
                .unwrap_err(),
        )
        .to_string();
    assert!(
        located
            .contains("studio.yaml:6:27: agents[0].reflection_threshold: must be a number above 0"),
        "{located}"
    );
    assert!(
        located.contains("studio.yaml:7:33: agents[0].reflection_half_life_hours: must be a number of hours above 0"),
        "{located}"
    );
}

#[test]
fn prices_are_read_exactly_and_written_back() {
    let text = "name: priced\nmanager: boss\nproviders:\n  openai:\n    kind: openai\n    prices:\n      gpt-4o: { input: 2.50, output: 10 }\n      gpt-4o-mini:\n        input: 0.15\n        output: 0.6\nagents:\n  - name: boss\n    model: openai/gpt-4o\n";
    let file = parse(text);
    let agency = file
        .draft
        .validate(
            agency_core::AgencyId::new(),
            "local",
            &|_: &agency_core::ModelRef| true,
        )
        .unwrap();
    assert_eq!(
        agency.providers[0].prices,
        vec![
            (
                "gpt-4o".to_string(),
                agency_core::Price {
                    input: 2_500_000,
                    output: 10_000_000
                }
            ),
            (
                "gpt-4o-mini".to_string(),
                agency_core::Price {
                    input: 150_000,
                    output: 600_000
                }
            ),
        ]
    );
    // Exported, an agency's prices are the shortest decimals that read back the same.
    let written = agency_file::to_yaml(&agency.to_draft());
    assert!(
        written.contains("      gpt-4o:\n        input: 2.5\n        output: 10\n"),
        "{written}"
    );
    assert_eq!(
        parse(&written)
            .draft
            .validate(agency.id, "local", &|_: &agency_core::ModelRef| true)
            .unwrap()
            .providers,
        agency.providers
    );

    for (price, wanted) in [
        ("{ input: -1, output: 1 }", "is not an amount of dollars"),
        ("{ input: 0.0000001, output: 1 }", "more than six decimals"),
        ("{ input: 1 }", "output"),
        (
            "{ input: 1, output: 1, cached: 1 }",
            "unknown field `cached`",
        ),
    ] {
        let text = format!(
            "name: p\nmanager: b\nproviders:\n  openai:\n    kind: openai\n    prices:\n      m: {price}\nagents:\n  - name: b\n    model: builtin/rules\n"
        );
        let file = agency_file::AgencyFile::parse("p.yaml", &text);
        let p = match file {
            Err(e) => e.problems[0].clone(),
            Ok(f) => validate(&f).problems[0].clone(),
        };
        assert!(p.message.contains(wanted), "{price}: {p:?}");
        assert_eq!(p.line, Some(7), "{price}: {p:?}");
    }
}

#[test]
fn hostile_nesting_sizes_and_aliases_are_refused_before_anything_recursive_reads_them() {
    // Block nesting: `- - - …` on one line, and indented lists; both once overflowed the stack.
    for text in [
        "- ".repeat(5000),
        "- ".repeat(200_000),
        (0..300)
            .map(|i| format!("{}- \n", "  ".repeat(i)))
            .collect(),
        (0..300).map(|i| format!("{}a:\n", " ".repeat(i))).collect(),
        format!("name: {}", "[".repeat(100_000)),
        format!("name: {}", "{a: ".repeat(100_000)),
    ] {
        let p = problem(&text);
        assert!(p.message.contains("nest more than 64 deep"), "{p:?}");
        assert!(p.line.is_some(), "{p:?}");
    }
    // 64 levels are read (and then refused for what they mean, not for their depth).
    let e = AgencyFile::parse("deep.yaml", &format!("name: {}", "[".repeat(63))).unwrap_err();
    assert!(!e.to_string().contains("nest more than"), "{e}");

    // A "billion laughs": refused at its first anchor, never expanded.
    let mut laughs =
        String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (i, c) in ('b'..='j').enumerate() {
        let prev = (b'a' + i as u8) as char;
        laughs.push_str(&format!(
            "{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
    }
    let p = problem(&laughs);
    assert_eq!(p.line, Some(1));
    assert!(p.message.contains("anchors and aliases"), "{p:?}");

    // A huge file, and a huge scalar in it: refused by size, with the limit named.
    let p = problem(&format!("name: {}\n", "x".repeat(2 << 20)));
    assert!(p.message.contains("at most 1024 KiB"), "{p:?}");
}

#[test]
fn tools_and_mcp_servers_read_and_their_problems_have_lines() {
    let text = r#"name: library
manager: clerk
mcp_servers:
  files: { command: npx, args: [-y, server-filesystem] }
  search: { url: "https://mcp.example.com/mcp", headers_env: { Authorization: TOKEN } }
agents:
  - name: clerk
    model: builtin/rules
    tools: [files/read_text_file, builtin/*]
    rules:
      - { when: user, call: files/read_text_file, with: { path: "{{message}}", n: 3, ok: true, s: "3" },
          do: "Here: {{result}}", send_to: user }
      - { when: any, call: builtin/now, do: "{{result}}", send_to: user }
      - { when: any, call: other/x, do: x, send_to: user }
"#;
    let file = parse(text);
    let rule = &file.draft.agents[0].rules[0];
    assert_eq!(rule.call.as_deref(), Some("files/read_text_file"));
    assert_eq!(
        rule.with,
        Some(serde_json::json!({"path": "{{message}}", "n": 3, "ok": true, "s": "3"}))
    );
    assert_eq!(
        file.draft.agents[0].tools,
        ["files/read_text_file", "builtin/*"]
    );
    assert_eq!(file.draft.mcp_servers[0].args, ["-y", "server-filesystem"]);
    let e = validate(&file);
    let at = |path: &str| {
        e.problems
            .iter()
            .find(|p| p.path == path)
            .unwrap_or_else(|| panic!("no problem at {path}: {e}"))
    };
    // From an account: no process, no server variables.
    assert_eq!(at("mcp_servers.files.command").line, Some(4));
    assert!(
        at("mcp_servers.files.command")
            .message
            .contains("only the server's own configuration")
    );
    assert_eq!(at("mcp_servers.search.headers_env").line, Some(5));
    // A rule may call only its agent's tools.
    let p = at("agents[0].rules[2].call");
    assert_eq!(p.line, Some(14));
    assert!(
        p.message.contains("not one of this agent's tools"),
        "{}",
        p.message
    );
    assert_eq!(e.problems.len(), 3, "{e}");
    // Written back, it reads the same.
    assert_eq!(parse(&to_yaml(&file.draft)).draft, file.draft);
}

/// Every field of every draft type is written and read back: a field the writer or the reader
/// dropped would leave the draft unequal. (`every_field` sets them all; its own tests say so.)
#[test]
fn every_field_survives_the_file() {
    let d = agency_core::draft::every_field();
    round_trip(&d);
    let yaml = to_yaml(&d);
    assert!(
        yaml.contains("        with:\n          deep:\n            list: [1, x]\n"),
        "a rule's arguments are a block mapping:\n{yaml}"
    );
    assert!(
        yaml.contains("      small:\n        input: 2.5\n        output: 10\n"),
        "prices are numbers:\n{yaml}"
    );
}
