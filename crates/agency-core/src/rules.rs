//! The built-in rules model's decisions: deterministic, free, and enough to route any agency.
//!
//! For each message an agent has not answered yet, from sender X, it follows the agent's first
//! rule whose `when` matches X (or `any`), sending the rule's `do` text to its `send_to`, with
//! `{{message}}`, `{{from}}` and `{{count}}` (messages in its context so far) filled in. With no
//! matching rule it answers the sender with the message itself. Told by the server to answer
//! now, it sends the user the last message it received from an agent.

use crate::agency::{Agent, Party, Recipient, Roster};
use crate::message::{Message, MessageKind};
use crate::protocol::Envelope;

/// The envelopes the rules model answers `context` with (the agent's whole context, in order).
pub fn respond(agent: &Agent, context: &[Message], roster: &Roster) -> Vec<Envelope> {
    let start = context
        .iter()
        .rposition(|m| m.kind == MessageKind::Reply)
        .map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for m in &context[start..] {
        match m.kind {
            MessageKind::Input | MessageKind::Delivery | MessageKind::Failure => {
                out.extend(follow(agent, m, context.len(), roster));
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
    out
}

/// The rules model's answer to a plain chat, where no rule applies: the user's messages since
/// the last answer, as it echoes a message no rule matches.
pub fn echo(chat: &[(crate::Role, String)]) -> String {
    let start = chat
        .iter()
        .rposition(|(role, _)| *role == crate::Role::Assistant)
        .map_or(0, |i| i + 1);
    chat[start..]
        .iter()
        .filter(|(role, _)| *role == crate::Role::User)
        .map(|(_, text)| text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn follow(agent: &Agent, m: &Message, count: usize, roster: &Roster) -> Vec<Envelope> {
    let from = match m.from {
        None => Recipient::User,
        Some(id) => Recipient::Agent(id),
    };
    let rule = agent.rules().find(|r| match r.when {
        Party::Any => true,
        Party::User => m.from.is_none(),
        Party::Agent(id) => m.from == Some(id),
    });
    match rule {
        Some(rule) => {
            let text = fill(&rule.action, &m.text, roster.display(m.from), count);
            rule.send_to
                .iter()
                .map(|to| Envelope {
                    to: *to,
                    text: text.clone(),
                })
                .collect()
        }
        None => vec![Envelope {
            to: from,
            text: m.text.clone(),
        }],
    }
}

/// Fills the template in one pass, so text that was filled in is never read as a placeholder.
fn fill(template: &str, message: &str, from: &str, count: usize) -> String {
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
        let chat = |v: &[(crate::Role, &str)]| -> Vec<(crate::Role, String)> {
            v.iter().map(|(r, t)| (*r, t.to_string())).collect()
        };
        assert_eq!(echo(&chat(&[(System, "be brief"), (User, "hi")])), "hi");
        assert_eq!(
            echo(&chat(&[
                (User, "old"),
                (Assistant, "ok"),
                (User, "a"),
                (User, "b")
            ])),
            "a\n\nb"
        );
        assert_eq!(echo(&chat(&[(User, "x"), (Assistant, "done")])), "");
    }

    #[test]
    fn placeholders_fill_once() {
        assert_eq!(
            fill(
                "A {{message}} from {{from}} #{{count}}",
                "{{from}}",
                "bob",
                3
            ),
            "A {{from}} from bob #3"
        );
        assert_eq!(fill("{{x}} {{", "m", "f", 1), "{{x}} {{");
    }
}
