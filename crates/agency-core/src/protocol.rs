//! The two routing protocols: how an agent addresses others, and how what it receives is framed.
//!
//! Parsing is forgiving where the intent is unambiguous (code fences, white space, prose around
//! one JSON object, any case for the first `TO`) and strict otherwise. Everything here is a pure
//! function of its inputs.

use serde_json::{Map, Value};

use crate::agency::{Protocol, Recipient, Roster};
use crate::ids::AgentId;

/// One addressed piece of a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub to: Recipient,
    pub text: String,
}

/// Why a reply could not be routed. The text is shown to the agent in its correction.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("your reply was empty")]
    Empty,
    #[error("your reply is not a JSON object")]
    NotJson,
    #[error("your reply holds {0} JSON objects; send one object, or one array of objects")]
    Ambiguous(usize),
    #[error("{0}")]
    Shape(String),
    #[error("your reply does not start with a TO directive")]
    NoDirective,
    #[error("there is no agent #{0}")]
    UnknownId(u32),
    #[error("there is no agent named `{0}`")]
    UnknownName(String),
    #[error("you addressed yourself")]
    SelfAddressed,
}

/// Reads an agent's reply into envelopes. `sender` is the agent that wrote it.
pub fn parse_reply(
    protocol: Protocol,
    raw: &str,
    sender: AgentId,
    roster: &Roster,
) -> Result<Vec<Envelope>, ReplyError> {
    // Plain chat is taken as written: a reply that is one fenced block is that block.
    let text = match protocol {
        Protocol::Plain => raw.trim(),
        Protocol::Json | Protocol::Directives => strip_fences(raw.trim()),
    };
    if text.is_empty() {
        return Err(ReplyError::Empty);
    }
    let envelopes = match protocol {
        Protocol::Json => parse_json(text, roster)?,
        Protocol::Directives => parse_directives(text, roster)?,
        Protocol::Plain => vec![Envelope {
            to: Recipient::User,
            text: text.to_string(),
        }],
    };
    if envelopes.iter().any(|e| e.to == Recipient::Agent(sender)) {
        return Err(ReplyError::SelfAddressed);
    }
    Ok(envelopes)
}

/// A message as its addressee sees it: who it is from, in the protocol's format.
pub fn frame(protocol: Protocol, from: Option<AgentId>, text: &str, roster: &Roster) -> String {
    match protocol {
        Protocol::Json => {
            let from = from.map_or(AgentId::USER, AgentId::get);
            format!("{{\"from\":{from},\"context\":{}}}", json_string(text))
        }
        Protocol::Directives => format!("FROM {}: {text}", roster.display(from)),
        Protocol::Plain => text.to_string(),
    }
}

/// A reply written the way the protocol asks (what a well-behaved model answers).
pub fn format_reply(protocol: Protocol, envelopes: &[Envelope], roster: &Roster) -> String {
    match protocol {
        Protocol::Json => {
            let obj = |e: &Envelope| {
                format!(
                    "{{\"to\":{},\"context\":{}}}",
                    e.to.number(),
                    json_string(&e.text)
                )
            };
            match envelopes {
                [one] => obj(one),
                many => format!("[{}]", many.iter().map(obj).collect::<Vec<_>>().join(",")),
            }
        }
        Protocol::Directives => envelopes
            .iter()
            .map(|e| format!("TO {}: {}", roster.display(e.to.agent()), e.text))
            .collect::<Vec<_>>()
            .join("\n"),
        Protocol::Plain => envelopes
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
    }
}

/// How to reply, for system prompts and corrections. `example` is an agent to show.
pub fn format_instructions(protocol: Protocol, example: Option<(AgentId, &str)>) -> String {
    let (id, name) = example.map_or((1, "agent"), |(id, n)| (id.get(), n));
    match protocol {
        Protocol::Json => format!(
            "Reply with one JSON object and nothing else: {{\"to\": <id>, \"context\": \"<your message>\"}}. \
             \"to\" is the number of an agent in the list above, without its name (for example {{\"to\": {id}, \"context\": \"...\"}}). \
             To address several agents at once, reply with a JSON array of such objects. \
             Messages you receive look like {{\"from\": <id>, \"context\": \"<message>\"}}; \"from\": 0 is the user."
        ),
        Protocol::Directives => format!(
            "Start your reply with a TO directive naming who it is for, then your message, for example \"TO {name}: <your message>\". \
             To address several agents at once, start a new line with another TO directive for each. \
             Messages you receive start with a FROM directive naming who sent them, for example \"FROM {name}: ...\"."
        ),
        Protocol::Plain => {
            "Answer in plain text: your reply goes to everyone as it is.".to_string()
        }
    }
}

/// A JSON string literal (keys are written by hand so that `to`/`from` come first).
fn json_string(s: &str) -> String {
    Value::from(s).to_string()
}

fn strip_fences(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return text;
    };
    // Drop the info string (```json) on the opening line.
    match body.split_once('\n') {
        Some((info, body)) if !info.trim().contains(' ') => body.trim(),
        _ => body.trim(),
    }
}

fn parse_json(text: &str, roster: &Roster) -> Result<Vec<Envelope>, ReplyError> {
    let value = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(_) => embedded_object(text)?,
    };
    match value {
        Value::Object(o) => Ok(vec![envelope(&o, roster)?]),
        Value::Array(items) if items.is_empty() => {
            Err(ReplyError::Shape("your reply is an empty array".into()))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Object(o) => envelope(o, roster),
                _ => Err(ReplyError::Shape(
                    "every item of the array must be an object with \"to\" and \"context\"".into(),
                )),
            })
            .collect(),
        _ => Err(ReplyError::NotJson),
    }
}

/// Prose around exactly one JSON object (or array of objects): take that value.
fn embedded_object(text: &str) -> Result<Value, ReplyError> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find(['{', '[']) {
        let start = i + off;
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v @ Value::Object(_))) => {
                found.push(v);
                i = start + stream.byte_offset();
            }
            Some(Ok(Value::Array(items)))
                if !items.is_empty() && items.iter().all(Value::is_object) =>
            {
                found.push(Value::Array(items));
                i = start + stream.byte_offset();
            }
            _ => i = start + 1,
        }
    }
    match found.len() {
        0 => Err(ReplyError::NotJson),
        1 => Ok(found.remove(0)),
        n => Err(ReplyError::Ambiguous(n)),
    }
}

fn envelope(o: &Map<String, Value>, roster: &Roster) -> Result<Envelope, ReplyError> {
    let to = match o.get("to") {
        None => return Err(ReplyError::Shape("the object has no \"to\" field".into())),
        Some(Value::Number(n)) => n.as_u64(),
        // Forgiving: "143" or "#143" are the same number.
        Some(Value::String(s)) => s.trim().trim_start_matches('#').parse::<u64>().ok(),
        Some(_) => None,
    }
    .ok_or_else(|| ReplyError::Shape("\"to\" must be the number of an agent".into()))?;
    let text = match (o.get("context"), o.get("content")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.clone(),
        // JSON for its addressee (an answer in a client's JSON format): as JSON text.
        (Some(v @ (Value::Object(_) | Value::Array(_))), _) => v.to_string(),
        (None, None) => {
            return Err(ReplyError::Shape(
                "the object has no \"context\" field with your message".into(),
            ));
        }
        _ => return Err(ReplyError::Shape("\"context\" must be a string".into())),
    };
    let to = u32::try_from(to).map_err(|_| ReplyError::UnknownId(u32::MAX))?;
    let to = match AgentId::new(to) {
        None => Recipient::User,
        Some(id) if roster.contains(id) => Recipient::Agent(id),
        Some(id) => return Err(ReplyError::UnknownId(id.get())),
    };
    Ok(Envelope { to, text })
}

/// `TO name:` at the start of a line; `strict` wants the upper-case keyword.
fn directive(line: &str, strict: bool) -> Option<(&str, &str)> {
    let line = line.trim_start();
    let keyword = line.get(..2)?;
    let ok = if strict {
        keyword == "TO"
    } else {
        keyword.eq_ignore_ascii_case("to")
    };
    let rest = line.get(2..)?;
    if !ok || !rest.starts_with([' ', '\t']) {
        return None;
    }
    let (name, body) = rest.split_once(':')?;
    let name = name.trim();
    (!name.is_empty() && !name.contains(char::is_whitespace)).then_some((name, body))
}

fn parse_directives(text: &str, roster: &Roster) -> Result<Vec<Envelope>, ReplyError> {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let (name, body) = directive(first, false).ok_or(ReplyError::NoDirective)?;
    let mut current = (resolve_name(name, roster)?, body.trim_start().to_string());
    let mut envelopes = Vec::new();
    for line in lines {
        // A later line opens a new section only when it names a known party, so prose such as
        // "To do this: ..." stays part of the message.
        match directive(line, true).and_then(|(n, b)| Some((roster.resolve(n)?, b))) {
            Some((to, body)) => {
                let done = std::mem::replace(&mut current, (to, body.trim_start().to_string()));
                envelopes.push(Envelope {
                    to: done.0,
                    text: done.1.trim_end().to_string(),
                });
            }
            None => {
                current.1.push('\n');
                current.1.push_str(line);
            }
        }
    }
    envelopes.push(Envelope {
        to: current.0,
        text: current.1.trim().to_string(),
    });
    Ok(envelopes)
}

fn resolve_name(name: &str, roster: &Roster) -> Result<Recipient, ReplyError> {
    if let Some(r) = roster.resolve(name) {
        return Ok(r);
    }
    // `TO #143:` names an agent by number.
    if let Some(n) = name.strip_prefix('#').and_then(|n| n.parse::<u32>().ok()) {
        return match AgentId::new(n) {
            None => Ok(Recipient::User),
            Some(id) if roster.contains(id) => Ok(Recipient::Agent(id)),
            Some(_) => Err(ReplyError::UnknownId(n)),
        };
    }
    Err(ReplyError::UnknownName(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u32) -> AgentId {
        AgentId::new(n).unwrap()
    }

    #[test]
    fn plain_chat_keeps_a_fenced_reply_whole() {
        let raw = "```rust\nfn main() {}\n```";
        let parsed = parse_reply(Protocol::Plain, raw, id(143), &roster());
        assert_eq!(
            parsed,
            Ok(vec![Envelope {
                to: Recipient::User,
                text: raw.to_string(),
            }])
        );
    }

    fn roster() -> Roster {
        Roster::new([
            (id(4522), "manager".to_string()),
            (id(143), "programmer".to_string()),
            (id(224), "designer".to_string()),
        ])
    }

    fn json(raw: &str) -> Result<Vec<Envelope>, ReplyError> {
        parse_reply(Protocol::Json, raw, id(4522), &roster())
    }

    fn dir(raw: &str) -> Result<Vec<Envelope>, ReplyError> {
        parse_reply(Protocol::Directives, raw, id(4522), &roster())
    }

    fn to(r: Recipient, t: &str) -> Envelope {
        Envelope {
            to: r,
            text: t.into(),
        }
    }

    #[allow(non_snake_case)]
    fn P() -> Recipient {
        Recipient::Agent(id(143))
    }

    #[test]
    fn json_replies() {
        assert_eq!(
            json(r#"{"to": 143, "context": "hi"}"#),
            Ok(vec![to(P(), "hi")])
        );
        assert_eq!(
            json(r#"{"to": 0, "content": "done"}"#),
            Ok(vec![to(Recipient::User, "done")])
        );
        assert_eq!(
            json(r##"{"to": "#143", "context": "hi"}"##),
            Ok(vec![to(P(), "hi")])
        );
        assert_eq!(
            json("```json\n{\"to\": 143, \"context\": \"hi\"}\n```"),
            Ok(vec![to(P(), "hi")])
        );
        assert_eq!(
            json("Sure! Here it is:\n{\"to\": 143, \"context\": \"a {b}\"}\nThanks."),
            Ok(vec![to(P(), "a {b}")])
        );
        assert_eq!(
            json(r#"[{"to": 143, "context": "a"}, {"to": 224, "context": "b"}]"#),
            Ok(vec![to(P(), "a"), to(Recipient::Agent(id(224)), "b")])
        );
    }

    #[test]
    fn json_errors_are_strict() {
        assert_eq!(json("   "), Err(ReplyError::Empty));
        assert_eq!(json("hello there"), Err(ReplyError::NotJson));
        assert_eq!(
            json(r#"{"to": 999, "context": "x"}"#),
            Err(ReplyError::UnknownId(999))
        );
        assert_eq!(
            json(r#"{"to": 4522, "context": "x"}"#),
            Err(ReplyError::SelfAddressed)
        );
        assert!(matches!(
            json(r#"{"context": "x"}"#),
            Err(ReplyError::Shape(_))
        ));
        assert!(matches!(json(r#"{"to": 143}"#), Err(ReplyError::Shape(_))));
        assert!(matches!(
            json(r#"{"to": 143, "context": 5}"#),
            Err(ReplyError::Shape(_))
        ));
        assert_eq!(
            json(r#"{"to": 0, "context": {"city": "Oslo", "t": [1, 2]}}"#).unwrap()[0].text,
            r#"{"city":"Oslo","t":[1,2]}"#,
            "JSON as the message is its text"
        );
        assert!(matches!(
            json(r#"{"to": -1, "context": "x"}"#),
            Err(ReplyError::Shape(_))
        ));
        assert!(matches!(json("[]"), Err(ReplyError::Shape(_))));
        assert_eq!(
            json(r#"first {"to": 143, "context": "a"} then {"to": 224, "context": "b"}"#),
            Err(ReplyError::Ambiguous(2))
        );
    }

    #[test]
    fn directive_replies() {
        assert_eq!(
            dir("TO programmer: build it"),
            Ok(vec![to(P(), "build it")])
        );
        assert_eq!(
            dir("  to Programmer:build it  "),
            Ok(vec![to(P(), "build it")])
        );
        assert_eq!(
            dir("TO user: all done"),
            Ok(vec![to(Recipient::User, "all done")])
        );
        assert_eq!(dir("TO #143: hi"), Ok(vec![to(P(), "hi")]));
        assert_eq!(
            dir("TO programmer: line one\nTo do this: keep going\nTO designer: draw\nmore"),
            Ok(vec![
                to(P(), "line one\nTo do this: keep going"),
                to(Recipient::Agent(id(224)), "draw\nmore")
            ])
        );
        assert_eq!(dir("Hello"), Err(ReplyError::NoDirective));
        assert_eq!(
            dir("TO nobody: x"),
            Err(ReplyError::UnknownName("nobody".into()))
        );
        assert_eq!(dir("TO manager: x"), Err(ReplyError::SelfAddressed));
    }

    #[test]
    fn framing() {
        let r = roster();
        assert_eq!(
            frame(Protocol::Json, Some(id(143)), "a\"b", &r),
            r#"{"from":143,"context":"a\"b"}"#
        );
        assert_eq!(
            frame(Protocol::Json, None, "hi", &r),
            r#"{"from":0,"context":"hi"}"#
        );
        assert_eq!(
            frame(Protocol::Directives, Some(id(143)), "hi", &r),
            "FROM programmer: hi"
        );
        assert_eq!(frame(Protocol::Directives, None, "hi", &r), "FROM user: hi");
    }

    fn recipient() -> impl Strategy<Value = Recipient> {
        prop_oneof![
            Just(Recipient::User),
            Just(P()),
            Just(Recipient::Agent(id(224)))
        ]
    }

    proptest! {
        #[test]
        fn parsing_never_panics(raw in any::<String>(), directives in any::<bool>()) {
            let p = if directives { Protocol::Directives } else { Protocol::Json };
            let _ = parse_reply(p, &raw, id(4522), &roster());
        }

        #[test]
        fn json_round_trips(envs in prop::collection::vec((recipient(), any::<String>()), 1..4)) {
            let envs: Vec<Envelope> = envs.into_iter().map(|(r, t)| to(r, &t)).collect();
            let raw = format_reply(Protocol::Json, &envs, &roster());
            prop_assert_eq!(json(&raw), Ok(envs.clone()));
            let fenced = format!("```json\n{raw}\n```");
            prop_assert_eq!(json(&fenced), Ok(envs));
        }

        #[test]
        fn directives_round_trip(
            envs in prop::collection::vec((recipient(), "[a-zA-Z0-9 ,.!?]{0,40}(\n[a-z ]{1,20})?"), 1..4)
        ) {
            let envs: Vec<Envelope> = envs.into_iter().map(|(r, t)| to(r, t.trim())).collect();
            let raw = format_reply(Protocol::Directives, &envs, &roster());
            prop_assert_eq!(dir(&raw), Ok(envs));
        }
    }
}
