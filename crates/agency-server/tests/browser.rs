//! The web UI in a real browser: Debian's headless Chromium driven through chromedriver
//! (fantoccini), against the real app on a fresh SQLite file, walking a new user from sign-up
//! to a revoked key, then an imported agency file; and a roundtable room whose agents run on
//! fake OpenAI-compatible servers that record what each model was sent. Every page is saved as
//! `target/screenshots/NN-name.png` (the room's as `NN-room-name.png`).
//!
//! Without `/usr/bin/chromium` and `/usr/bin/chromedriver` (`apt-get install chromium
//! chromium-driver`) the test is skipped with a message, except under `CI=true`, where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agency_core::{ProviderKind, ProviderSpec};
use agency_fakes::{Fake, openai};
use agency_providers::Providers;
use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// A person's approval in the web UI (issue 36).
#[path = "browser/approvals.rs"]
mod approvals;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long a wait for the page may take before the test gives up: generous, since the machine
/// may be busy; nothing is asserted about how long anything takes.
const PATIENCE: Duration = Duration::from_secs(120);

/// The answer of the agency the test builds, to "a haiku".
const ANSWER: &str = "Done: Draft for: Please write: a haiku";

const STUDIO: &str = include_str!("../../../examples/studio.yaml");

/// chromedriver, stopped when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts chromedriver on a free loopback port and connects a headless Chromium session.
async fn browser() -> Option<(Driver, Client)> {
    browser_with(&[]).await
}

/// A headless Chromium session with these command-line flags too (e.g. `--force-dark-mode`,
/// which makes pages match `prefers-color-scheme: dark`).
async fn browser_with(flags: &[&str]) -> Option<(Driver, Client)> {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if !missing.is_empty() {
        let why = format!(
            "browser test skipped: {} missing (apt-get install -y chromium chromium-driver)",
            missing.join(" and ")
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}; CI=true requires it");
        }
        eprintln!("{why}");
        return None;
    }
    let port = free_port();
    let driver = Driver(
        Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
        "--lang=en-US",
    ];
    args.extend_from_slice(flags);
    let caps: serde_json::Map<String, Value> = serde_json::from_value(json!({
        "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        // A page's own dialogs (the unsaved-changes prompt) wait for the test to answer them.
        "unhandledPromptBehavior": "ignore"
    }))
    .unwrap();
    // chromedriver takes a moment to listen: try again until it answers.
    let url = format!("http://127.0.0.1:{port}");
    let mut last = None;
    for _ in 0..200 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return Some((driver, client)),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not start: {last:?}");
}

/// The real app on a fresh SQLite file, on the built-in rules model.
async fn app(dir: &Path) -> String {
    app_with(dir, Providers::builtin()).await
}

/// The real app on a fresh SQLite file, with these providers.
async fn app_with(dir: &Path, providers: Providers) -> String {
    agency_testing::serve(
        dir,
        providers,
        Vec::new(),
        agency_server::Connections::default(),
    )
    .await
    .unwrap()
    .base
}

struct Walk {
    c: Client,
    base: String,
    shots: PathBuf,
    n: u32,
}

impl Walk {
    /// A walk in `c` on the app at `base`, its screenshots numbered from `n`, of a user who
    /// has just signed up as `email`.
    async fn signed_up(c: Client, base: String, n: u32, email: &str) -> Walk {
        let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        let w = Walk { c, base, shots, n };
        w.goto("/signup").await;
        w.type_into("#email", email).await;
        w.type_into("#password", "correct horse battery").await;
        w.click("#submit").await;
        w.wait("nav a[href='/rooms']").await;
        w
    }

    async fn goto(&self, path: &str) {
        self.c.goto(&format!("{}{path}", self.base)).await.unwrap();
    }

    /// The element `locator` finds, once it is on the page.
    async fn find(&self, locator: Locator<'_>) -> Element {
        self.c
            .wait()
            .at_most(PATIENCE)
            .for_element(locator)
            .await
            .unwrap_or_else(|e| panic!("no {locator:?} on the page: {e}"))
    }

    async fn wait(&self, css: &str) -> Element {
        self.find(Locator::Css(css)).await
    }

    async fn wait_xpath(&self, xpath: &str) -> Element {
        self.find(Locator::XPath(xpath)).await
    }

    /// Runs `act` until none of the elements it found went stale meanwhile. The UI re-renders
    /// parts of the page as its state changes (a live preview, a list that refreshes), so an
    /// element found a moment ago may be replaced before it is read or clicked; then `act`
    /// finds it again, for up to `PATIENCE`. Any other error fails the test.
    async fn settled<T>(&self, what: &str, act: impl AsyncFn() -> Result<T, CmdError>) -> T {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            match act().await {
                Ok(v) => return v,
                Err(e)
                    if e.is_stale_element_reference() && tokio::time::Instant::now() < deadline => {
                }
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }

    /// The text of the element `locator` finds.
    async fn text(&self, locator: Locator<'_>) -> String {
        self.settled(&format!("reading {locator:?}"), async || {
            self.find(locator).await.text().await
        })
        .await
    }

    async fn click(&self, css: &str) {
        self.settled(&format!("clicking `{css}`"), async || {
            self.wait(css).await.click().await
        })
        .await
    }

    async fn type_into(&self, css: &str, text: &str) {
        self.settled(&format!("typing into `{css}`"), async || {
            let e = self.wait(css).await;
            e.clear().await?;
            e.send_keys(text).await
        })
        .await
    }

    /// The texts of the elements `css` finds now (none if there are none).
    async fn texts(&self, css: &str) -> Vec<String> {
        self.settled(&format!("reading `{css}`"), async || {
            let mut out = Vec::new();
            for e in self.c.find_all(Locator::Css(css)).await? {
                out.push(e.text().await?);
            }
            Ok(out)
        })
        .await
    }

    /// Chooses the option of the select `css` whose label is `label`.
    async fn select_label(&self, css: &str, label: &str) {
        self.settled(&format!("choosing `{label}` in `{css}`"), async || {
            self.wait(css).await.select_by_label(label).await
        })
        .await
    }

    /// Chooses the option of the select `css` whose value is `value`.
    async fn select_value(&self, css: &str, value: &str) {
        self.settled(&format!("choosing `{value}` in `{css}`"), async || {
            self.wait(css).await.select_by_value(value).await
        })
        .await
    }

    /// The page at 1366 px and at 390 px wide, each saved as a screenshot
    /// (`NN-name-1366.png`, `NN-name-390.png`): axe-core finds no violation of its rules
    /// (WCAG 2 A and AA, contrast included) at either width; no table is cut off (scrolls in
    /// its box) at 1366 px, and nothing is wider than the page at 390 px.
    async fn audit(&mut self, name: &str) {
        let before = self.c.get_window_rect().await.unwrap();
        for width in [1366u32, 390] {
            self.c.set_window_size(width, 900).await.unwrap();
            self.settle_layout().await;
            self.axe(&format!("{name} at {width} px")).await;
            let cut =
                self.c.execute(
                    "return [...document.querySelectorAll('.scroll')].filter((e) => e.offsetParent && e.scrollWidth > e.clientWidth + 1).map((e) => e.querySelector('table') ? e.querySelector('table').id || 'a table' : 'a box');",
                    vec![],
                )
                .await
                .unwrap();
            if width == 1366 {
                assert_eq!(cut, json!([]), "{name}: cut off at 1366 px");
            }
            let widths = self
                .c
                .execute(
                    "const d = document.documentElement; return [d.clientWidth, d.scrollWidth];",
                    vec![],
                )
                .await
                .unwrap();
            assert!(
                widths[1].as_u64() <= widths[0].as_u64(),
                "{name} is wider than the window at {width} px: {widths}"
            );
            self.n += 1;
            let png = self.c.screenshot().await.unwrap();
            std::fs::write(
                self.shots.join(format!("{:02}-{name}-{width}.png", self.n)),
                png,
            )
            .unwrap();
        }
        self.c
            .set_window_size(before.2 as u32, before.3 as u32)
            .await
            .unwrap();
    }

    /// Lets the page lay itself out again after a resize.
    async fn settle_layout(&self) {
        let _ = self
            .c
            .execute_async(
                "const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)));",
                vec![],
            )
            .await;
    }

    /// Runs axe-core (`node_modules/axe-core`, from `npm ci` in this crate) on the page and
    /// fails on any violation, naming each with the elements it found. Without axe-core the
    /// check is skipped with a message, except under `CI=true`.
    async fn axe(&self, what: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules/axe-core/axe.min.js");
        let Ok(source) = std::fs::read_to_string(&path) else {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!(
                    "no {}: run `npm ci` in crates/agency-server",
                    path.display()
                );
            }
            eprintln!(
                "axe check of {what} skipped: no {} (npm ci)",
                path.display()
            );
            return;
        };
        let loaded = self
            .c
            .execute("return typeof window.axe === 'object';", vec![])
            .await
            .unwrap();
        if loaded != json!(true) {
            self.c.execute(&source, vec![]).await.unwrap();
        }
        let violations = self
            .c
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { resultTypes: ['violations'] })
                   .then((r) => done(r.violations.map((v) => v.id + ' (' + v.impact + '): ' + v.help + ' — ' + v.nodes.map((n) => n.target.join(' ') + ' ' + (n.failureSummary || '').replace(/\\s+/g, ' ')).join(' | '))))
                   .catch((e) => done(['axe failed: ' + e]));",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(violations, json!([]), "axe-core on {what}");
    }

    /// Saves the page as `target/screenshots/NN-name.png`.
    async fn shot(&mut self, name: &str) {
        self.n += 1;
        let png = self.c.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{:02}-{name}.png", self.n)), png).unwrap();
    }
}

/// Calls the agency's OpenAI-compatible endpoint with an API key.
async fn chat(base: &str, agency: &str, key: &str) -> (reqwest::StatusCode, Value) {
    let res = reqwest::Client::new()
        .post(format!("{base}/api/agency/{agency}/chat/completions"))
        .bearer_auth(key)
        .json(&json!({ "model": "team", "messages": [{ "role": "user", "content": "a haiku" }] }))
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_user_builds_publishes_calls_and_revokes() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = app(dir.path()).await;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut w = Walk {
        c,
        base: base.clone(),
        shots,
        n: 0,
    };

    // Sign up: a too-short password is refused next to its field, then the account is made.
    w.goto("/").await;
    w.wait("a[href='/signup']").await;
    w.shot("login").await;
    w.click("a[href='/signup']").await;
    w.type_into("#email", "ada@example.com").await;
    w.type_into("#password", "short").await;
    w.click("#submit").await;
    let e = w.text(Locator::Css("#password-error")).await;
    assert!(e.contains('8'), "{e}");
    w.audit("signup-error").await;
    w.type_into("#password", "correct horse battery").await;
    w.click("#submit").await;

    // A new agency, from the list of the user's agencies.
    w.type_into("#new-name", "team").await;
    w.shot("home-empty").await;
    w.click("#create-agency").await;
    w.wait("#f-agents-0-name").await;
    let agency =
        w.c.current_url()
            .await
            .unwrap()
            .path()
            .trim_start_matches("/agencies/")
            .to_string();

    // A second agent, first with a name the manager has: the problem shows at its field.
    w.click("#add-agent").await;
    w.type_into("#f-agents-1-name", "manager").await;
    w.click("#save").await;
    let e = w
        .text(Locator::XPath(
            "//p[@id='e-agents-1-name' and not(@hidden) and string-length(.) > 0]",
        ))
        .await;
    w.wait("#f-agents-1-name[aria-invalid='true']").await;
    assert!(e.contains("another agent"), "{e}");
    w.audit("editor-error").await;
    w.type_into("#f-agents-1-name", "writer").await;
    w.type_into("#f-agents-1-role", "writes what is asked")
        .await;

    // A third agent, added and removed again: the editor's list loses it, and nothing asks
    // about a room (the room page's remove once took the editor's place).
    w.click("#add-agent").await;
    w.type_into("#f-agents-2-name", "extra").await;
    w.click("fieldset.agent:nth-of-type(3) button[id^='remove-']")
        .await;
    w.wait_xpath("//body[not(.//*[@id='f-agents-2-name'])]")
        .await;
    assert_eq!(
        w.c.get_alert_text().await.ok(),
        None,
        "no dialog is open after removing an agent in the editor"
    );
    w.wait("#f-agents-1-name").await;

    // Rules: the manager hands the user's request to the writer and the writer's draft to the
    // user; the writer answers the manager.
    let manager_add_rule = "fieldset.agent:nth-of-type(1) button[id^='add-rule-']";
    let writer_add_rule = "fieldset.agent:nth-of-type(2) button[id^='add-rule-']";
    w.click(manager_add_rule).await;
    w.select_value("#f-agents-0-rules-0-when", "user").await;
    w.type_into("#f-agents-0-rules-0-do", "Please write: {{message}}")
        .await;
    w.select_label("#f-agents-0-rules-0-send_to", "writer")
        .await;
    w.click(manager_add_rule).await;
    w.select_label("#f-agents-0-rules-1-when", "writer").await;
    w.type_into("#f-agents-0-rules-1-do", "Done: {{message}}")
        .await;
    w.select_value("#f-agents-0-rules-1-send_to", "user").await;
    w.click(writer_add_rule).await;
    w.select_label("#f-agents-1-rules-0-when", "manager").await;
    w.type_into("#f-agents-1-rules-0-do", "Draft for: {{message}}")
        .await;
    w.select_label("#f-agents-1-rules-0-send_to", "manager")
        .await;

    // The live preview shows the rule as the manager's prompt will have it.
    let prompt = w
        .text(Locator::XPath("//pre[contains(., 'When a message is from the user') and contains(., 'Please write: {{message}}') and contains(., '(writer)')]"))
        .await;
    assert!(prompt.contains("Send your response to"), "{prompt}");
    w.shot("editor-preview").await;

    // A fan-out rule: one response to two addressees, built and unbuilt with the picker.
    w.click(writer_add_rule).await;
    w.select_value("#f-agents-1-rules-1-when", "user").await;
    w.type_into("#f-agents-1-rules-1-do", "Fan out: {{message}}")
        .await;
    w.select_label("#f-agents-1-rules-1-send_to", "manager")
        .await;
    w.click("fieldset.agent:nth-of-type(2) .rule:nth-of-type(2) button.add-addressee")
        .await;
    w.select_value("#f-agents-1-rules-1-send_to-1", "user")
        .await;
    w.wait_xpath("//pre[contains(., 'Fan out: {{message}}. Send your response to') and contains(., '(manager) and the user')]")
        .await;
    w.shot("editor-fan-out").await;
    w.click("fieldset.agent:nth-of-type(2) .rule:nth-of-type(2) button.remove-addressee")
        .await;
    w.wait_xpath("//pre[contains(., 'Fan out: {{message}}. Send your response to') and not(contains(., '(manager) and the user'))]")
        .await;
    w.click("button[aria-label='Remove rule 2 of writer']")
        .await;
    w.wait_xpath("//pre[not(contains(., 'Fan out'))]").await;

    // Publish (saves first), and the version shows.
    w.click("#publish").await;
    w.wait_xpath("//p[@id='status' and contains(., 'Published version 1')]")
        .await;
    w.wait_xpath("//ul[@id='versions']/li[contains(., 'Version 1')]")
        .await;
    w.wait_xpath("//p[@id='published-now' and contains(., 'version 1')]")
        .await;

    // A key, shown once.
    w.type_into("#f-key-name", "ci").await;
    w.type_into("#f-key-expires", "30d").await;
    w.click("#create-key").await;
    let key = w
        .text(Locator::XPath(
            "//code[@id='new-key-value' and starts-with(., 'agk_')]",
        ))
        .await;
    w.wait("tr[data-key='ci'] .state-active").await;
    w.audit("agency-published-key").await;

    // The key reaches the published version through the OpenAI-compatible endpoint.
    let (status, body) = chat(&base, &agency, &key).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], json!(ANSWER));

    // The playground: a turn on the published version, watched live.
    w.goto(&format!("/agencies/{agency}/playground")).await;
    w.click("#on-published").await;
    w.type_into("#message", "a haiku").await;
    w.click("#send").await;
    w.wait_xpath("//ol[@class='hops']/li[.//strong[. = 'manager → writer']]")
        .await;
    w.wait_xpath("//ol[@class='hops']/li[.//strong[. = 'writer → manager']]")
        .await;
    let answer = w
        .text(Locator::XPath(
            "//article[contains(@class, 'done')]//p[@class='answer-text']",
        ))
        .await;
    assert_eq!(answer, ANSWER);
    // The turn is folded under its answer: opened, its hops read as a conversation.
    w.click("article.turn.done details.turn-details summary")
        .await;
    let routes = w.texts("ol.hops li.hop .hop-route").await;
    assert!(routes.contains(&"manager → user".to_string()), "{routes:?}");
    w.shot("playground").await;

    // The conversation browser: each agent's own context.
    w.click("#open-conversation").await;
    w.wait("section.context[data-agent='writer'] li").await;
    w.wait_xpath("//section[@data-agent='manager']//pre[. = 'Draft for: Please write: a haiku']")
        .await;
    w.wait_xpath("//table[@id='c-turns']/tbody/tr").await;
    w.shot("conversation").await;

    // Revoke the key: the same call is refused.
    w.goto(&format!("/agencies/{agency}")).await;
    w.wait("li a[href^='/conversations/']").await;
    // Revoking asks first: dismissed, the key stays; accepted, it is revoked.
    w.click("#revoke-ci").await;
    let asked = w.c.get_alert_text().await.unwrap();
    assert!(asked.contains("Revoke the key ci?"), "{asked}");
    w.c.dismiss_alert().await.unwrap();
    w.wait("tr[data-key='ci'] .state-active").await;
    w.click("#revoke-ci").await;
    w.c.accept_alert().await.unwrap();
    w.wait("tr[data-key='ci'] .state-revoked").await;
    w.audit("agency-revoked").await;
    let (status, body) = chat(&base, &agency, &key).await;
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED, "{body}");

    // The list of agencies shows what is published; settings; and the editor at phone width.
    w.goto("/").await;
    w.wait_xpath("//ul[@id='agencies']//span[contains(., 'published v1')]")
        .await;
    w.shot("home").await;
    w.goto("/settings").await;
    w.wait("#password-form").await;
    w.type_into("#f-current_password", "not my password").await;
    w.type_into("#f-new_password", "another horse battery")
        .await;
    w.click("#password-form button[type='submit']").await;
    w.wait_xpath("//p[@id='e-current_password' and not(@hidden) and string-length(.) > 0]")
        .await;
    w.type_into("#f-current_password", "correct horse battery")
        .await;
    w.click("#password-form button[type='submit']").await;
    w.wait_xpath("//span[@id='password-status' and contains(., 'Password changed')]")
        .await;
    w.type_into("#f-pk-provider", "openai").await;
    w.type_into("#f-pk-key", "sk-test-abcdwxyz").await;
    w.click("#pk-form button[type='submit']").await;
    let masked = w
        .text(Locator::XPath(
            "//ul[@id='provider-keys']/li[contains(., 'openai')]/code",
        ))
        .await;
    assert_eq!(masked, "…wxyz");
    // An MCP server's credentials: shown by the header's name alone, never beside the keys.
    w.type_into("#f-mc-server", "search").await;
    w.type_into("#f-mc-value", "Bearer mcp-secret").await;
    w.click("#mc-form button[type='submit']").await;
    let shown = w
        .text(Locator::XPath(
            "//ul[@id='mcp-credentials']/li[contains(., 'search')]/code",
        ))
        .await;
    assert_eq!(shown, "authorization");
    let page = w.c.source().await.unwrap();
    assert!(!page.contains("mcp-secret"));
    assert_eq!(w.texts("#provider-keys li").await.len(), 1);
    w.audit("settings").await;
    w.c.set_window_size(390, 1600).await.unwrap();
    w.goto(&format!("/agencies/{agency}")).await;
    w.wait("#f-agents-1-rules-0-do").await;
    w.shot("editor-phone").await;
    // Nothing but the keys' table (which scrolls in its own box) is wider than a phone.
    let widths =
        w.c.execute(
            "const d = document.documentElement; return [d.clientWidth, d.scrollWidth];",
            vec![],
        )
        .await
        .unwrap();
    assert!(widths[1].as_u64() <= widths[0].as_u64(), "{widths}");

    // Importing an agency file (the demo's) opens it in the editor, published.
    w.c.set_window_size(1280, 1000).await.unwrap();
    w.goto("/").await;
    w.type_into("#import-text", STUDIO).await;
    w.click("#import-form button[type='submit']").await;
    let third = w
        .settled("reading the third agent's name", async || {
            w.wait("#f-agents-2-name").await.prop("value").await
        })
        .await;
    assert_eq!(third.as_deref(), Some("reviewer"));
    w.wait_xpath("//p[@id='published-now' and contains(., 'version 1')]")
        .await;
    // The reviewer's tools, with every listed tool offered for the field.
    let tools = w
        .wait("#f-agents-2-tools")
        .await
        .prop("value")
        .await
        .unwrap();
    assert_eq!(tools.as_deref(), Some("builtin/echo"));
    w.wait("datalist#tool-names option[value='builtin/calculate']")
        .await;
    // Its tool hop in the playground: the call and its result, each with its route.
    let studio =
        w.c.current_url()
            .await
            .unwrap()
            .path()
            .trim_start_matches("/agencies/")
            .to_string();
    w.goto(&format!("/agencies/{studio}/playground")).await;
    w.type_into("#message", "a parser").await;
    w.click("#send").await;
    w.wait_xpath(
        "//ol[@class='hops']/li[contains(@class, 'kind-tool_call')][.//strong[. = 'reviewer → builtin/echo']]",
    )
    .await;
    w.wait_xpath(
        "//ol[@class='hops']/li[contains(@class, 'kind-tool_result')][.//strong[. = 'builtin/echo → reviewer']]",
    )
    .await;
    w.wait_xpath("//article[contains(@class, 'done')]//p[@class='answer-text']")
        .await;
    w.shot("playground-tools").await;

    // Log out: pages send the visitor to the log-in page again.
    w.click("form[action='/logout'] button").await;
    w.wait("#email").await;
    w.goto("/").await;
    w.wait("form[action='/login']").await;

    w.c.close().await.unwrap();
}

// ---- A roundtable room ----

/// A streamed answer of `text`, in two pieces (so the page sees deltas).
fn streamed(text: &str) -> agency_fakes::Reply {
    let (a, b) = text.split_at(text.find(' ').map_or(0, |i| i + 1));
    openai::stream(&[a, b], 5, 2)
}

/// The texts of the conversation (not the system prompt) the fake's `n`th request carried.
fn context_of(fake: &Fake, n: usize) -> Vec<String> {
    let requests = fake.requests();
    let r = requests
        .get(n)
        .unwrap_or_else(|| panic!("the fake has {} requests, not {}", requests.len(), n + 1));
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != json!("system"))
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn mentions(context: &[String], text: &str) -> bool {
    context.iter().any(|c| c.contains(text))
}

/// The provider `name`, of the OpenAI kind, at the fake.
fn fake_provider(providers: &mut Providers, name: &str, fake: &Fake) {
    let spec = ProviderSpec {
        name: name.into(),
        kind: ProviderKind::OpenAi,
        base_url: Some(format!("{}/v1", fake.url)),
        api_key_env: None,
        max_concurrency: None,
        requests_per_minute: None,
        prices: Vec::new(),
    };
    providers.insert(
        name,
        agency_providers::from_spec(
            &spec,
            None,
            &Default::default(),
            agency_providers::http::Origin::Operator,
        )
        .unwrap(),
    );
}

impl Walk {
    /// The room's messages as shown: (kind class, author, text).
    async fn messages(&self) -> Vec<(String, String, String)> {
        self.settled("reading the room's messages", async || {
            let mut out = Vec::new();
            for li in self.c.find_all(Locator::Css("#room-messages > li")).await? {
                let class = li.attr("class").await?.unwrap_or_default();
                let author = li.find(Locator::Css(".author")).await?.text().await?;
                let text = li.find(Locator::Css(".msg-text")).await?.text().await?;
                out.push((class, author, text));
            }
            Ok(out)
        })
        .await
    }

    /// Waits for an answer of `agent` reading `text`, attributed to it.
    async fn answer(&self, agent: &str, text: &str) {
        self.wait_xpath(&format!(
            "//ol[@id='room-messages']/li[contains(@class, 'kind-agent') and .//strong[@class='author' and . = '{agent}'] and .//p[contains(@class, 'msg-text') and . = '{text}']]"
        ))
        .await;
    }

    async fn say(&self, text: &str) {
        self.type_into("#message", text).await;
        self.click("#send").await;
        self.wait_xpath(&format!(
            "//ol[@id='room-messages']/li[contains(@class, 'kind-person') and .//p[. = '{text}']]"
        ))
        .await;
    }

    async fn add_agent(&self, name: &str, model: &str, role: &str) {
        self.type_into("#f-name", name).await;
        self.type_into("#f-model", model).await;
        self.type_into("#f-role", role).await;
        self.click("#add-agent").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roundtable_room_answers_in_parallel_and_keeps_its_state() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Each agent on a fake of its own, which records what its model was sent.
    let alpha = Fake::start().await;
    let beta = Fake::start().await;
    for t in ["Alpha one", "Alpha two", "Alpha three"] {
        alpha.push(streamed(t));
    }
    alpha.push(openai::error(
        400,
        "this model is confused",
        "invalid_request_error",
        None,
    ));
    alpha.otherwise(streamed("Alpha again"));
    for t in ["Beta one", "Beta two"] {
        beta.push(streamed(t));
    }
    beta.otherwise(streamed("Beta again"));
    let mut providers = Providers::builtin();
    fake_provider(&mut providers, "fa", &alpha);
    fake_provider(&mut providers, "fb", &beta);
    let base = app_with(dir.path(), providers).await;
    // Sign up, then a new room from the Rooms page.
    let mut w = Walk::signed_up(c, base, 0, "grace@example.com").await;
    let shot = |n: &str| format!("room-{n}");
    w.click("nav a[href='/rooms']").await;
    w.wait("#no-rooms:not([hidden])").await;
    w.type_into("#f-name", "standup").await;
    w.click("#create-room").await;
    w.wait("#room[data-ready='true']").await;
    assert_eq!(w.text(Locator::Css("#room-name")).await, "standup");

    // Two agents; a model no provider serves is refused at its field.
    w.click("#add-agent-box summary").await;
    w.add_agent("alpha", "nowhere/m", "says yes").await;
    let e = w
        .text(Locator::XPath(
            "//p[@id='e-model' and not(@hidden) and string-length(.) > 0]",
        ))
        .await;
    assert!(e.contains("nowhere/m"), "{e}");
    w.shot(&shot("agent-error")).await;
    w.add_agent("alpha", "fa/m", "says yes").await;
    w.wait("button.pill[data-agent='alpha'][aria-pressed='true']")
        .await;
    w.add_agent("beta", "fb/m", "says no").await;
    w.wait("button.pill[data-agent='beta'][aria-pressed='true']")
        .await;

    // Over the limit: the counter shows it and nothing is sent.
    w.c.execute(
        "const m = document.getElementById('message'); m.value = 'x'.repeat(5001); m.dispatchEvent(new Event('input'));",
        vec![],
    )
    .await
    .unwrap();
    w.wait("#counter.over").await;
    w.click("#send").await;
    let e = w
        .text(Locator::XPath(
            "//p[@id='chat-error' and not(@hidden) and contains(., '5000')]",
        ))
        .await;
    assert!(e.contains("At most"), "{e}");
    w.shot(&shot("over-limit")).await;
    assert!(alpha.requests().is_empty() && beta.requests().is_empty());

    // Both agents answer, each attributed.
    w.say("Remember PINEAPPLE").await;
    w.answer("alpha", "Alpha one").await;
    w.answer("beta", "Beta one").await;
    w.wait("#pending:empty").await;
    w.audit(&shot("answers")).await;
    assert!(mentions(&context_of(&alpha, 0), "Remember PINEAPPLE"));
    assert!(mentions(&context_of(&beta, 0), "Remember PINEAPPLE"));

    // Left out of the context: the next requests do not carry it; everything else they do.
    w.click("#room-messages > li:first-child input.included")
        .await;
    w.wait("#room-messages > li.excluded:first-child").await;
    w.say("second question").await;
    w.answer("alpha", "Alpha two").await;
    w.answer("beta", "Beta two").await;
    for (fake, own, other) in [
        (&alpha, "Alpha one", "Beta one"),
        (&beta, "Beta one", "Alpha one"),
    ] {
        let context = context_of(fake, 1);
        assert!(!mentions(&context, "PINEAPPLE"), "{context:?}");
        for t in ["second question", own, other] {
            assert!(mentions(&context, t), "{t} missing from {context:?}");
        }
    }
    w.shot(&shot("excluded")).await;

    // A disabled agent is sent nothing.
    w.click("button.pill[data-agent='beta']").await;
    w.wait("button.pill[data-agent='beta'][aria-pressed='false']")
        .await;
    w.say("third question").await;
    w.wait_xpath(
        "//span[@id='chat-status' and (. = 'Answering: alpha.' or . = 'Everyone answered.')]",
    )
    .await;
    w.answer("alpha", "Alpha three").await;
    // Once it answered, the status says so rather than still naming it.
    w.wait_xpath("//span[@id='chat-status' and . = 'Everyone answered.']")
        .await;
    assert!(mentions(&context_of(&alpha, 2), "third question"));
    assert_eq!(beta.requests().len(), 2);

    // Solo: every agent disabled, the message is stored and nobody is asked.
    w.click("button.pill[data-agent='alpha']").await;
    w.wait("button.pill[data-agent='alpha'][aria-pressed='false']")
        .await;
    w.say("just me").await;
    w.wait_xpath("//span[@id='chat-status' and contains(., 'No agent is asked')]")
        .await;
    assert_eq!((alpha.requests().len(), beta.requests().len()), (3, 2));
    w.shot(&shot("solo")).await;

    // Reload: the messages, the unchecked box and the disabled pills are as they were.
    let before = w.messages().await;
    assert_eq!(before.len(), 9, "{before:?}");
    w.c.refresh().await.unwrap();
    w.wait("#room[data-ready='true']").await;
    assert_eq!(w.messages().await, before);
    assert!(before[0].0.contains("excluded"), "{before:?}");
    let checked = w
        .settled("reading the included boxes", async || {
            let mut checked = Vec::new();
            for b in
                w.c.find_all(Locator::Css("#room-messages input.included"))
                    .await?
            {
                checked.push(b.is_selected().await?);
            }
            Ok(checked)
        })
        .await;
    assert_eq!(
        checked,
        [false, true, true, true, true, true, true, true, true]
    );
    w.wait("button.pill[data-agent='alpha'][aria-pressed='false']")
        .await;
    w.wait("button.pill[data-agent='beta'][aria-pressed='false']")
        .await;
    let authors: Vec<&str> = before.iter().map(|(_, a, _)| a.as_str()).collect();
    assert_eq!(authors[0], "You");
    assert_eq!(authors[3], "You");
    w.shot(&shot("reloaded")).await;

    // A failure shows in the agent's place; Retry asks it again. (The pill answers Enter too.)
    w.settled("pressing Enter on alpha's pill", async || {
        w.wait("button.pill[data-agent='alpha']")
            .await
            .send_keys(&fantoccini::key::Key::Enter.to_string())
            .await
    })
    .await;
    w.wait("button.pill[data-agent='alpha'][aria-pressed='true']")
        .await;
    w.say("fourth question").await;
    let failed = w
        .text(Locator::XPath("//ol[@id='room-messages']/li[contains(@class, 'kind-error') and .//strong[. = 'alpha']]"))
        .await;
    assert!(failed.contains("confused"), "{failed}");
    w.audit(&shot("failed")).await;
    w.click("#room-messages li.kind-error button.retry").await;
    w.answer("alpha", "Alpha again").await;
    assert!(mentions(&context_of(&alpha, 4), "fourth question"));
    assert_eq!(beta.requests().len(), 2);
    w.shot(&shot("retried")).await;

    // A disabled agent receives nothing even when named: the room says so, in reply.
    w.say("@beta are you there?").await;
    let said = w
        .text(Locator::XPath(
            "//ol[@id='room-messages']/li[contains(@class, 'kind-utility')][last()]",
        ))
        .await;
    assert!(
        said.contains("@beta is disabled and received nothing"),
        "{said}"
    );
    assert_eq!(beta.requests().len(), 2);
    w.click("button.pill[data-agent='beta']").await;
    w.wait("button.pill[data-agent='beta'][aria-pressed='true']")
        .await;

    // A second browser on the same room stays in step with the first: its message, and the
    // agent it @mentions pending with its text as it streams.
    beta.push(openai::stalled_stream(&["Beta is ", "thinking"]));
    let room = w.c.current_url().await.unwrap().path().to_string();
    let (_driver2, c2) = browser().await.unwrap();
    let mut other = Walk {
        c: c2,
        base: w.base.clone(),
        shots: w.shots.clone(),
        n: 50,
    };
    other.goto("/login").await;
    other.type_into("#email", "grace@example.com").await;
    other.type_into("#password", "correct horse battery").await;
    other.click("#submit").await;
    other.wait("nav a[href='/rooms']").await;
    other.goto(&room).await;
    other.wait("#room[data-ready='true']").await;
    other.say("@beta status?").await;
    w.wait_xpath("//ol[@id='room-messages']/li[contains(@class, 'kind-person') and .//p[. = '@beta status?']]")
        .await;
    for walk in [&w, &other] {
        walk.wait_xpath(
            "//ul[@id='pending']/li[@data-agent='beta' and .//span[contains(@class, 'msg-text') and . = 'Beta is thinking']]",
        )
        .await;
    }
    w.shot(&shot("pending")).await;
    other.shot(&shot("second-browser")).await;
    assert!(mentions(&context_of(&beta, 2), "@beta status?"));
    assert_eq!(alpha.requests().len(), 5);
    assert_eq!(w.messages().await, other.messages().await);

    other.c.close().await.unwrap();

    // A room of 2,000 messages (made through the API from the page, no agents: solo) opens
    // with all of them, and a new message is appended after them.
    w.c.update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
        Some(PATIENCE),
        None,
        None,
    ))
    .await
    .unwrap();
    let big = w
        .c
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            (async () => {
              const headers = { "x-csrf-token": document.querySelector('meta[name="csrf-token"]').content,
                                "content-type": "application/json" };
              const made = await fetch("/api/rooms", { method: "POST", headers, body: JSON.stringify({ name: "big" }) });
              const id = (await made.json()).room.id;
              for (let i = 0; i < 2000; i += 10) {
                const batch = [];
                for (let j = i; j < i + 10; j++)
                  batch.push(fetch("/api/rooms/" + id + "/messages", { method: "POST", headers, body: JSON.stringify({ text: "note " + j }) }));
                for (const r of await Promise.all(batch)) if (!r.ok) { done("failed: " + r.status); return; }
              }
              done(id);
            })();"#,
            vec![],
        )
        .await
        .unwrap();
    let big = big.as_str().unwrap().to_string();
    assert!(!big.starts_with("failed"), "{big}");
    w.goto("/rooms").await;
    w.wait_xpath("//ul[@id='rooms']//a[. = 'big']").await;
    w.wait_xpath("//ul[@id='rooms']//a[. = 'standup']").await;
    w.shot(&shot("list")).await;
    w.goto(&format!("/rooms/{big}")).await;
    w.wait("#room[data-ready='true']").await;
    let count = "return document.querySelectorAll('#room-messages > li').length;";
    assert_eq!(w.c.execute(count, vec![]).await.unwrap(), json!(2000));
    w.say("the last word").await;
    w.wait_xpath("//ol[@id='room-messages']/li[last()][.//p[. = 'the last word']]")
        .await;
    assert_eq!(w.c.execute(count, vec![]).await.unwrap(), json!(2001));
    w.shot(&shot("big")).await;

    // A room made from an agency has its agents; × removes one (after asking).
    w.goto("/").await;
    w.type_into("#import-text", STUDIO).await;
    w.click("#import-form button[type='submit']").await;
    w.wait("#f-agents-2-name").await;
    w.goto("/rooms").await;
    w.wait_xpath("//select[@id='f-agency']/option[. = 'studio']")
        .await;
    w.type_into("#f-name", "studio room").await;
    w.select_label("#f-agency", "studio").await;
    w.click("#create-room").await;
    w.wait("#room[data-ready='true']").await;
    for agent in ["manager", "programmer", "reviewer"] {
        w.wait(&format!("button.pill[data-agent='{agent}']")).await;
    }
    w.click("button.pill-remove[data-agent='reviewer']").await;
    w.c.accept_alert().await.unwrap();
    w.wait_xpath("//ul[@id='pills' and not(.//button[@data-agent='reviewer'])]")
        .await;
    // At phone width nothing is wider than the screen.
    w.c.set_window_size(390, 1200).await.unwrap();
    w.c.refresh().await.unwrap();
    w.wait("#room[data-ready='true']").await;
    w.wait("button.pill[data-agent='programmer']").await;
    assert!(
        w.c.find(Locator::Css("button.pill[data-agent='reviewer']"))
            .await
            .is_err()
    );
    w.shot(&shot("phone")).await;
    let widths =
        w.c.execute(
            "const d = document.documentElement; return [d.clientWidth, d.scrollWidth];",
            vec![],
        )
        .await
        .unwrap();
    assert!(widths[1].as_u64() <= widths[0].as_u64(), "{widths}");

    w.c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_is_registered_tagged_and_replied_to_in_a_room() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The bot: a loopback server that records what it was sent.
    let bot = Fake::start().await;
    bot.push(agency_fakes::Reply::json(
        json!({"message": "31 °C and steady"}),
    ));
    bot.push(agency_fakes::Reply::json(
        json!({"message": "you are welcome"}),
    ));
    let mut providers = Providers::builtin();
    providers.set_bots(
        agency_providers::bot::BotClient::new(agency_providers::bot::default_settings(), true)
            .unwrap(),
    );
    let base = app_with(dir.path(), providers).await;
    let mut w = Walk::signed_up(c, base, 80, "hedy@example.com").await;
    let shot = |n: &str| format!("bot-{n}");
    w.click("nav a[href='/rooms']").await;
    w.type_into("#f-name", "plant").await;
    w.click("#create-room").await;
    w.wait("#room[data-ready='true']").await;

    // The utility bot registers it and shows its caller key, once.
    w.say(&format!("/register ferm {}/bot Fermin", bot.url))
        .await;
    let said = w
        .text(Locator::XPath(
            "//ol[@id='room-messages']/li[contains(@class, 'kind-utility')]",
        ))
        .await;
    assert!(said.contains("Registered @ferm"), "{said}");
    w.wait("#caller-key:not([hidden])").await;
    let key = w.text(Locator::Css("#caller-key-value")).await;
    assert!(key.starts_with("ck_"), "{key}");
    assert!(!said.contains(&key));
    w.wait("button.pill[data-agent='ferm']").await;
    w.audit(&shot("registered")).await;
    w.click("#caller-key-done").await;
    w.wait("#caller-key[hidden]").await;

    // Tagged: the bot is called with the key and answers as a reply.
    w.say("@ferm temperature?").await;
    w.answer("ferm", "31 °C and steady").await;
    let reply = w
        .text(Locator::XPath(
            "//ol[@id='room-messages']/li[contains(@class, 'kind-agent')]//p[@class='reply-to']",
        ))
        .await;
    assert!(reply.contains("@ferm temperature?"), "{reply}");
    assert_eq!(bot.requests()[0].headers["x-caller-key"], key);

    // Reply to the bot's message: only the bot is asked, with the message it replies to.
    w.click("#room-messages li.kind-agent button.reply").await;
    w.wait("#replying:not([hidden])").await;
    w.say("thanks").await;
    w.answer("ferm", "you are welcome").await;
    w.wait("#replying[hidden]").await;
    let second = &bot.requests()[1].body;
    assert_eq!(second["message"]["text"], json!("thanks"));
    assert_eq!(
        second["conversation"][0]["messages"][1]["from"],
        json!("BOT")
    );
    w.shot(&shot("replied")).await;

    // Reloaded, the key is nowhere on the page.
    w.c.refresh().await.unwrap();
    w.wait("#room[data-ready='true']").await;
    let html = w.c.source().await.unwrap();
    assert!(!html.contains(&key));
    assert_eq!(w.messages().await.len(), 6);
    w.c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_role_is_written_once_and_chosen_for_an_agent() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = Fake::start().await;
    model.otherwise(streamed("Noted, boss"));
    let mut providers = Providers::builtin();
    fake_provider(&mut providers, "fm", &model);
    let base = app_with(dir.path(), providers).await;
    let mut w = Walk::signed_up(c, base, 90, "ida@example.com").await;
    w.click("nav a[href='/rooms']").await;
    w.wait("#no-definitions:not([hidden])").await;

    // A taken name is shown at its field; then the role is saved, and edited.
    w.type_into("#d-name", "critic").await;
    w.type_into("#d-text", "You find the flaws.").await;
    w.click("#save-definition").await;
    w.wait("li[data-definition='role:critic']").await;
    w.type_into("#d-name", "Critic").await;
    w.type_into("#d-text", "again").await;
    w.click("#save-definition").await;
    let e = w
        .text(Locator::XPath(
            "//p[@id='e-d-name' and not(@hidden) and string-length(.) > 0]",
        ))
        .await;
    assert!(e.contains("already"), "{e}");
    w.c.refresh().await.unwrap();
    w.click("li[data-definition='role:critic'] button.edit")
        .await;
    w.wait("#cancel-definition:not([hidden])").await;
    w.c.execute("document.getElementById('d-text').value = '';", vec![])
        .await
        .unwrap();
    w.type_into("#d-text", "You find every flaw, kindly.").await;
    w.click("#save-definition").await;
    w.wait_xpath("//li[@data-definition='role:critic' and contains(., 'every flaw')]")
        .await;
    w.audit("saved-roles").await;

    // In a room, an agent points to it; its model is sent the role.
    w.type_into("#f-name", "review").await;
    w.click("#create-room").await;
    w.wait("#room[data-ready='true']").await;
    w.click("#add-agent-box summary").await;
    w.wait_xpath("//select[@id='f-role-id']/option[. = 'critic']")
        .await;
    w.select_label("#f-role-id", "critic").await;
    w.wait("#f-role[hidden]").await;
    w.type_into("#f-name", "carla").await;
    w.type_into("#f-model", "fm/m").await;
    w.click("#add-agent").await;
    w.wait("button.pill[data-agent='carla']").await;
    w.say("Here is my plan").await;
    w.answer("carla", "Noted, boss").await;
    let system = model.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("Your role: You find every flaw, kindly."),
        "{system}"
    );
    w.shot("room-with-saved-role").await;

    // Deleted (after asking), the room is gone from the list.
    w.click("#delete-room").await;
    w.c.accept_alert().await.unwrap();
    w.wait("#no-rooms:not([hidden])").await;
    w.c.close().await.unwrap();
}

// ---- The first hour: an example, the chat, the graph, the guards, every page audited ----

/// What the support example answers to "my invoice is wrong".
const SUPPORT_ANSWER: &str = "Sorry for the trouble. Billing credited your account with 19 USD. (Escalated to billing. New ticket: my invoice is wrong)";

impl Walk {
    /// The edges the team's graph draws, as `from>to`, sorted.
    async fn edges(&self) -> Vec<String> {
        let mut out = self
            .settled("reading the graph's edges", async || {
                let mut out = Vec::new();
                for e in self.c.find_all(Locator::Css("#graph g.edge")).await? {
                    let from = e.attr("data-from").await?.unwrap_or_default();
                    let to = e.attr("data-to").await?.unwrap_or_default();
                    out.push(format!("{from}>{to}"));
                }
                Ok(out)
            })
            .await;
        out.sort();
        out
    }

    /// Waits until the edge `from` → `to` has lit up (the hops' events may trail the answer).
    async fn lit_up(&self, from: &str, to: &str) {
        self.wait(&format!(
            "#graph g.edge[data-from='{from}'][data-to='{to}']:not([data-lit='0'])"
        ))
        .await;
    }

    /// How many times the edge `from` → `to` lit up.
    async fn lit(&self, from: &str, to: &str) -> u64 {
        let css = format!("#graph g.edge[data-from='{from}'][data-to='{to}']");
        let n = self
            .settled("reading an edge", async || {
                self.wait(&css).await.attr("data-lit").await
            })
            .await;
        n.unwrap_or_default().parse().unwrap()
    }

    /// The waterfall under `scope` (a turn, or a turn of the conversation browser): its lanes'
    /// names, how many model-call bars, tool-call bars and hop arrows it draws, and its label.
    async fn waterfall(&self, scope: &str) -> Waterfall {
        self.wait(&format!("{scope} svg.waterfall g.wf-hop")).await;
        let v = self
            .c
            .execute(
                "const s = document.querySelector(arguments[0] + ' svg.waterfall');
                 return {
                   lanes: [...s.querySelectorAll('g.wf-lane')].map((g) => g.dataset.lane),
                   names: [...s.querySelectorAll('g.wf-lane .wf-lane-name')].map((t) => t.textContent),
                   notes: [...s.querySelectorAll('g.wf-lane .wf-lane-note')].map((t) => t.textContent),
                   model: s.querySelectorAll('g.wf-bars rect.wf-call').length,
                   tools: [...s.querySelectorAll('g.wf-bars rect.wf-tool')].map((r) => r.dataset.lane),
                   arrows: s.querySelectorAll('g.wf-hops g.wf-hop').length,
                   label: s.getAttribute('role') + ': ' + s.getAttribute('aria-label'),
                   title: s.querySelector(':scope > title').textContent,
                 };",
                vec![json!(scope)],
            )
            .await
            .unwrap();
        serde_json::from_value(v).unwrap()
    }

    /// Sends `text` in the playground with Ctrl+Enter and waits for the turn's answer.
    async fn chat_turn(&self, text: &str, turns_before: usize) -> String {
        self.type_into("#message", text).await;
        self.settled("pressing Ctrl+Enter", async || {
            self.wait("#message")
                .await
                .send_keys("\u{E009}\u{E007}\u{E000}")
                .await
        })
        .await;
        self.text(Locator::XPath(&format!(
            "//div[@id='turns']/article[{}][contains(@class, 'done')]//p[@class='answer-text']",
            turns_before + 1
        )))
        .await
    }
}

/// What a turn's waterfall draws (`Walk::waterfall`).
#[derive(Debug, serde::Deserialize)]
struct Waterfall {
    lanes: Vec<String>,
    names: Vec<String>,
    notes: Vec<String>,
    model: usize,
    tools: Vec<String>,
    arrows: usize,
    label: String,
    title: String,
}

impl Waterfall {
    /// The support example's turn: the user and the three agents that took part, their five
    /// model calls (frontdesk's two, triage's one, billing's two: before and after its tool),
    /// the tool call on billing's lane, and an arrow for each of the turn's `hops` entries
    /// (the hop list's items: the input, the deliveries, the tool call and result, the answer).
    fn is_the_support_turn(&self, hops: usize) {
        let lanes = ["user", "frontdesk", "triage", "billing"];
        assert_eq!(self.lanes, lanes, "{self:?}");
        assert_eq!(self.names, lanes, "{self:?}");
        assert_eq!(self.model, 5, "{self:?}");
        assert_eq!(self.tools, ["billing"], "{self:?}");
        assert_eq!(self.arrows, hops, "{self:?}");
        assert!(self.label.starts_with("img: "), "{self:?}");
        assert!(
            self.title
                .contains("billing: 2 model calls, builtin/calculate ("),
            "{self:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_account_starts_from_an_example_and_chats_with_its_team() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = app(dir.path()).await;
    let mut w = Walk {
        c,
        base,
        shots: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots"),
        n: 200,
    };
    std::fs::create_dir_all(&w.shots).unwrap();
    // The pages before a session.
    w.goto("/login").await;
    w.wait("#email").await;
    // Every page names its icon, which the server has.
    let icon =
        w.c.execute(
            "return fetch(document.querySelector('link[rel=icon]').href).then((r) => [r.status, r.headers.get('content-type')]);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(icon, json!([200, "image/svg+xml"]));
    w.audit("ux-login").await;
    w.goto("/signup").await;
    w.wait("#email").await;
    w.audit("ux-signup").await;
    // An address nobody serves, before a session: a page with a way home.
    w.goto("/no/such/page").await;
    w.wait("main a[href='/']").await;
    w.audit("ux-not-found").await;
    w.goto("/signup").await;
    w.wait("#email").await;
    w.type_into("#email", "newcomer@example.com").await;
    w.type_into("#password", "correct horse battery").await;
    w.click("#submit").await;

    // A new account sees the gallery: the studio and three more teams.
    w.wait("#use-support").await;
    let titles = w.texts("#gallery .example h3").await;
    assert_eq!(
        titles,
        [
            "Software studio studio",
            "Research desk with a critic research",
            "Support team with escalation support",
            "Roundtable standup standup"
        ]
    );
    w.audit("ux-home-gallery").await;
    w.click("#use-support").await;

    // "Use this" lands in the playground of the account's own copy, its team drawn beside.
    w.wait("#graph g.edge[data-from='triage'][data-to='billing']")
        .await;
    assert_eq!(
        w.edges().await,
        [
            "billing>frontdesk",
            "frontdesk>triage",
            "frontdesk>user",
            "triage>billing",
            "user>frontdesk"
        ]
    );
    w.wait("#graph g.node.manager[data-node='frontdesk']").await;
    w.wait("#graph g.node.user[data-node='user']").await;
    assert!(
        w.texts("#graph .edge-label")
            .await
            .contains(&"builtin/calculate".to_string())
    );
    assert_eq!(w.lit("triage", "billing").await, 0);
    w.wait_xpath("//span[@id='send-hint' and contains(., 'Ctrl') and contains(., 'Enter')]")
        .await;

    // A chat: Ctrl+Enter sends; the answer comes under the message, and the edges its hops
    // took lit up while they happened.
    let answer = w.chat_turn("my invoice is wrong", 0).await;
    assert_eq!(answer, SUPPORT_ANSWER);
    for (from, to) in [
        ("user", "frontdesk"),
        ("frontdesk", "triage"),
        ("triage", "billing"),
        ("billing", "frontdesk"),
        ("frontdesk", "user"),
    ] {
        w.lit_up(from, to).await;
    }
    // The turn is folded under the answer; opened, the hops read as a conversation between
    // the agents, the tool call and its result included, and what each agent spent.
    assert_eq!(
        w.c.execute(
            "return document.querySelector('article.turn details').open;",
            vec![]
        )
        .await
        .unwrap(),
        json!(false)
    );
    w.click("article.turn.done details.turn-details summary")
        .await;
    let routes = w.texts("ol.hops li.hop .hop-route").await;
    assert_eq!(
        routes,
        [
            "user → frontdesk",
            "frontdesk → triage",
            "triage → billing",
            "billing → builtin/calculate",
            "builtin/calculate → billing",
            "billing → frontdesk",
            "frontdesk → user"
        ]
    );
    let agents = w.texts("table.per-agent tbody th").await;
    assert_eq!(agents, ["frontdesk", "triage", "billing"]);
    // Billing's row: one message and one tool call sent, nothing spent on the rules model.
    let billing = w
        .texts("table.per-agent tbody tr[data-agent='billing'] td")
        .await;
    assert_eq!(billing[0], "2");
    assert_eq!(billing[2], "$0.000000");
    let summary = w.text(Locator::Css("article.turn .turn-usage")).await;
    assert!(
        summary.contains("6 hops") && summary.contains("ended by answered"),
        "{summary}"
    );
    // Its waterfall, drawn live and then from the turn's record: a lane per agent, its model
    // and tool calls as bars, an arrow per hop; each lane's tokens and cost are the table's.
    let drawn = w.waterfall("article.turn").await;
    drawn.is_the_support_turn(routes.len());
    let tokens = w
        .texts("table.per-agent tbody tr td:nth-child(3)")
        .await
        .iter()
        .map(|t| {
            let (i, o) = t.split_once(" / ").unwrap();
            i.parse::<u64>().unwrap() + o.parse::<u64>().unwrap()
        })
        .collect::<Vec<_>>();
    let costs = w.texts("table.per-agent tbody tr td:nth-child(4)").await;
    for (i, note) in drawn.notes[1..].iter().enumerate() {
        assert_eq!(
            *note,
            format!("{} tokens · {}", tokens[i], costs[i]),
            "{drawn:?}"
        );
    }
    w.audit("ux-playground").await;
    // The waterfall on its own, for the docs (`docs/waterfall.png`).
    w.c.set_window_size(1366, 900).await.unwrap();
    w.c.execute(
        "document.querySelector('article.turn svg.waterfall').scrollIntoView({ block: 'center' });",
        vec![],
    )
    .await
    .unwrap();
    w.settle_layout().await;
    w.shot("ux-waterfall-1366").await;

    // Oldest first, the input below the last turn.
    w.chat_turn("and a refund", 1).await;
    let said = w.texts("#turns article .you-text").await;
    assert_eq!(said, ["my invoice is wrong", "and a refund"]);
    let below = w
        .c
        .execute(
            "const turns = document.querySelectorAll('#turns article'); return document.getElementById('message').getBoundingClientRect().top > turns[turns.length - 1].getBoundingClientRect().bottom;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(below, json!(true));
    let first = w
        .wait("#open-conversation")
        .await
        .attr("href")
        .await
        .unwrap()
        .unwrap();

    // A new conversation: the chat empties, and the next message starts another.
    w.click("#new-conversation").await;
    w.wait_xpath("//div[@id='turns' and not(*)]").await;
    w.chat_turn("hello again", 0).await;
    let second = w
        .wait("#open-conversation")
        .await
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first, second);
    assert_eq!(w.texts("#turns article").await.len(), 1);
    // A reload shows the same conversation again, its turn folded under its answer.
    w.c.refresh().await.unwrap();
    let again = w
        .text(Locator::XPath(
            "//div[@id='turns']/article[1][contains(@class, 'done')]//p[@class='answer-text']",
        ))
        .await;
    assert!(again.ends_with("New ticket: hello again)"), "{again}");
    assert_eq!(w.texts("#turns article .you-text").await, ["hello again"]);
    assert_eq!(
        w.wait("#open-conversation")
            .await
            .attr("href")
            .await
            .unwrap()
            .unwrap(),
        second
    );
    assert_eq!(w.texts("#turns li.hop").await.len(), 7);
    // After the reload the waterfall is drawn from the stored trace, each agent's cost from
    // the stored turn (not a dash): the same as the table's.
    w.click("article.turn.done details.turn-details summary")
        .await;
    let drawn = w.waterfall("article.turn").await;
    drawn.is_the_support_turn(7);
    let costs = w.texts("table.per-agent tbody tr td:nth-child(4)").await;
    assert_eq!(costs, ["$0.000000"; 3], "{drawn:?}");
    for note in &drawn.notes[1..] {
        assert!(note.ends_with(" · $0.000000"), "{drawn:?}");
    }

    // The conversation browser.
    w.click("#open-conversation").await;
    w.wait_xpath("//table[@id='c-turns']/tbody/tr").await;
    w.wait("section.context[data-agent='billing'] li").await;
    // The user's transcript has the user's own message, then the answer.
    let transcript = w
        .texts("section.context[data-agent=\"The user's transcript\"] pre.msg-text")
        .await;
    assert_eq!(
        transcript,
        [
            "hello again",
            "Sorry for the trouble. Billing credited your account with 19 USD. (Escalated to billing. New ticket: hello again)"
        ]
    );
    // Each turn's waterfall, from its stored trace, with each agent's cost.
    let drawn = w.waterfall("section.turn-waterfall[data-turn='1']").await;
    drawn.is_the_support_turn(7);
    for note in &drawn.notes[1..] {
        assert!(note.ends_with(" · $0.000000"), "{drawn:?}");
    }
    w.audit("ux-conversation").await;

    // The home page now offers the account's copy instead of another import.
    w.goto("/").await;
    w.wait("#open-support").await;
    w.wait("#use-research").await;
    w.audit("ux-home").await;

    // The rest of the pages: settings, rooms, a room, and a page that cannot be shown.
    w.goto("/settings").await;
    w.wait("#password-form").await;
    w.audit("ux-settings").await;
    w.goto("/rooms").await;
    w.wait("#room-form").await;
    w.type_into("#f-name", "desk").await;
    w.select_label("#f-agency", "support").await;
    w.click("#create-room").await;
    w.wait("#pills button.pill[data-agent='billing']").await;
    w.audit("ux-room").await;
    w.goto("/rooms").await;
    w.wait("#rooms li").await;
    w.audit("ux-rooms").await;
    w.goto("/agencies/nothing-here").await;
    w.wait("h1").await;
    w.audit("ux-error").await;
    w.goto("/no/such/page").await;
    w.wait("main a[href='/agencies']").await;

    // The conversation browser's list, from the menu: the support conversation leads to its page.
    w.click("nav a[href='/conversations']").await;
    w.wait("ul.conversations a[href^='/conversations/']").await;
    w.audit("ux-conversations").await;
    w.click("ul.conversations a[href^='/conversations/']").await;
    w.wait("#c-turns tbody tr").await;

    w.c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_draws_the_team_guards_unsaved_changes_and_shows_versions_and_keys() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = app(dir.path()).await;
    let mut w = Walk::signed_up(c, base.clone(), 300, "editor@example.com").await;
    w.click("#use-studio").await;
    w.wait("#graph g.edge").await;
    w.click(".links a[href^='/agencies/']").await;

    // The graph beside the prompts: every edge the rules allow, the manager and user marked.
    w.wait("#f-agents-2-name").await;
    w.wait("#graph g.edge[data-from='reviewer'][data-to='manager']")
        .await;
    assert_eq!(
        w.edges().await,
        [
            "manager>programmer",
            "manager>reviewer",
            "manager>user",
            "programmer>manager",
            "reviewer>manager",
            "user>manager"
        ]
    );
    w.wait("#graph g.node.manager[data-node='manager']").await;
    // Imported, the draft is the published version.
    w.wait_xpath("//span[@id='draft-state' and . = 'draft is v1']")
        .await;
    w.audit("ux-editor").await;

    // A fan-out, drawn as the draft changes: the reviewer answers the manager and the programmer.
    w.click("fieldset.agent:nth-of-type(3) .rule:nth-of-type(1) button.add-addressee")
        .await;
    w.wait("#graph g.edge.fan-out[data-from='reviewer'][data-to='programmer']")
        .await;
    w.wait("#graph g.edge.fan-out[data-from='reviewer'][data-to='manager']")
        .await;

    // Leaving with unsaved changes asks first: a reload or a closed tab (the browser's own
    // prompt, which WebDriver's navigation accepts by itself, so the handler is asked here)...
    let unload = "const e = new Event('beforeunload', { cancelable: true }); window.dispatchEvent(e); return e.defaultPrevented;";
    assert_eq!(w.c.execute(unload, vec![]).await.unwrap(), json!(true));
    // ...and a link of the page; staying keeps the changes.
    w.click("nav a[href='/agencies']").await;
    let asked = w.c.get_alert_text().await.unwrap();
    assert!(asked.contains("not saved"), "{asked}");
    w.c.dismiss_alert().await.unwrap();
    assert!(
        w.c.current_url()
            .await
            .unwrap()
            .path()
            .starts_with("/agencies/")
    );
    w.wait("#graph g.edge.fan-out[data-from='reviewer'][data-to='programmer']")
        .await;

    // Ctrl+S saves; then the draft differs from v1, and the diff says how.
    w.settled("pressing Ctrl+S", async || {
        w.wait("#f-name").await.send_keys("\u{E009}s\u{E000}").await
    })
    .await;
    w.wait_xpath("//p[@id='status' and . = 'Saved.']").await;
    assert_eq!(w.c.execute(unload, vec![]).await.unwrap(), json!(false));
    w.wait_xpath("//span[@id='draft-state' and . = 'draft differs from v1']")
        .await;
    w.click("#draft-diff summary").await;
    let added = w.texts("#draft-diff-lines .add").await;
    assert!(added.iter().any(|l| l.contains("programmer")), "{added:?}");
    let removed = w.texts("#draft-diff-lines .del").await;
    assert!(!removed.is_empty(), "{removed:?}");

    // A key: a copy button and snippets on /v1 with the agency's name as the model.
    w.type_into("#f-key-name", "dev").await;
    w.click("#create-key").await;
    let key = w
        .text(Locator::XPath(
            "//code[@id='new-key-value' and starts-with(., 'agk_')]",
        ))
        .await;
    let python = w.text(Locator::Css("#snippet-python")).await;
    assert!(
        python.contains(&format!("base_url=\"{base}/v1\""))
            && python.contains("model=\"studio\"")
            && python.contains(&key),
        "{python}"
    );
    let curl = w.text(Locator::Css("#snippet-curl")).await;
    assert!(
        curl.contains(&format!("curl {base}/v1/chat/completions"))
            && curl.contains("\"model\":\"studio\""),
        "{curl}"
    );
    // And over MQTT, on the agency's team.
    let team = w.text(Locator::Css("#mqtt-team")).await;
    assert!(!team.is_empty());
    let mqtt = w.text(Locator::Css("#snippet-mqtt")).await;
    assert!(
        mqtt.contains(&format!("-t 'XMAGS/{team}/CMD/chat_new/"))
            && mqtt.contains(&format!("user-property authorization 'Bearer {key}'")),
        "{mqtt}"
    );
    w.click("#copy-key").await;
    w.wait_xpath("//button[@id='copy-key' and (. = 'Copied' or . = 'Selected: press Ctrl+C')]")
        .await;
    // What the snippets say works: /v1, the key, the agency's name as the model.
    let res = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(&key)
        .json(&json!({ "model": "studio", "messages": [{ "role": "user", "content": "Hello" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::OK);
    w.audit("ux-editor-key").await;

    // The published version has a page of its own, rendered.
    w.click("#versions a").await;
    w.wait("#version-agents tbody tr").await;
    assert_eq!(w.texts("#version-agents tbody tr").await.len(), 3);
    let file = w.text(Locator::Css("#version-file")).await;
    assert!(file.contains("name: studio"), "{file}");
    w.wait("#graph g.edge[data-from='reviewer'][data-to='manager']:not(.fan-out)")
        .await;
    w.audit("ux-version").await;

    // Saved, the editor lets a link go without asking.
    w.c.back().await.unwrap();
    w.wait("#f-agents-2-name").await;
    w.click("nav a[href='/agencies']").await;
    w.wait("#gallery").await;
    assert_eq!(w.c.get_alert_text().await.ok(), None);

    // The playground draws the team it talks to: the draft's fan-out, not in version 1.
    w.click("#open-studio").await;
    w.wait("#graph[data-on='draft'] g.edge.fan-out[data-from='reviewer'][data-to='programmer']")
        .await;
    w.click("#on-published").await;
    w.wait("#graph[data-on='published'] g.edge").await;
    assert!(!w.edges().await.contains(&"reviewer>programmer".to_string()));

    w.c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dark_mode_follows_the_system_and_keeps_its_contrast() {
    let Some((_driver, c)) = browser_with(&["--force-dark-mode"]).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = app(dir.path()).await;
    let mut w = Walk::signed_up(c, base, 400, "night@example.com").await;
    let dark =
        w.c.execute(
            "return [matchMedia('(prefers-color-scheme: dark)').matches, getComputedStyle(document.documentElement).backgroundColor, getComputedStyle(document.body).color];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(dark, json!([true, "rgb(20, 23, 28)", "rgb(230, 233, 239)"]));
    w.wait("#use-research").await;
    w.audit("ux-dark-home").await;
    w.click("#use-research").await;
    w.wait("#graph g.edge").await;
    let answer = w.chat_turn("tidal energy", 0).await;
    assert!(
        answer.starts_with("Brief, checked by our critic."),
        "{answer}"
    );
    w.click("article.turn.done details.turn-details summary")
        .await;
    w.audit("ux-dark-playground").await;
    w.click("#open-conversation").await;
    w.wait_xpath("//table[@id='c-turns']/tbody/tr").await;
    w.audit("ux-dark-conversation").await;
    w.c.back().await.unwrap();
    w.click(".links a[href^='/agencies/']").await;
    w.wait("#graph g.edge").await;
    w.audit("ux-dark-editor").await;
    w.click("#versions a").await;
    w.wait("#version-agents tbody tr").await;
    w.audit("ux-dark-version").await;
    w.goto("/settings").await;
    w.wait("#password-form").await;
    w.audit("ux-dark-settings").await;
    w.goto("/rooms").await;
    w.wait("#room-form").await;
    w.audit("ux-dark-rooms").await;
    w.type_into("#f-name", "night desk").await;
    w.select_label("#f-agency", "research").await;
    w.click("#create-room").await;
    w.wait("#pills button.pill[data-agent='critic']").await;
    w.audit("ux-dark-room").await;
    w.click("form[action='/logout'] button").await;
    w.wait("#email").await;
    w.audit("ux-dark-login").await;
    w.c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_field_suggests_providers_and_warns_without_a_key() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The server's providers: OpenAI's own API without a key, and a server with one.
    let mut providers = Providers::builtin();
    for (name, key) in [("openai", None), ("team-llm", Some("sk-test"))] {
        let spec = ProviderSpec {
            name: name.into(),
            kind: ProviderKind::OpenAi,
            base_url: key.map(|_| "https://llm.example.com/v1".to_string()),
            api_key_env: key.map(|_| "TEAM_LLM_KEY".to_string()),
            max_concurrency: None,
            requests_per_minute: None,
            prices: Vec::new(),
        };
        let built = agency_providers::from_spec(
            &spec,
            key.map(|k| secrecy::SecretString::from(k.to_string())),
            &Default::default(),
            agency_providers::http::Origin::Operator,
        )
        .unwrap();
        providers.insert(name, built);
        providers.describe(
            name,
            agency_providers::ProviderInfo {
                kind: Some(ProviderKind::OpenAi),
                key: agency_providers::KeyState::of(&spec, key.is_some()),
                models: if key.is_some() {
                    vec!["qwen".into()]
                } else {
                    Vec::new()
                },
            },
        );
    }
    let base = app_with(dir.path(), providers).await;
    let mut w = Walk::signed_up(c, base, 500, "models@example.com").await;
    w.type_into("#new-name", "keyless").await;
    w.click("#create-agency").await;
    w.wait("#f-agents-0-model").await;

    // The model field offers provider/model from the server's providers, each with its key.
    w.wait("datalist#models option[value='openai/gpt-4o-mini']")
        .await;
    let labels: Vec<String> = w
        .c
        .execute(
            "return [...document.querySelectorAll('datalist#models option')].map((o) => o.value + ' = ' + o.textContent);",
            vec![],
        )
        .await
        .map(|v| serde_json::from_value(v).unwrap())
        .unwrap();
    for expected in [
        "builtin/rules = builtin/rules · no key needed",
        "openai/gpt-4o-mini = openai/gpt-4o-mini · no key",
        "team-llm/qwen = team-llm/qwen · server key",
    ] {
        assert!(
            labels.contains(&expected.to_string()),
            "{expected} in {labels:?}"
        );
    }
    // The manager on the rules model: no warning.
    w.wait("#w-agents-0-model[hidden]").await;

    // An agent added on a provider without a key is warned at its field; on one with a key, not.
    w.click("#add-agent").await;
    w.type_into("#f-agents-1-model", "openai/gpt-4o-mini").await;
    let warning = w
        .text(Locator::Css("#w-agents-1-model:not([hidden])"))
        .await;
    assert!(
        warning.contains("openai has no key") && warning.contains("first message"),
        "{warning}"
    );
    w.audit("ux-editor-keyless").await;
    w.type_into("#f-agents-1-model", "team-llm/qwen").await;
    w.wait("#w-agents-1-model[hidden]").await;

    // An agency that declares the provider itself, with the account's key stored, is not warned.
    w.click("#save").await;
    w.wait_xpath("//p[@id='status' and . = 'Saved.']").await;
    w.goto("/settings").await;
    w.type_into("#f-pk-provider", "openai").await;
    w.type_into("#f-pk-key", "sk-test-abcdwxyz").await;
    w.click("#pk-form button[type='submit']").await;
    w.wait_xpath("//ul[@id='provider-keys']/li[contains(., 'openai')]")
        .await;
    w.goto("/").await;
    w.type_into(
        "#import-text",
        "name: own\nmanager: lead\nproviders:\n  openai: { kind: openai }\nagents:\n  - { name: lead, model: openai/gpt-4o-mini }\n",
    )
    .await;
    w.click("#import-form button[type='submit']").await;
    w.wait("#f-agents-0-model").await;
    w.wait("datalist#models option[value='openai/gpt-4o-mini']")
        .await;
    w.wait("#w-agents-0-model[hidden]").await;
    w.click("#add-agent").await;
    w.type_into("#f-agents-1-model", "openai/gpt-4o").await;
    w.wait("#w-agents-1-model[hidden]").await;
    w.click("#save").await;
    w.wait_xpath("//p[@id='status' and . = 'Saved.']").await;

    // A room's agent gets the same offer and warning at its model field.
    w.click("#save").await;
    w.wait_xpath("//p[@id='status' and . = 'Saved.']").await;
    w.goto("/rooms").await;
    w.type_into("#f-name", "lounge").await;
    w.click("#create-room").await;
    w.wait("#room[data-ready='true']").await;
    w.click("#add-agent-box summary").await;
    w.wait("datalist#models option[value='team-llm/qwen']")
        .await;
    w.type_into("#f-model", "openai/gpt-4o").await;
    let warning = w.text(Locator::Css("#w-model:not([hidden])")).await;
    assert!(warning.contains("openai has no key"), "{warning}");
    w.audit("ux-room-keyless").await;
    w.type_into("#f-model", "builtin/rules").await;
    w.wait("#w-model[hidden]").await;
    w.c.close().await.unwrap();
}
