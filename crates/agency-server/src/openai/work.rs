//! "Show work" (issue 37): the team's hops as short lines of reasoning, for clients that show
//! a model's reasoning while it works. Asked for by [`SHOW_WORK_HEADER`] on either API, or by
//! a Responses request's `reasoning.summary`; otherwise nothing here runs.
//!
//! A line is made of a hop the turn's trace holds (`TraceEntry`), so the lines streamed from
//! the turn's `Hop` events and those made of a finished turn's trace are the same: a delivery
//! between agents ("manager asked programmer: …", "programmer answered manager: …"), a tool
//! call and its result (a failure without its text), and the server's notices without their
//! text. The user's message and the answer are not repeated; texts are cut to [`MAX_TEXT`]
//! characters.

use std::sync::Arc;

use agency_core::{AgentId, MessageKind, Roster, TraceEntry};
use agency_runtime::{Event, TurnOutcome};
use axum::http::HeaderMap;

use super::OpenAiError;

/// The header that asks for the team's work as reasoning: `1` (or `true`) on, `0` (or
/// `false`) off.
pub const SHOW_WORK_HEADER: &str = "x-agency-show-work";

/// The most characters of a message, a tool's arguments or its result a line quotes.
const MAX_TEXT: usize = 200;

/// Whether a request's headers ask for the team's work.
pub(super) fn asked(headers: &HeaderMap) -> Result<bool, OpenAiError> {
    let Some(value) = headers.get(SHOW_WORK_HEADER) else {
        return Ok(false);
    };
    let value = value.to_str().unwrap_or_default().trim();
    if value == "1" || value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value == "0" || value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(OpenAiError::invalid(
            format!("`{SHOW_WORK_HEADER}` must be 1 (show the team's work) or 0."),
            None,
        ))
    }
}

/// The lines of a turn's work, as its hops come.
pub(crate) struct Work {
    roster: Arc<Roster>,
    /// Who asked whom and has not been answered yet: (asker, asked).
    open: Vec<(AgentId, AgentId)>,
}

impl Work {
    pub(crate) fn new(roster: Arc<Roster>) -> Self {
        Self {
            roster,
            open: Vec::new(),
        }
    }

    /// The lines of a finished turn's work, from its trace.
    pub(crate) fn of(out: &TurnOutcome) -> Vec<String> {
        let mut work = Work::new(out.roster.clone());
        out.trace.iter().filter_map(|e| work.line(e)).collect()
    }

    /// The line an event of the turn makes, if any: only hops make one.
    pub(crate) fn event(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::Hop { entry, .. } => self.line(entry),
            _ => None,
        }
    }

    /// The line a hop makes, if any.
    pub(crate) fn line(&mut self, entry: &TraceEntry) -> Option<String> {
        if matches!(
            entry.kind,
            // The user's message and the answer are the client's already.
            MessageKind::Input | MessageKind::Answer | MessageKind::System
        ) {
            return None;
        }
        let (from, to) = (
            entry.from_name(&self.roster).to_string(),
            entry.to_name(&self.roster).to_string(),
        );
        let text = || quote(&entry.text);
        Some(match entry.kind {
            MessageKind::Delivery => {
                let verb = match (entry.from, entry.to) {
                    (Some(a), Some(b)) => self.verb(a, b),
                    _ => "told",
                };
                format!("{from} {verb} {to}: {}", text())
            }
            MessageKind::Reply => format!("{from} called {to} with {}", text()),
            // Why a call failed may name what only the server should know (an address).
            MessageKind::ToolResult if entry.tool.as_ref().is_some_and(|t| t.is_error) => {
                format!("{from} failed for {to}")
            }
            MessageKind::ToolResult => format!("{from} answered {to}: {}", text()),
            // The server's own notices: what they say is for the agent, not the client.
            MessageKind::Correction => {
                format!("{to}'s reply could not be used; it was asked again")
            }
            MessageKind::Guard => format!("{to} was told to answer now"),
            MessageKind::Failure => format!("{from} could not answer; {to} was told"),
            MessageKind::Input | MessageKind::Answer | MessageKind::System => return None,
        })
    }

    /// `answered` when `to` asked `from` and waits, else `asked` (and `from` now waits).
    fn verb(&mut self, from: AgentId, to: AgentId) -> &'static str {
        match self.open.iter().position(|&pair| pair == (to, from)) {
            Some(i) => {
                self.open.swap_remove(i);
                "answered"
            }
            None => {
                self.open.push((from, to));
                "asked"
            }
        }
    }
}

/// `text` on one line, cut to [`MAX_TEXT`] characters (with `…` when cut).
fn quote(text: &str) -> String {
    let (mut line, mut count) = (String::new(), 0);
    for word in text.split_whitespace() {
        if count > 0 {
            line.push(' ');
            count += 1;
        }
        line.push_str(word);
        count += word.chars().count();
        if count > MAX_TEXT {
            break;
        }
    }
    if let Some((at, _)) = line.char_indices().nth(MAX_TEXT) {
        line.truncate(at);
        line.push('…');
    }
    line
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_quote_is_one_line_and_at_most_200_characters() {
        assert_eq!(quote("  a\n\tb  c "), "a b c");
        let long = "é".repeat(150) + " " + &"x".repeat(100);
        let q = quote(&long);
        assert_eq!(q.chars().count(), MAX_TEXT + 1);
        assert!(q.ends_with("x…"), "{q}");
        assert_eq!(quote(&"y".repeat(200)), "y".repeat(200));
    }

    #[test]
    fn each_kind_of_hop_makes_its_line() {
        let (m, h) = (AgentId::new(1).unwrap(), AgentId::new(2).unwrap());
        let roster = Roster::new([(m, "manager".into()), (h, "helper".into())]);
        let mut work = Work::new(Arc::new(roster));
        let entry = |kind, from, to, text: &str, tool: Option<bool>| TraceEntry {
            from,
            to,
            kind,
            text: text.into(),
            usage: None,
            latency_ms: None,
            tool: tool.map(|is_error| agency_core::ToolResult {
                call_id: "c".into(),
                name: "fs/read".into(),
                is_error,
            }),
            at: chrono::Utc::now(),
        };
        let lines: Vec<Option<String>> = [
            entry(MessageKind::Input, None, Some(m), "hi", None),
            entry(MessageKind::Delivery, Some(m), Some(h), "what?", None),
            entry(
                MessageKind::Reply,
                Some(h),
                None,
                r#"{"p":"a"}"#,
                Some(false),
            ),
            entry(
                MessageKind::ToolResult,
                None,
                Some(h),
                "dial 10.0.0.1",
                Some(true),
            ),
            entry(MessageKind::ToolResult, None, Some(h), "text", Some(false)),
            entry(MessageKind::Delivery, Some(h), Some(m), "this", None),
            entry(
                MessageKind::Correction,
                None,
                Some(m),
                "no such agent",
                None,
            ),
            entry(
                MessageKind::Failure,
                Some(h),
                Some(m),
                "HTTP 500 at ...",
                None,
            ),
            entry(MessageKind::Guard, None, Some(m), "answer now", None),
            entry(MessageKind::Answer, Some(m), None, "done", None),
        ]
        .iter()
        .map(|e| work.line(e))
        .collect();
        let want = [
            None,
            Some("manager asked helper: what?"),
            Some(r#"helper called fs/read with {"p":"a"}"#),
            Some("fs/read failed for helper"),
            Some("fs/read answered helper: text"),
            Some("helper answered manager: this"),
            Some("manager's reply could not be used; it was asked again"),
            Some("helper could not answer; manager was told"),
            Some("manager was told to answer now"),
            None,
        ];
        assert_eq!(lines, want.map(|l| l.map(String::from)));
    }

    #[test]
    fn the_header_is_1_or_0() {
        let mut h = HeaderMap::new();
        assert!(!asked(&h).unwrap());
        for (v, on) in [("1", true), ("true", true), ("0", false), ("False", false)] {
            h.insert(SHOW_WORK_HEADER, v.parse().unwrap());
            assert_eq!(asked(&h).unwrap(), on, "{v}");
        }
        h.insert(SHOW_WORK_HEADER, "yes".parse().unwrap());
        assert!(asked(&h).is_err());
    }
}
