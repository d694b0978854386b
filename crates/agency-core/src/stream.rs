//! The manager's answer as it streams: text is passed on only once a reply has committed to
//! addressing the user, so what a streaming client sees is the answer, not agents' chatter.
//!
//! Conservative by design: `{"to": 0, "context": "…` (the `to` first) in the JSON protocol, a
//! first line `TO user:` in the directives protocol. Any other shape streams nothing, and the
//! caller sends the answer once the turn has it.

use crate::agency::Protocol;

/// Feeds on one model call's text deltas; yields the answer's text as it becomes certain.
#[derive(Debug)]
pub struct AnswerStream {
    protocol: Protocol,
    buffer: String,
    state: State,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Not yet known whom the reply addresses.
    Head,
    /// Inside the answer: `pending` holds an escape not complete yet (JSON).
    Answer { pending: String },
    /// The answer's string closed, or the reply does not address the user.
    Done,
}

impl AnswerStream {
    pub fn new(protocol: Protocol) -> Self {
        Self {
            protocol,
            buffer: String::new(),
            state: State::Head,
        }
    }

    /// The answer text `delta` adds, if any.
    pub fn push(&mut self, delta: &str) -> String {
        match &mut self.state {
            State::Done => String::new(),
            State::Answer { .. } => self.answer_text(delta),
            State::Head => {
                self.buffer.push_str(delta);
                let (decided, rest) = match self.protocol {
                    Protocol::Json => json_head(&self.buffer),
                    Protocol::Directives => directive_head(&self.buffer),
                    Protocol::Plain => (Some(true), self.buffer.as_str()),
                };
                match decided {
                    None => String::new(),
                    Some(false) => {
                        self.state = State::Done;
                        String::new()
                    }
                    Some(true) => {
                        let rest = rest.to_string();
                        self.buffer.clear();
                        self.state = State::Answer {
                            pending: String::new(),
                        };
                        self.answer_text(&rest)
                    }
                }
            }
        }
    }

    fn answer_text(&mut self, delta: &str) -> String {
        match self.protocol {
            Protocol::Directives | Protocol::Plain => delta.to_string(),
            Protocol::Json => {
                let State::Answer { pending } = &mut self.state else {
                    return String::new();
                };
                let mut input = std::mem::take(pending);
                input.push_str(delta);
                let (text, rest, closed) = decode_json_string(&input);
                if closed {
                    self.state = State::Done;
                } else if let State::Answer { pending } = &mut self.state {
                    *pending = rest.to_string();
                }
                text
            }
        }
    }
}

/// `{"to": 0, "context": "` at the start (white space and a code fence allowed): true and the
/// text after the opening quote; false when the start says otherwise; None while unsure.
fn json_head(buffer: &str) -> (Option<bool>, &str) {
    let mut s = buffer.trim_start();
    if let Some(fenced) = s.strip_prefix("```") {
        match fenced.split_once('\n') {
            Some((_, body)) => s = body.trim_start(),
            None => return (None, ""),
        }
    }
    let expect = |s: &mut &str, token: &str| -> Option<bool> {
        *s = s.trim_start();
        if s.starts_with(token) {
            *s = &s[token.len()..];
            Some(true)
        } else if token.starts_with(*s) {
            None
        } else {
            Some(false)
        }
    };
    for token in ["{", "\"to\"", ":"] {
        match expect(&mut s, token) {
            Some(true) => {}
            other => return (other.map(|_| false), ""),
        }
    }
    s = s.trim_start();
    // The number 0, and then not another digit.
    match s.as_bytes() {
        [] => return (None, ""),
        [b'0'] => return (None, ""),
        [b'0', next, ..] if !next.is_ascii_digit() => s = &s[1..],
        _ => return (Some(false), ""),
    }
    for token in [",", "\""] {
        match expect(&mut s, token) {
            Some(true) => {}
            other => return (other.map(|_| false), ""),
        }
    }
    // The key: context or content, then the colon and the opening quote.
    let key_end = match s.find('"') {
        Some(i) => i,
        None => {
            return (
                if "context".starts_with(s) || "content".starts_with(s) {
                    None
                } else {
                    Some(false)
                },
                "",
            );
        }
    };
    if !matches!(&s[..key_end], "context" | "content") {
        return (Some(false), "");
    }
    s = &s[key_end + 1..];
    for token in [":", "\""] {
        match expect(&mut s, token) {
            Some(true) => {}
            other => return (other.map(|_| false), ""),
        }
    }
    (Some(true), s)
}

/// A first line `TO user:`: true and the text after the colon (leading spaces dropped).
fn directive_head(buffer: &str) -> (Option<bool>, &str) {
    let s = buffer.trim_start();
    let head = "to user:";
    let n = s.len().min(head.len());
    if !s.is_char_boundary(n) || !s[..n].eq_ignore_ascii_case(&head[..n]) {
        return (Some(false), "");
    }
    if n < head.len() {
        return (None, "");
    }
    let rest = &s[head.len()..];
    if rest.is_empty() {
        (None, "")
    } else {
        (Some(true), rest.trim_start_matches(' '))
    }
}

/// Decodes a JSON string's characters up to its closing quote. Returns the text, what is left
/// undecoded (an incomplete escape at the end), and whether the string closed.
fn decode_json_string(input: &str) -> (String, &str, bool) {
    let mut out = String::new();
    let mut chars = input.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, "", true),
            '\\' => {
                let rest = &input[i..];
                match rest.as_bytes().get(1) {
                    None => return (out, rest, false),
                    Some(b'u') => {
                        let Some(hex) = rest.get(2..6) else {
                            return (out, rest, false);
                        };
                        let Ok(unit) = u16::from_str_radix(hex, 16) else {
                            return (out, "", true);
                        };
                        let mut used = 6;
                        let ch = if (0xD800..0xDC00).contains(&unit) {
                            // A surrogate pair: wait for its second half.
                            let Some(low) = rest.get(8..12) else {
                                return (out, rest, false);
                            };
                            let low = u16::from_str_radix(low, 16).unwrap_or(0);
                            used = 12;
                            char::decode_utf16([unit, low])
                                .next()
                                .and_then(Result::ok)
                                .unwrap_or('\u{fffd}')
                        } else {
                            char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}')
                        };
                        out.push(ch);
                        for _ in 1..used {
                            chars.next();
                        }
                    }
                    Some(&e) => {
                        out.push(match e {
                            b'n' => '\n',
                            b't' => '\t',
                            b'r' => '\r',
                            b'b' => '\u{8}',
                            b'f' => '\u{c}',
                            other => char::from(other),
                        });
                        chars.next();
                    }
                }
            }
            c => out.push(c),
        }
    }
    (out, "", false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn streamed(protocol: Protocol, pieces: &[&str]) -> String {
        let mut s = AnswerStream::new(protocol);
        pieces.iter().map(|p| s.push(p)).collect()
    }

    #[test]
    fn json_answers_stream_once_addressed_to_the_user() {
        let p = Protocol::Json;
        assert_eq!(
            streamed(
                p,
                &[
                    "{\"to\": ",
                    "0, \"conte",
                    "xt\": \"Hel",
                    "lo\\nwor",
                    "ld\"}"
                ]
            ),
            "Hello\nworld"
        );
        assert_eq!(
            streamed(p, &["```json\n{\"to\":0,\"content\":\"ok\"}\n```"]),
            "ok"
        );
        assert_eq!(
            streamed(p, &["{\"to\": 143, \"context\": \"not for the user\"}"]),
            ""
        );
        assert_eq!(
            streamed(p, &["{\"to\": 0", "7, \"context\": \"x\"}"]),
            "",
            "to: 07 is not the user"
        );
        assert_eq!(
            streamed(p, &["{\"context\": \"x\", \"to\": 0}"]),
            "",
            "to after context: not certain"
        );
        assert_eq!(streamed(p, &["[{\"to\": 0, \"context\": \"x\"}]"]), "");
        assert_eq!(streamed(p, &["Sure! {\"to\": 0, \"context\": \"x\"}"]), "");
        // Escapes split across deltas.
        assert_eq!(
            streamed(
                p,
                &[
                    "{\"to\":0,\"context\":\"a\\",
                    "\"b\\u00",
                    "e9c\\ud83d",
                    "\\ude00\"}"
                ]
            ),
            "a\"béc😀"
        );
        assert_eq!(
            streamed(p, &["{\"to\":0,\"context\":\"done\"} trailing"]),
            "done"
        );
    }

    #[test]
    fn directive_answers_stream_after_to_user() {
        let p = Protocol::Directives;
        assert_eq!(streamed(p, &["TO us", "er: Hel", "lo"]), "Hello");
        assert_eq!(streamed(p, &["to User:Hi"]), "Hi");
        assert_eq!(streamed(p, &["TO programmer: build"]), "");
        assert_eq!(streamed(p, &["Hello"]), "");
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_answer(text in "[a-zA-Z0-9 \"\\\\\n\té😀{}]{0,40}", cuts in prop::collection::vec(0usize..80, 0..6)) {
            let envelope = crate::protocol::Envelope { to: crate::agency::Recipient::User, text: text.clone() };
            let raw = crate::protocol::format_reply(Protocol::Json, &[envelope], &crate::agency::Roster::default());
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c < raw.len() && raw.is_char_boundary(*c)).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut pieces = Vec::new();
            let mut last = 0;
            for c in cuts {
                pieces.push(&raw[last..c]);
                last = c;
            }
            pieces.push(&raw[last..]);
            prop_assert_eq!(streamed(Protocol::Json, &pieces), text);
        }

        #[test]
        fn never_panics(pieces in prop::collection::vec(any::<String>(), 0..5), json in any::<bool>()) {
            let p = if json { Protocol::Json } else { Protocol::Directives };
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let _ = streamed(p, &refs);
        }
    }
}
