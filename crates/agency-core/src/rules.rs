//! The built-in rules model's decisions: deterministic, free, and enough to route any agency.
//!
//! For each message an agent has not answered yet, from sender X, it follows the agent's first
//! rule whose `when` matches X (or `any`), sending the rule's `do` text to its `send_to`, with
//! `{{message}}`, `{{from}}` and `{{count}}` (messages in its context so far) filled in. With no
//! matching rule it answers the sender with the message itself. Told by the server to answer
//! now, it sends the user the last message it received from an agent.
//!
//! A rule with a `call` first calls its tool, with the rule's `with` (placeholders filled in)
//! as arguments; once the result is in, `do` is sent with `{{result}}` filled in. While any
//! call is to be made, the reply holds only the calls; the other messages are answered with
//! the results.

use crate::agency::{Agent, Party, Recipient, Roster, Rule};
use crate::message::{Message, MessageKind};
use crate::protocol::Envelope;
use crate::tool::{ToolCall, ToolPart};

/// What the rules model answers: envelopes to route, or tool calls to make first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Send(Vec<Envelope>),
    Call(Vec<ToolCall>),
}

/// What the rules model answers `context` with (the agent's whole context, in order).
pub fn respond(agent: &Agent, context: &[Message], roster: &Roster) -> Response {
    // What it has not answered: everything since its last reply that made no calls.
    let start = context
        .iter()
        .rposition(|m| {
            m.kind == MessageKind::Reply && m.tool.as_ref().is_none_or(|t| t.calls().is_empty())
        })
        .map_or(0, |i| i + 1);
    let unanswered = &context[start..];
    // A call is never made twice: one made earlier whose result never came (the turn ended,
    // the server stopped) is answered as failed.
    let result = |id: &str| {
        unanswered
            .iter()
            .find_map(|m| match &m.tool {
                Some(ToolPart::Result(r)) if r.call_id == id => Some(m.text.as_str()),
                _ => None,
            })
            .or_else(|| {
                let made = unanswered.iter().any(|m| {
                    m.tool
                        .as_ref()
                        .is_some_and(|t| t.calls().iter().any(|c| c.id == id))
                });
                made.then_some(crate::tool::NO_RESULT)
            })
    };
    let mut out = Vec::new();
    let mut calls = Vec::new();
    for m in unanswered {
        match m.kind {
            MessageKind::Input | MessageKind::Delivery | MessageKind::Failure => {
                let count = context.len();
                match rule_for(agent, m) {
                    Some((i, rule)) if rule.call.is_some() => {
                        let id = format!("rule-{}-{i}", m.seq);
                        match result(&id) {
                            Some(r) => out.extend(send(rule, m, roster, count, Some(r))),
                            None => calls.extend(call_of(rule, id, m, roster, count)),
                        }
                    }
                    Some((_, rule)) => out.extend(send(rule, m, roster, count, None)),
                    None => out.push(Envelope {
                        to: sender(m),
                        text: m.text.clone(),
                    }),
                }
            }
            MessageKind::Guard => {
                let best = context
                    .iter()
                    .rev()
                    .find(|m| m.kind == MessageKind::Delivery)
                    .map_or("I have no answer yet.", |m| m.text.as_str());
                out.push(Envelope {
                    to: Recipient::User,
                    text: best.to_string(),
                });
            }
            // A correction asks again; the rules model's replies are always well formed.
            MessageKind::Correction
            | MessageKind::System
            | MessageKind::Reply
            | MessageKind::ToolResult
            | MessageKind::Answer => {}
        }
    }
    if calls.is_empty() {
        Response::Send(out)
    } else {
        Response::Call(calls)
    }
}

/// The rules model's answer to a plain chat, where no rule applies: the user's messages since
/// the last answer, as it echoes a message no rule matches. `chat` is the chat's messages in
/// order, as (who speaks, what it says).
pub fn echo<'a>(chat: impl IntoIterator<Item = (crate::Role, &'a str)>) -> String {
    let mut since: Vec<&str> = Vec::new();
    for (role, text) in chat {
        match role {
            crate::Role::Assistant => since.clear(),
            crate::Role::User => since.push(text),
            _ => {}
        }
    }
    since.join("\n\n")
}

fn sender(m: &Message) -> Recipient {
    match m.from {
        None => Recipient::User,
        Some(id) => Recipient::Agent(id),
    }
}

/// The agent's first rule for `m`, with its index among the agent's rules.
fn rule_for<'a>(agent: &'a Agent, m: &Message) -> Option<(usize, &'a Rule)> {
    agent.rules().enumerate().find(|(_, r)| match r.when {
        Party::Any => true,
        Party::User => m.from.is_none(),
        Party::Agent(id) => m.from == Some(id),
    })
}

fn send(
    rule: &Rule,
    m: &Message,
    roster: &Roster,
    count: usize,
    result: Option<&str>,
) -> Vec<Envelope> {
    let text = fill(&rule.action, &m.text, roster.display(m.from), count, result);
    rule.send_to
        .iter()
        .map(|to| Envelope {
            to: *to,
            text: text.clone(),
        })
        .collect()
}

fn call_of(
    rule: &Rule,
    id: String,
    m: &Message,
    roster: &Roster,
    count: usize,
) -> Option<ToolCall> {
    let call = rule.call.as_ref()?;
    let from = roster.display(m.from);
    let arguments = fill_json(&call.with, &|s| fill(s, &m.text, from, count, None));
    Some(ToolCall {
        id,
        name: call.tool.clone(),
        arguments: arguments.to_string(),
    })
}

/// `value` with every string filled in by `f`.
fn fill_json(value: &serde_json::Value, f: &dyn Fn(&str) -> String) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(f(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill_json(v, f)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill_json(v, f)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Fills the template in one pass, so text that was filled in is never read as a placeholder.
/// `{{result}}` is a tool's result (left as it is where there is none).
fn fill(template: &str, message: &str, from: &str, count: usize, result: Option<&str>) -> String {
    let mut out = String::with_capacity(template.len() + message.len());
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let (value, len) = if after.starts_with("{{message}}") {
            (message.to_string(), "{{message}}".len())
        } else if after.starts_with("{{from}}") {
            (from.to_string(), "{{from}}".len())
        } else if after.starts_with("{{count}}") {
            (count.to_string(), "{{count}}".len())
        } else if let Some(r) = result.filter(|_| after.starts_with("{{result}}")) {
            (r.to_string(), "{{result}}".len())
        } else {
            ("{{".to_string(), 2)
        };
        out.push_str(&value);
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{echo, fill};

    #[test]
    fn a_plain_chat_gets_the_users_messages_since_the_last_answer_back() {
        use crate::Role::{Assistant, System, User};
        let chat = |v: &[(crate::Role, &'static str)]| echo(v.iter().copied());
        assert_eq!(chat(&[(System, "be brief"), (User, "hi")]), "hi");
        assert_eq!(
            chat(&[(User, "old"), (Assistant, "ok"), (User, "a"), (User, "b")]),
            "a\n\nb"
        );
        assert_eq!(chat(&[(User, "x"), (Assistant, "done")]), "");
    }

    #[test]
    fn placeholders_fill_once() {
        assert_eq!(
            fill(
                "A {{message}} from {{from}} #{{count}}",
                "{{from}}",
                "bob",
                3,
                None
            ),
            "A {{from}} from bob #3"
        );
        assert_eq!(fill("{{x}} {{", "m", "f", 1, None), "{{x}} {{");
        assert_eq!(
            fill("got {{result}}", "{{result}}", "f", 1, Some("{{message}}")),
            "got {{message}}"
        );
    }

    #[test]
    fn a_rule_with_a_call_calls_its_tool_then_sends_the_result() {
        use super::{Response, respond};
        use crate::agency::{AgencyDraft, AgentDraft, RuleDraft};
        use crate::message::{Message, MessageKind};
        use crate::tool::{ToolPart, ToolResult};
        let agency = AgencyDraft {
            name: "t".into(),
            protocol: "json".into(),
            manager: "clerk".into(),
            agents: vec![AgentDraft {
                name: "clerk".into(),
                model: "builtin/rules".into(),
                tools: vec!["files/read".into()],
                rules: vec![RuleDraft {
                    when: "user".into(),
                    action: "Here: {{result}} (for {{message}})".into(),
                    send_to: vec!["user".into()],
                    call: Some("files/read".into()),
                    with: Some(serde_json::json!({"path": "{{message}}", "n": [1, "{{count}}"]})),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
        .validate(crate::AgencyId::new(), "local", &|_| true)
        .unwrap();
        let clerk = &agency.agents[0];
        let msg = |seq, kind, text: &str, tool| Message {
            images: Vec::new(),
            id: crate::MessageId::new(),
            conversation_id: crate::ConversationId::new(),
            turn_id: None,
            seq,
            agent: Some(clerk.id),
            kind,
            linked: None,
            from: None,
            to: None,
            text: text.into(),
            tool,
            usage: None,
            latency_ms: None,
            included: true,
            created_at: chrono::Utc::now(),
        };
        let mut context = vec![
            msg(0, MessageKind::System, "you", None),
            msg(1, MessageKind::Input, "a.txt", None),
        ];
        let Response::Call(calls) = respond(clerk, &context, &agency.roster()) else {
            panic!("expected a call")
        };
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "files/read");
        assert_eq!(calls[0].id, "rule-1-0");
        let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(args, serde_json::json!({"path": "a.txt", "n": [1, "2"]}));
        context.push(msg(
            2,
            MessageKind::Reply,
            "",
            Some(ToolPart::Calls(calls.clone())),
        ));
        context.push(msg(
            3,
            MessageKind::ToolResult,
            "contents",
            Some(ToolPart::Result(ToolResult {
                call_id: calls[0].id.clone(),
                name: "files/read".into(),
                is_error: false,
            })),
        ));
        let Response::Send(out) = respond(clerk, &context, &agency.roster()) else {
            panic!("expected envelopes")
        };
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].text, "Here: contents (for a.txt)");
        assert_eq!(out[0].to, crate::Recipient::User);
    }
}
