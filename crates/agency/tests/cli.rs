//! End-to-end tests of the `agency` binary: each test runs the real executable against its own
//! SQLite database in its own temporary directory, and checks what a person at a terminal would
//! see (standard output, standard error, exit code).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

mod common;
use common::{Server, agency, http, studio_answer};

/// What the demo agency answers to "a todo app".
const TODO_ANSWER: &str = "Here is your reviewed build. Approved: Please review: fn main() { /* Please build: a todo app */ }";

/// A small agency in the other protocol: the desk hands a ticket to the tech, who hands the fix
/// to the writer, who gives the documented fix back to the desk, who answers.
const HELPDESK: &str = r#"# A help desk, for the CLI tests.
name: helpdesk
protocol: directives
manager: desk
max_hops: 12
turn_deadline_secs: 60
agents:
  - id: 1
    name: desk
    role: takes tickets
    model: builtin/rules
    instructions: You take tickets from users and hand them to the tech.
    rules:
      - when: user
        do: "Ticket: {{message}}"
        send_to: [tech]
      - when: writer
        do: "Resolved. {{message}}"
        send_to:
          - user
  - id: 2
    name: tech
    role: fixes things
    model: builtin/rules
    rules:
      - when: desk
        do: "Patched ({{message}})"
        send_to: [writer]
  - id: 3
    name: writer
    model: builtin/rules
    rules:
      - { when: tech, do: "Documented: {{message}}", send_to: [desk] }
"#;

fn helpdesk_answer(word: &str, message: &str) -> String {
    format!("{word} Documented: Patched (Ticket: {message})")
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A temporary directory with a database in it; commands run with it as their working directory.
struct Env {
    dir: TempDir,
    db: String,
}

/// What a finished command left behind.
#[derive(Debug)]
struct Out {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Out {
    #[track_caller]
    fn success(self) -> Self {
        assert!(
            self.status.success(),
            "expected success, got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// A failure reported the way the binary reports its own errors: exit code 1, a message
    /// starting with `error: `, and no panic.
    #[track_caller]
    fn error(self) -> Self {
        assert_eq!(
            self.status.code(),
            Some(1),
            "expected exit code 1\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert!(
            self.stderr.starts_with("error: "),
            "stderr should start with `error: `:\n{}",
            self.stderr
        );
        self.no_panic()
    }

    /// A command-line usage error (clap's exit code 2).
    #[track_caller]
    fn usage_error(self) -> Self {
        assert_eq!(
            self.status.code(),
            Some(2),
            "expected a usage error\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert!(self.stdout.is_empty(), "stdout: {}", self.stdout);
        self.no_panic()
    }

    #[track_caller]
    fn no_panic(self) -> Self {
        for bad in ["panicked", "backtrace", "RUST_BACKTRACE"] {
            assert!(
                !self.stderr.contains(bad),
                "stderr mentions `{bad}`:\n{}",
                self.stderr
            );
        }
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

fn output(mut cmd: Command) -> Out {
    let out = cmd.output().expect("run the agency binary");
    Out {
        status: out.status,
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let db = format!("sqlite://{}", dir.path().join("a.db").display());
        Self { dir, db }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `agency --db sqlite://<dir>/a.db`, run in the directory.
    fn cmd(&self) -> Command {
        let mut cmd = agency();
        cmd.current_dir(self.path()).arg("--db").arg(&self.db);
        cmd
    }

    fn run(&self, args: &[&str]) -> Out {
        let mut cmd = self.cmd();
        cmd.args(args);
        output(cmd)
    }

    /// Runs with `input` on standard input, then end of input.
    fn run_with_input(&self, args: &[&str], input: &str) -> Out {
        let mut cmd = self.cmd();
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the agency binary");
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = input.to_string();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("wait for agency");
        writer.join().expect("writer thread").expect("write stdin");
        Out {
            status: out.status,
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        }
    }

    /// Writes a file in the directory; returns its name relative to the directory.
    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.path().join(name), text).expect("write a test file");
        name.to_string()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).expect("read a test file")
    }

    fn list(&self) -> String {
        self.run(&["list"]).success().stdout
    }

    /// `chat NAME --message TEXT --json` (continuing `conversation` if given).
    fn chat_json(&self, name: &str, message: &str, conversation: Option<&str>) -> Value {
        let mut args = vec!["chat", name, "--message", message, "--json"];
        if let Some(id) = conversation {
            args.extend(["--conversation", id]);
        }
        let out = self.run(&args).success();
        assert!(out.stderr.is_empty(), "stderr: {}", out.stderr);
        out.json()
    }
}

/// The list rows naming `agency` (the first column).
fn rows_named<'a>(list: &'a str, agency: &str) -> Vec<&'a str> {
    list.lines()
        .filter(|l| l.split_whitespace().next() == Some(agency))
        .collect()
}

/// The trace of a `--json` turn as (from, to, text).
fn trace(turn: &Value) -> Vec<(String, String, String)> {
    turn["trace"]
        .as_array()
        .expect("trace is an array")
        .iter()
        .map(|e| {
            let s = |k: &str| {
                e[k].as_str()
                    .unwrap_or_else(|| panic!("trace entry without `{k}`: {e}"))
                    .to_string()
            };
            (s("from"), s("to"), s("text"))
        })
        .collect()
}

fn conversation_id(turn: &Value) -> String {
    let id = turn["conversation_id"]
        .as_str()
        .expect("conversation_id is a string");
    uuid::Uuid::parse_str(id).expect("conversation_id is a uuid");
    id.to_string()
}

/// Asserts that each needle occurs in `haystack`, each after the end of the one before.
#[track_caller]
fn assert_in_order(haystack: &str, needles: &[&str]) {
    let mut from = 0;
    for needle in needles {
        match haystack[from..].find(needle) {
            Some(i) => from += i + needle.len(),
            None => panic!("`{needle}` not found (in order) in:\n{haystack}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// First start and list
// ---------------------------------------------------------------------------------------------

#[test]
fn first_start_imports_the_demo_agency_once() {
    let env = Env::new();
    let first = env.run(&["list"]).success();
    assert!(first.stderr.is_empty(), "stderr: {}", first.stderr);
    let rows = rows_named(&first.stdout, "studio");
    assert_eq!(rows.len(), 1, "list:\n{}", first.stdout);
    let row = rows[0];
    for part in [
        "json",
        "manager manager",
        "agents: manager, programmer, reviewer",
    ] {
        assert!(row.contains(part), "`{part}` missing from `{row}`");
    }
    assert_eq!(first.stdout.lines().count(), 1, "list:\n{}", first.stdout);

    // Later starts find the demo already there.
    assert_eq!(env.list(), first.stdout);
    assert_eq!(env.list(), first.stdout);
}

#[test]
fn default_database_is_agency_db_in_the_working_directory() {
    let env = Env::new();
    let mut cmd = agency();
    cmd.current_dir(env.path()).arg("list");
    let out = output(cmd).success();
    assert_eq!(rows_named(&out.stdout, "studio").len(), 1, "{}", out.stdout);
    assert!(env.path().join("agency.db").is_file(), "no ./agency.db");
    assert!(!env.path().join("a.db").exists());
}

#[test]
fn agency_db_variable_names_the_database_and_db_overrides_it() {
    let env = Env::new();
    let from_var = format!("sqlite://{}", env.path().join("var.db").display());
    let mut cmd = agency();
    cmd.current_dir(env.path())
        .env("AGENCY_DB", &from_var)
        .arg("list");
    output(cmd).success();
    assert!(env.path().join("var.db").is_file());
    assert!(!env.path().join("agency.db").exists());

    let mut cmd = agency();
    cmd.current_dir(env.path())
        .env("AGENCY_DB", &from_var)
        .args(["--db", &env.db, "list"]);
    output(cmd).success();
    assert!(env.path().join("a.db").is_file());
}

// ---------------------------------------------------------------------------------------------
// One-shot chat
// ---------------------------------------------------------------------------------------------

#[test]
fn chat_with_a_message_prints_just_the_answer() {
    let env = Env::new();
    let out = env
        .run(&["chat", "studio", "--message", "a todo app"])
        .success();
    assert_eq!(out.stdout, format!("{TODO_ANSWER}\n"));
    assert!(out.stderr.is_empty(), "stderr: {}", out.stderr);
    assert_eq!(TODO_ANSWER, studio_answer("a todo app"));
}

#[test]
fn chat_json_shows_the_trace_and_conversations_continue() {
    let env = Env::new();
    let first = env.chat_json("studio", "a todo app", None);
    let id = conversation_id(&first);
    assert_eq!(first["answer"], TODO_ANSWER);
    assert_eq!(first["stopped_by"], "answered");
    assert!(first["hops"].is_u64(), "hops: {}", first["hops"]);
    let steps = trace(&first);
    let pairs: Vec<(&str, &str)> = steps
        .iter()
        .map(|(f, t, _)| (f.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("user", "manager"),
            ("manager", "programmer"),
            ("programmer", "manager"),
            ("manager", "reviewer"),
            ("reviewer", "builtin/echo"),
            ("builtin/echo", "reviewer"),
            ("reviewer", "manager"),
            ("manager", "user"),
        ]
    );
    let kinds: Vec<&str> = first["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[4..6], ["tool_call", "tool_result"]);
    let result = &first["trace"][5];
    assert_eq!(result["tool"], "builtin/echo");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["call_id"], first["trace"][4]["call_id"]);
    assert!(result["latency_ms"].is_u64(), "{result}");
    let texts: Vec<&str> = steps.iter().map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "a todo app",
            "Please build: a todo app",
            "fn main() { /* Please build: a todo app */ }",
            "Please review: fn main() { /* Please build: a todo app */ }",
            r#"{"text":"Please review: fn main() { /* Please build: a todo app */ }"}"#,
            "Please review: fn main() { /* Please build: a todo app */ }",
            "Approved: Please review: fn main() { /* Please build: a todo app */ }",
            TODO_ANSWER,
        ]
    );

    // The same conversation, twice more.
    let second = env.chat_json("studio", "a blog", Some(&id));
    assert_eq!(conversation_id(&second), id);
    assert_eq!(second["answer"], studio_answer("a blog"));
    assert_eq!(second["stopped_by"], "answered");
    assert_eq!(trace(&second)[0].2, "a blog");
    let third = env.chat_json("studio", "a game", Some(&id));
    assert_eq!(conversation_id(&third), id);
    assert_eq!(third["answer"], studio_answer("a game"));

    // Without --conversation, each run starts a new one.
    let other = env.chat_json("studio", "a todo app", None);
    assert_ne!(conversation_id(&other), id);

    // The plain form continues a conversation too.
    let plain = env
        .run(&[
            "chat",
            "studio",
            "--message",
            "a shop",
            "--conversation",
            &id,
        ])
        .success();
    assert_eq!(plain.stdout, format!("{}\n", studio_answer("a shop")));
}

#[test]
fn chat_with_an_unknown_conversation_fails_clearly() {
    let env = Env::new();
    let unknown = uuid::Uuid::now_v7().to_string();
    let out = env
        .run(&[
            "chat",
            "studio",
            "--message",
            "hi",
            "--conversation",
            &unknown,
        ])
        .error();
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        format!("error: agency `studio` has no conversation {unknown}")
    );

    // A conversation of another agency is not this one's either.
    env.run(&["import", &env.write("helpdesk.yaml", HELPDESK)])
        .success();
    let help = env.chat_json("helpdesk", "printer jam", None);
    let help_id = conversation_id(&help);
    let out = env
        .run(&[
            "chat",
            "studio",
            "--message",
            "hi",
            "--conversation",
            &help_id,
        ])
        .error();
    assert!(
        out.stderr
            .contains(&format!("agency `studio` has no conversation {help_id}")),
        "stderr: {}",
        out.stderr
    );

    // Not a uuid at all: a usage error.
    let out = env
        .run(&[
            "chat",
            "studio",
            "--message",
            "hi",
            "--conversation",
            "nope",
        ])
        .usage_error();
    assert!(out.stderr.contains("--conversation"), "{}", out.stderr);
}

#[test]
fn chat_usage_errors() {
    let env = Env::new();
    let out = env.run(&["chat", "studio", "--json"]).usage_error();
    assert!(out.stderr.contains("--message"), "stderr: {}", out.stderr);

    let out = env.run(&["chat"]).usage_error();
    assert!(out.stderr.contains("NAME"), "stderr: {}", out.stderr);

    let out = env.run(&["frobnicate"]).usage_error();
    assert!(out.stderr.contains("frobnicate"), "stderr: {}", out.stderr);
}

#[test]
fn chat_with_an_unknown_agency_or_an_empty_message_fails() {
    let env = Env::new();
    let out = env.run(&["chat", "nobody", "--message", "hi"]).error();
    assert_eq!(out.stderr.trim_end(), "error: no agency `nobody`");

    let out = env.run(&["chat", "studio", "--message", "  "]).error();
    assert_eq!(out.stderr.trim_end(), "error: the message is empty");
}

// ---------------------------------------------------------------------------------------------
// Interactive chat
// ---------------------------------------------------------------------------------------------

#[test]
fn interactive_chat_shows_the_agents_and_answers_each_line() {
    let env = Env::new();
    let out = env
        .run_with_input(&["chat", "studio"], "a todo app\n\na blog\n")
        .success();
    assert!(out.stderr.is_empty(), "stderr: {}", out.stderr);
    let stdout = &out.stdout;
    assert!(
        stdout.starts_with("Chatting with studio (conversation "),
        "stdout:\n{stdout}"
    );
    assert_in_order(
        stdout,
        &[
            "you> ",
            "  manager → programmer: Please build: a todo app\n",
            "  programmer → manager: fn main() { /* Please build: a todo app */ }\n",
            "  manager → reviewer: Please review: fn main() { /* Please build: a todo app */ }\n",
            "  reviewer → manager: Approved: Please review: fn main() { /* Please build: a todo app */ }\n",
            &format!("studio> {TODO_ANSWER}\n"),
            "you> ",
            "  manager → programmer: Please build: a blog\n",
            "  reviewer → manager: Approved: Please review: fn main() { /* Please build: a blog */ }\n",
            &format!("studio> {}\n", studio_answer("a blog")),
            "you> ",
        ],
    );
    assert_eq!(stdout.matches("studio> ").count(), 2, "stdout:\n{stdout}");
    // The user's line and the manager's answer are not repeated as trace lines.
    assert!(!stdout.contains("user → manager"), "stdout:\n{stdout}");
    assert!(!stdout.contains("manager → user"), "stdout:\n{stdout}");
    assert!(!stdout.contains("[stopped"), "stdout:\n{stdout}");

    // The conversation it named was stored, and goes on.
    let id = stdout["Chatting with studio (conversation ".len()..]
        .split(')')
        .next()
        .unwrap();
    let next = env.chat_json("studio", "a game", Some(id));
    assert_eq!(conversation_id(&next), id);
    assert_eq!(next["answer"], studio_answer("a game"));
}

#[test]
fn interactive_chat_ends_at_once_on_empty_input() {
    let env = Env::new();
    let out = env.run_with_input(&["chat", "studio"], "").success();
    assert!(!out.stdout.contains("studio> "), "stdout:\n{}", out.stdout);
    assert!(out.stdout.ends_with("you> \n"), "stdout:\n{}", out.stdout);
}

// ---------------------------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------------------------

#[test]
fn import_adds_an_agency_and_reimport_updates_it() {
    let env = Env::new();
    let file = env.write("helpdesk.yaml", HELPDESK);
    let out = env.run(&["import", &file]).success();
    assert_eq!(
        out.stdout, "imported helpdesk (3 agents, manager desk)\n",
        "stderr: {}",
        out.stderr
    );

    let list = env.list();
    let rows = rows_named(&list, "helpdesk");
    assert_eq!(rows.len(), 1, "list:\n{list}");
    assert!(
        rows[0].contains("directives") && rows[0].contains("agents: desk, tech, writer"),
        "row: {}",
        rows[0]
    );
    assert_eq!(rows_named(&list, "studio").len(), 1, "list:\n{list}");
    assert_eq!(list.lines().count(), 2, "list:\n{list}");

    let out = env
        .run(&["chat", "helpdesk", "--message", "printer jam"])
        .success();
    assert_eq!(
        out.stdout,
        format!("{}\n", helpdesk_answer("Resolved.", "printer jam"))
    );

    let turn = env.chat_json("helpdesk", "printer jam", None);
    let id = conversation_id(&turn);
    let pairs: Vec<(String, String)> = trace(&turn).into_iter().map(|(f, t, _)| (f, t)).collect();
    let expected = [
        ("user", "desk"),
        ("desk", "tech"),
        ("tech", "writer"),
        ("writer", "desk"),
        ("desk", "user"),
    ]
    .map(|(f, t)| (f.to_string(), t.to_string()));
    assert_eq!(pairs, expected);

    // An edited rule: the same agency, answering differently.
    let edited = HELPDESK.replace("Resolved.", "Closed.");
    let file = env.write("helpdesk.yaml", &edited);
    let out = env.run(&["import", &file]).success();
    assert_eq!(out.stdout, "imported helpdesk (3 agents, manager desk)\n");
    assert_eq!(env.list(), list, "re-import changed the list");
    let out = env
        .run(&["chat", "helpdesk", "--message", "printer jam"])
        .success();
    assert_eq!(
        out.stdout,
        format!("{}\n", helpdesk_answer("Closed.", "printer jam"))
    );
    let exported = env.run(&["export", "helpdesk"]).success().stdout;
    assert!(exported.contains("Closed."), "export:\n{exported}");
    assert!(!exported.contains("Resolved."), "export:\n{exported}");

    // Conversations started before the edit survive it and follow the new rules.
    let next = env.chat_json("helpdesk", "paper out", Some(&id));
    assert_eq!(conversation_id(&next), id);
    assert_eq!(next["answer"], helpdesk_answer("Closed.", "paper out"));
}

#[test]
fn import_reads_json_too() {
    let env = Env::new();
    let json = serde_json::json!({
        "name": "echo",
        "protocol": "json",
        "manager": "front",
        "agents": [
            {
                "id": 7,
                "name": "front",
                "model": "builtin/rules",
                "rules": [{ "when": "user", "do": "Echo: {{message}}", "send_to": ["user"] }],
            },
            { "name": "back", "model": "builtin/rules" },
        ],
    });
    let file = env.write("echo.json", &serde_json::to_string_pretty(&json).unwrap());
    let out = env.run(&["import", &file]).success();
    assert_eq!(out.stdout, "imported echo (2 agents, manager front)\n");
    let out = env.run(&["chat", "echo", "--message", "hello"]).success();
    assert_eq!(out.stdout, "Echo: hello\n");
}

/// Imports `text` as `file`, which must fail naming each of `expected` on standard error and
/// change nothing.
#[track_caller]
fn assert_rejected(env: &Env, file: &str, text: &str, expected: &[&str]) -> Out {
    let before = env.list();
    let name = env.write(file, text);
    let out = env.run(&["import", &name]).error();
    assert!(
        !out.stdout.contains("imported"),
        "stdout of a failed import: {}",
        out.stdout
    );
    for e in expected {
        assert!(
            out.stderr.contains(e),
            "`{e}` missing from the error of {file}:\n{}",
            out.stderr
        );
    }
    assert_eq!(env.list(), before, "a failed import changed the list");
    out
}

#[test]
fn import_rejects_an_unknown_manager() {
    let env = Env::new();
    let text = "\
name: broken
protocol: directives
manager: boss
agents:
  - id: 1
    name: desk
    model: builtin/rules
";
    let out = assert_rejected(
        &env,
        "manager.yaml",
        text,
        &["error: manager.yaml:3:10: manager: `boss` is not one of the agents"],
    );
    assert!(out.stderr.contains("desk"), "{}", out.stderr);
    env.run(&["export", "broken"]).error();
}

#[test]
fn import_rejects_a_rule_to_an_unknown_agent() {
    let env = Env::new();
    let text = "\
name: broken
protocol: directives
manager: desk
agents:
  - id: 1
    name: desk
    model: builtin/rules
    rules:
      - when: user
        do: \"hi\"
        send_to: [ghost]
";
    assert_rejected(
        &env,
        "send-to.yaml",
        text,
        &[
            "send-to.yaml:11:",
            "agents[0].rules[0].send_to: `ghost` is not `user` or one of the agents",
        ],
    );
}

#[test]
fn import_rejects_duplicate_agent_names() {
    let env = Env::new();
    let text = "\
name: broken
protocol: json
manager: desk
agents:
  - id: 1
    name: desk
    model: builtin/rules
  - id: 2
    name: Desk
    model: builtin/rules
";
    assert_rejected(
        &env,
        "names.yaml",
        text,
        &["names.yaml:9:11: agents[1].name: `Desk` is the name of another agent"],
    );
}

#[test]
fn import_rejects_duplicate_ids() {
    let env = Env::new();
    let text = "\
name: broken
protocol: json
manager: desk
agents:
  - id: 5
    name: desk
    model: builtin/rules
  - id: 5
    name: tech
    model: builtin/rules
";
    assert_rejected(
        &env,
        "ids.yaml",
        text,
        &["ids.yaml:8:9: agents[1].id: id 5 is used by another agent"],
    );
}

#[test]
fn import_rejects_a_model_nobody_serves() {
    let env = Env::new();
    let text = "\
name: broken
protocol: json
manager: desk
agents:
  - id: 1
    name: desk
    model: mistral/large-latest
";
    assert_rejected(
        &env,
        "model.yaml",
        text,
        &["model.yaml:7:12: agents[0].model: no configured provider serves `mistral/large-latest`"],
    );
}

#[test]
fn import_reports_every_problem_of_a_file() {
    let env = Env::new();
    let text = "\
name: broken
protocol: json
manager: boss
agents:
  - id: 1
    name: desk
    model: mistral/large-latest
  - id: 1
    name: desk
    model: builtin/rules
";
    let out = assert_rejected(
        &env,
        "many.yaml",
        text,
        &[
            "many.yaml:3:10: manager:",
            "many.yaml:7:12: agents[0].model:",
            "many.yaml:8:9: agents[1].id:",
            "many.yaml:9:11: agents[1].name:",
        ],
    );
    assert_eq!(out.stderr.lines().count(), 4, "stderr:\n{}", out.stderr);
}

#[test]
fn import_rejects_yaml_syntax_errors_and_unknown_fields() {
    let env = Env::new();
    let text = "\
name: broken
protocol: json
manager: desk
agents:
  - id: 1
    name: \"desk
";
    let out = assert_rejected(&env, "syntax.yaml", text, &["error: syntax.yaml:6:"]);
    assert!(out.stderr.contains("syntax error"), "{}", out.stderr);

    let text = "\
name: broken
protocol: json
manager: desk
agents:
  - id: 1
    name: desk
    modle: builtin/rules
";
    let out = assert_rejected(
        &env,
        "field.yaml",
        text,
        &["field.yaml:7:5: agents[0].modle:"],
    );
    assert!(out.stderr.contains("`model`"), "{}", out.stderr);
}

#[test]
fn import_of_a_missing_file_fails() {
    let env = Env::new();
    let before = env.list();
    let out = env.run(&["import", "missing.yaml"]).error();
    assert!(
        out.stderr.starts_with("error: cannot read missing.yaml"),
        "stderr: {}",
        out.stderr
    );
    assert_eq!(env.list(), before);
}

#[test]
fn a_rejected_edit_keeps_the_agency_as_it_was() {
    let env = Env::new();
    env.run(&["import", &env.write("helpdesk.yaml", HELPDESK)])
        .success();
    let before = env.run(&["export", "helpdesk"]).success().stdout;
    let broken = HELPDESK
        .replace("manager: desk", "manager: boss")
        .replace("Resolved.", "Closed.");
    assert_rejected(
        &env,
        "helpdesk.yaml",
        &broken,
        &["helpdesk.yaml:4:10: manager: `boss` is not one of the agents"],
    );
    assert_eq!(env.run(&["export", "helpdesk"]).success().stdout, before);
    let out = env
        .run(&["chat", "helpdesk", "--message", "printer jam"])
        .success();
    assert_eq!(
        out.stdout,
        format!("{}\n", helpdesk_answer("Resolved.", "printer jam"))
    );
}

// ---------------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------------

#[test]
fn export_imports_back_unchanged() {
    let env = Env::new();
    let first = env.run(&["export", "studio"]).success();
    assert!(first.stderr.is_empty(), "stderr: {}", first.stderr);
    let yaml = first.stdout;
    assert!(yaml.starts_with("name: studio\n"), "export:\n{yaml}");
    assert!(yaml.ends_with('\n'));
    for part in [
        "protocol: json",
        "manager: manager",
        "name: programmer",
        "name: reviewer",
        "model: builtin/rules",
        "Please build: {{message}}",
    ] {
        assert!(yaml.contains(part), "`{part}` missing from:\n{yaml}");
    }

    let file = env.write("studio.yaml", &yaml);
    let out = env.run(&["import", &file]).success();
    assert_eq!(out.stdout, "imported studio (3 agents, manager manager)\n");
    assert_eq!(env.run(&["export", "studio"]).success().stdout, yaml);
    assert_eq!(rows_named(&env.list(), "studio").len(), 1);

    // The shipped example reads to the same agency.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/studio.yaml");
    let out = env.run(&["import", example]).success();
    assert_eq!(out.stdout, "imported studio (3 agents, manager manager)\n");
    assert_eq!(env.run(&["export", "studio"]).success().stdout, yaml);

    // And an agency of the other protocol round-trips too.
    env.run(&["import", &env.write("helpdesk.yaml", HELPDESK)])
        .success();
    let help = env.run(&["export", "helpdesk"]).success().stdout;
    env.run(&["import", &env.write("again.yaml", &help)])
        .success();
    assert_eq!(env.run(&["export", "helpdesk"]).success().stdout, help);
    let out = env
        .run(&["chat", "helpdesk", "--message", "printer jam"])
        .success();
    assert_eq!(
        out.stdout,
        format!("{}\n", helpdesk_answer("Resolved.", "printer jam"))
    );
}

#[test]
fn export_to_a_file() {
    let env = Env::new();
    let printed = env.run(&["export", "studio"]).success().stdout;
    let out = env.run(&["export", "studio", "-o", "out.yaml"]).success();
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout);
    assert_eq!(env.read("out.yaml"), printed);
    let out = env
        .run(&["export", "studio", "--output", "long.yaml"])
        .success();
    assert!(out.stdout.is_empty());
    assert_eq!(env.read("long.yaml"), printed);

    let out = env
        .run(&["export", "studio", "-o", "no/such/dir/out.yaml"])
        .error();
    assert!(
        out.stderr
            .starts_with("error: cannot write no/such/dir/out.yaml"),
        "stderr: {}",
        out.stderr
    );
}

#[test]
fn export_of_an_unknown_agency_fails() {
    let env = Env::new();
    let out = env.run(&["export", "nobody"]).error();
    assert!(out.stdout.is_empty());
    assert_eq!(out.stderr.trim_end(), "error: no agency `nobody`");
}

// ---------------------------------------------------------------------------------------------
// Databases that cannot be used
// ---------------------------------------------------------------------------------------------

#[test]
fn a_database_that_cannot_be_opened_is_an_error_not_a_panic() {
    let env = Env::new();
    let missing = env.path().join("nonexistent-dir").join("x").join("a.db");
    let url = format!("sqlite://{}", missing.display());
    for command in [&["list"][..], &["chat", "studio", "--message", "hi"]] {
        let mut cmd = agency();
        cmd.current_dir(env.path())
            .args(["--db", &url])
            .args(command);
        let out = output(cmd).error();
        assert!(out.stdout.is_empty(), "stdout: {}", out.stdout);
        assert!(
            out.stderr
                .starts_with(&format!("error: cannot open the database {url}")),
            "stderr: {}",
            out.stderr
        );
    }
    assert!(!env.path().join("nonexistent-dir").exists());

    let out = env_free_run(env.path(), &["--db", "mysql://x", "list"]).error();
    assert!(
        out.stderr
            .starts_with("error: `mysql://x` is not a database URL Agency can use"),
        "stderr: {}",
        out.stderr
    );
    assert!(out.stderr.contains("sqlite://PATH"), "{}", out.stderr);
}

#[test]
fn an_unreachable_postgres_is_an_error_without_the_password() {
    // Port 1 on the loopback: nothing listens there, so the connection is refused at once.
    let env = Env::new();
    let out = env_free_run(
        env.path(),
        &["--db", "postgres://me:hunter2@127.0.0.1:1/agency", "list"],
    )
    .error();
    assert!(
        out.stderr
            .starts_with("error: cannot open the database postgres://me:***@127.0.0.1:1/agency"),
        "stderr: {}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2"), "stderr: {}", out.stderr);
}

fn env_free_run(dir: &Path, args: &[&str]) -> Out {
    let mut cmd = agency();
    cmd.current_dir(dir).args(args);
    output(cmd)
}

// ---------------------------------------------------------------------------------------------
// Serve
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_health_checks() {
    let env = Env::new();
    let mut cmd = env.cmd();
    cmd.args(["serve", "--listen", "127.0.0.1:0"]);
    let server = Server::start(cmd);

    let client = http();
    let health = client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), reqwest::StatusCode::OK);
    let body: Value = health.json().await.expect("a JSON health body");
    assert_eq!(body["status"], "ok");

    // The management API wants a login, and says so in JSON.
    let res = client
        .get(format!("{}/api/agencies", server.url))
        .send()
        .await
        .expect("GET /api/agencies");
    assert_eq!(res.status(), reqwest::StatusCode::UNAUTHORIZED);
    let body: Value = res.json().await.expect("a JSON error");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("log in")),
        "{body}"
    );

    // The demo agency was imported on this first start, for the CLI's local owner.
    let listed = env.run(&["list"]).success().stdout;
    assert!(listed.contains("studio"), "{listed}");
    drop(server);
}

/// `serve` says where to go and what it loaded; an account made in the web UI is reached from
/// the CLI with `--owner EMAIL`, both ways: what the CLI imports shows in the account, and what
/// the account imported (an example of the gallery) answers in `agency chat`.
#[tokio::test(flavor = "multi_thread")]
async fn serve_says_where_to_start_and_the_cli_reaches_an_account() {
    let env = Env::new();
    let mut cmd = env.cmd();
    cmd.args(["serve", "--listen", "127.0.0.1:0"]);
    let server = Server::start(cmd);
    let next = || {
        server
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a line")
    };
    let open = next();
    assert_eq!(
        open,
        format!(
            "agency: open {}/signup in a browser, make an account, and start from an example (studio, research, support, standup)",
            server.url
        )
    );
    let loaded = next();
    assert!(loaded.starts_with("agency: loaded sqlite://"), "{loaded}");
    assert!(
        loaded.contains("providers: builtin, openai, anthropic, ollama; tool servers: builtin"),
        "{loaded}"
    );
    let own = next();
    assert!(
        own.starts_with("agency: the CLI's own agencies: studio"),
        "{own}"
    );

    // An account, made through the API as the sign-up page does, imports the support example.
    let client = http();
    let res = client
        .post(format!("{}/api/auth/signup", server.url))
        .json(
            &serde_json::json!({ "email": "ada@example.com", "password": "correct horse battery" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::CREATED);
    let cookie = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let me: Value = res.json().await.unwrap();
    let csrf = me["csrf_token"].as_str().unwrap().to_string();
    let examples: Vec<Value> = client
        .get(format!("{}/api/examples", server.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let support = examples.iter().find(|e| e["name"] == "support").unwrap();
    let res = client
        .post(format!("{}/api/agencies/import", server.url))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .header("content-type", "application/yaml")
        .body(support["file"].as_str().unwrap().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::CREATED);

    // Without --owner the CLI works on its own agencies; with it, on the account's.
    let out = env
        .run(&["chat", "support", "--message", "my invoice"])
        .error();
    assert!(out.stderr.contains("no agency `support`"), "{}", out.stderr);
    let answer = env
        .run(&[
            "--owner",
            "ada@example.com",
            "chat",
            "support",
            "--message",
            "my invoice",
        ])
        .success()
        .stdout;
    assert_eq!(
        answer.trim(),
        "Sorry for the trouble. Billing credited your account with 19 USD. (Escalated to billing. New ticket: my invoice)"
    );
    let listed = env
        .run(&["list", "--owner", "ada@example.com"])
        .success()
        .stdout;
    assert!(
        listed.contains("support") && !listed.contains("studio"),
        "{listed}"
    );
    std::fs::write(env.path().join("helpdesk.yaml"), HELPDESK).unwrap();
    env.run(&["import", "helpdesk.yaml", "--owner", "ada@example.com"])
        .success();
    let mine: Vec<Value> = client
        .get(format!("{}/api/agencies", server.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = mine
        .iter()
        .map(|a| a["draft"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"helpdesk") && names.contains(&"support"),
        "{names:?}"
    );
    let own = env.run(&["list"]).success().stdout;
    assert!(!own.contains("helpdesk"), "{own}");
    // A provider key stored from the CLI for the account is the account's (masked in its list).
    env.run_with_input(
        &[
            "--owner",
            "ada@example.com",
            "provider-key",
            "set",
            "openai",
        ],
        "sk-test-abcdwxyz\n",
    )
    .success();
    let keys: Value = client
        .get(format!("{}/api/provider-keys", server.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(keys[0]["provider"], "openai", "{keys}");
    assert!(
        keys.to_string().contains("wxyz") && !keys.to_string().contains("sk-test"),
        "{keys}"
    );
    let local = env.run(&["provider-key", "list"]).success().stdout;
    assert!(local.contains("no stored provider keys"), "{local}");

    // An email without an account, or no email at all, is said plainly.
    let out = env.run(&["list", "--owner", "nobody@example.com"]).error();
    assert!(
        out.stderr.contains("no account `nobody@example.com`"),
        "{}",
        out.stderr
    );
    let out = env.run(&["list", "--owner", "not an email"]).error();
    assert!(out.stderr.contains("is not an email"), "{}", out.stderr);
    drop(server);
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_json_lines_when_asked() {
    let env = Env::new();
    let mut cmd = env.cmd();
    cmd.env("AGENCY_LOG_FORMAT", "json")
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let mut server = Server::start(cmd);
    let health = http()
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .expect("GET /readyz");
    assert_eq!(health.status(), reqwest::StatusCode::OK);
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status();
    assert!(
        server
            .wait(Duration::from_secs(15))
            .is_some_and(|s| s.success())
    );
    let mut stderr = String::new();
    if let Some(mut s) = server.child.stderr.take() {
        std::io::Read::read_to_string(&mut s, &mut stderr).expect("read stderr");
    }
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let messages: Vec<&str> = lines
        .iter()
        .map(|l| {
            assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
            l["fields"]["message"].as_str().unwrap_or_default()
        })
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("listening on http://127.0.0.1:")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.starts_with("shutting down")),
        "{messages:?}"
    );

    // Another format is a usage error, before anything starts.
    let mut cmd = env.cmd();
    cmd.env("AGENCY_LOG_FORMAT", "xml").arg("list");
    let out = output(cmd).usage_error();
    assert!(out.stderr.contains("`text` or `json`"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_reads_agency_listen_and_stops_on_interrupt() {
    let env = Env::new();
    let mut cmd = env.cmd();
    cmd.env("AGENCY_LISTEN", "127.0.0.1:0").arg("serve");
    let mut server = Server::start(cmd);
    let health = http()
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), reqwest::StatusCode::OK);

    if cfg!(unix) {
        // Ctrl-C: the server finishes what it was doing and exits cleanly.
        let status = Command::new("kill")
            .args(["-INT", &server.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let exit = server
            .wait(Duration::from_secs(30))
            .expect("the server exits after SIGINT");
        assert!(exit.success(), "exit status after SIGINT: {exit:?}");
        // After where it listens, only the three lines that say where to start.
        let rest: Vec<String> = server.lines.try_iter().collect();
        assert_eq!(rest.len(), 3, "unexpected output: {rest:?}");
        assert!(rest[0].starts_with("agency: open http://"), "{rest:?}");
    }
}

#[test]
fn serve_on_a_taken_port_fails() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = taken.local_addr().unwrap().to_string();
    let env = Env::new();
    let mut cmd = env.cmd();
    cmd.args(["serve", "--listen", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn agency serve");
    // Should it serve after all, do not wait forever.
    let start = Instant::now();
    while child.try_wait().expect("poll agency serve").is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("agency serve ran on a port that was taken");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collect output");
    let out = Out {
        status: out.status,
        stdout: String::from_utf8(out.stdout).expect("UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8"),
    }
    .error();
    assert!(
        out.stderr
            .contains(&format!("error: cannot listen on {addr}")),
        "stderr: {}",
        out.stderr
    );
    assert!(!out.stdout.contains("listening"), "stdout: {}", out.stdout);
}

// ---------------------------------------------------------------------------------------------
// Concurrent first starts
// ---------------------------------------------------------------------------------------------

#[test]
fn concurrent_first_starts_all_succeed_and_seed_once() {
    for _ in 0..5 {
        let env = Env::new();
        let children: Vec<Child> = (0..8)
            .map(|_| {
                let mut cmd = env.cmd();
                cmd.arg("list")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                cmd.spawn().expect("spawn agency list")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("wait for agency list");
            assert!(
                out.status.success(),
                "a concurrent first start failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let list = env.list();
        assert_eq!(rows_named(&list, "studio").len(), 1, "list:\n{list}");
    }
}

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/// `kill -9` while an agent's tool runs: what was accepted (the message, the reply that made the
/// call) is kept, and the next turn goes on, the interrupted call answered as failed.
#[test]
fn a_crash_during_a_tool_call_loses_nothing_and_the_next_turn_goes_on() {
    let mcp = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp");
    let everything = mcp.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !everything.exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "server-everything is not installed: run tests/mcp/install"
        );
        eprintln!("skipped: server-everything is not installed (tests/mcp/install)");
        return;
    }
    let env = Env::new();
    let config = env.write(
        "config.yaml",
        &format!(
            "mcp_servers:\n  everything: {{ command: node, args: [\"{}\", stdio], timeout_secs: 3 }}\n",
            everything.display()
        ),
    );
    let agency = env.write(
        "plant.yaml",
        r#"name: plant
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [everything/trigger-long-running-operation]
    rules:
      - { when: user, call: everything/trigger-long-running-operation,
          with: { duration: 30, steps: 30 }, do: "done: {{result}}", send_to: user }
"#,
    );
    env.run(&["--config", &config, "import", &agency]).success();

    // The interactive chat shows the call as it starts; it is killed right then.
    let mut cmd = env.cmd();
    cmd.args(["--config", &config, "chat", "plant"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn agency chat");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    stdin.write_all(b"check pump 3\n").expect("write");
    let mut conversation = String::new();
    for line in stdout.lines().map_while(Result::ok) {
        if let Some(rest) = line.split("(conversation ").nth(1) {
            conversation = rest.split(')').next().unwrap_or_default().to_string();
        }
        if line.contains("⚙ everything/trigger-long-running-operation") {
            break;
        }
    }
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    assert!(!conversation.is_empty(), "no conversation id shown");

    let next = env
        .run(&[
            "--config",
            &config,
            "chat",
            "plant",
            "--message",
            "again",
            "--conversation",
            &conversation,
            "--json",
        ])
        .success()
        .json();
    assert_eq!(conversation_id(&next), conversation);
    assert_eq!(next["stopped_by"], "answered", "{next}");
    let answer = next["answer"].as_str().unwrap();
    // The first message was kept with its call: answered now, its call as failed.
    assert!(
        answer.contains("done: No result: the turn ended before the tool answered."),
        "{answer}"
    );
    // The new message's own call ran (and hit the server's 3 s timeout).
    assert_eq!(answer.matches("done: ").count(), 2, "{answer}");
}
