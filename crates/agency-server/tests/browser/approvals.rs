//! A person's approval in the web UI (issue 36): the editor shows an agent's policy beside its
//! tools and keeps a change made there; the playground asks beside the chat, with the
//! call's arguments, which the person changes before approving; the list of everything pending
//! (another tab) denies the next call with a reason, and the playground shows it answered; the
//! conversation browser shows both answers under their turns.

use fantoccini::Locator;
use serde_json::json;

use super::{Walk, browser};

/// A clerk that echoes the user's message through `builtin/echo`, whose every call waits for a
/// person, who may change its arguments.
const CLERK: &str = r#"name: clerk
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [builtin/echo]
    approve: [builtin/echo]
    approve_edits: true
    rules:
      - { when: user, call: builtin/echo, with: { text: "{{message}}" }, do: "Echoed: {{result}}", send_to: user }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_and_denies_tool_calls_in_the_ui() {
    let Some((_driver, c)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The webhook below is on loopback.
    let mut providers = agency_providers::Providers::builtin();
    providers.allow_private_addresses().unwrap();
    let base = super::app_with(dir.path(), providers).await;
    let mut w = Walk::signed_up(c, base, 400, "approver@example.com").await;
    let id =
        w.c.execute(
            "const csrf = document.querySelector('meta[name=csrf-token]').content;
             return fetch('/api/agencies/import', { method: 'POST', headers: { 'content-type': 'application/yaml', 'x-csrf-token': csrf }, body: arguments[0] })
               .then((r) => r.json()).then((j) => j.id);",
            vec![json!(CLERK)],
        )
        .await
        .unwrap();
    let id = id.as_str().expect("the import answers the agency's id");

    // The editor shows the policy beside the agent's tools, and keeps what is changed there.
    w.goto(&format!("/agencies/{id}")).await;
    let approve = w.wait("#f-agents-0-approve").await;
    assert_eq!(
        approve.prop("value").await.unwrap().as_deref(),
        Some("builtin/echo")
    );
    let edits = w.wait("#f-agents-0-approve_edits").await;
    assert_eq!(
        edits.prop("checked").await.unwrap().as_deref(),
        Some("true")
    );
    w.audit("approval-policy-editor").await;
    w.type_into("#f-agents-0-approve_timeout_secs", "600").await;
    w.click("#save").await;
    w.wait_xpath("//*[@id='status' and text()='Saved.']").await;
    let saved =
        w.c.execute(
            "return fetch('/api/agencies/' + arguments[0]).then((r) => r.json()).then((a) => a.draft.agents[0]);",
            vec![json!(id)],
        )
        .await
        .unwrap();
    assert_eq!(saved["approve"], json!(["builtin/echo"]), "{saved}");
    assert_eq!(saved["approve_timeout_secs"], json!(600), "{saved}");
    assert_eq!(saved["approve_edits"], json!(true), "{saved}");

    // The approval webhook, beside the keys: a URL refused at its field; one taken, its
    // signing secret shown once; then removed.
    w.type_into("#f-webhook-url", "ftp://example.com/hook")
        .await;
    w.click("#set-webhook").await;
    w.wait("#e-webhook-url:not([hidden])").await;
    w.wait("#f-webhook-url[aria-invalid='true']").await;
    w.type_into("#f-webhook-url", "http://127.0.0.1:9/hook")
        .await;
    w.click("#set-webhook").await;
    w.wait_xpath(
        "//p[@id='webhook-now' and starts-with(., 'Announced at http://127.0.0.1:9/hook')]",
    )
    .await;
    let secret = w.text(Locator::Css("#webhook-secret")).await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    w.audit("approval-webhook").await;
    w.click("#remove-webhook").await;
    w.wait_xpath("//p[@id='webhook-now' and starts-with(., 'None')]")
        .await;

    w.goto(&format!("/agencies/{id}/playground")).await;
    w.wait("#graph g.node.manager[data-node='clerk']").await;

    // The call waits: the playground shows who calls what, with its arguments to change.
    w.type_into("#message", "pay 5 dollars").await;
    w.click("#send").await;
    let card = "#pending-approvals article.approval.state-pending";
    let head = w
        .text(Locator::Css(&format!("{card} .approval-head")))
        .await;
    assert!(head.contains("clerk asks to call builtin/echo"), "{head}");
    let args = w.wait(&format!("{card} textarea.approval-args")).await;
    let shown: serde_json::Value =
        serde_json::from_str(&args.prop("value").await.unwrap().unwrap()).unwrap();
    assert_eq!(shown, json!({ "text": "pay 5 dollars" }));
    w.audit("approval-playground").await;
    // Not JSON: refused before anything is sent, and the call still waits.
    w.type_into(&format!("{card} textarea.approval-args"), "pay 4")
        .await;
    w.click(&format!("{card} button.approve")).await;
    let refused = w.text(Locator::Css(&format!("{card} .error"))).await;
    assert!(refused.contains("JSON object"), "{refused}");
    w.type_into(
        &format!("{card} textarea.approval-args"),
        r#"{"text": "pay 4 dollars"}"#,
    )
    .await;
    w.click(&format!("{card} button.approve")).await;
    let answer = w
        .text(Locator::XPath(
            "//div[@id='turns']/article[1][contains(@class, 'done')]//p[@class='answer-text']",
        ))
        .await;
    assert!(answer.contains("pay 4 dollars"), "{answer}");
    assert!(!answer.contains("pay 5 dollars"), "{answer}");
    let outcome = w
        .text(Locator::Css(
            "#pending-approvals article.approval.state-approved .approval-outcome",
        ))
        .await;
    assert!(
        outcome.starts_with("Approved by approver@example.com"),
        "{outcome}"
    );

    // The next call waits too; the list of everything pending, in another tab, denies it.
    w.type_into("#message", "pay 6 dollars").await;
    w.click("#send").await;
    w.wait(card).await;
    let playground = w.c.window().await.unwrap();
    let list = w.c.new_window(true).await.unwrap();
    w.c.switch_to_window(list.handle).await.unwrap();
    w.goto("/approvals").await;
    let listed = "#approvals article.approval.state-pending";
    let links = w.texts(&format!("{listed} .hint a")).await;
    assert_eq!(links, ["clerk", "its conversation"]);
    let shown = w
        .wait(&format!("{listed} textarea.approval-args"))
        .await
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(shown.contains("pay 6 dollars"), "{shown}");
    w.audit("approvals-list").await;
    w.type_into(&format!("{listed} input.approval-reason"), "too much")
        .await;
    w.click(&format!("{listed} button.deny")).await;
    let outcome = w
        .text(Locator::Css(
            "#approvals article.approval.state-denied .approval-outcome",
        ))
        .await;
    assert!(outcome.contains("Why: too much"), "{outcome}");
    w.c.close_window().await.unwrap();

    // The playground hears of the answer, and the agent read why.
    w.c.switch_to_window(playground).await.unwrap();
    let answer = w
        .text(Locator::XPath(
            "//div[@id='turns']/article[2][contains(@class, 'done')]//p[@class='answer-text']",
        ))
        .await;
    assert!(
        answer.contains("Not run") && answer.contains("too much"),
        "{answer}"
    );
    let denied = w
        .text(Locator::Css(
            "#pending-approvals article.approval.state-denied .approval-outcome",
        ))
        .await;
    assert!(denied.contains("Why: too much"), "{denied}");

    // The conversation browser: each answer under its turn.
    w.click("#open-conversation").await;
    let first = w
        .text(Locator::Css(
            "[data-turn-approvals='1'] article.approval.state-approved .approval-outcome",
        ))
        .await;
    assert!(
        first.starts_with("Approved by approver@example.com"),
        "{first}"
    );
    let second = w
        .text(Locator::Css(
            "[data-turn-approvals='2'] article.approval.state-denied .approval-outcome",
        ))
        .await;
    assert!(second.contains("Why: too much"), "{second}");
    // Each turn's waterfall draws how long its call waited for the person, on clerk's lane.
    for turn in ["1", "2"] {
        w.wait(&format!(
            "section.turn-waterfall[data-turn='{turn}'] rect.wf-wait[data-lane='clerk']"
        ))
        .await;
    }
    assert!(
        w.c.find(Locator::Css("#approvals-section"))
            .await
            .unwrap()
            .attr("hidden")
            .await
            .unwrap()
            .is_some(),
        "nothing waits, so the page asks nothing"
    );
    w.audit("conversation-approvals").await;
}
