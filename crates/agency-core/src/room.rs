//! Roundtable rooms (spec 004): a person and several agents in one room. Each message of the
//! person is answered, in parallel, by the agents it mentions (`@name`), or else by every
//! enabled agent. Every message can be left out of future contexts. This module decides who
//! answers and what each agent's context is; the runtime calls the models and stores.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use crate::agency::ModelRef;
use crate::ids::{AgencyId, ParticipantId, RoomId, RoomMessageId};
use crate::message::Role;

/// The longest message a person may post, in characters.
pub const MAX_MESSAGE_CHARS: usize = 5000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Room {
    pub id: RoomId,
    pub owner: String,
    pub name: String,
    /// The agency whose agents it was made with, if any.
    pub agency: Option<AgencyId>,
    pub created_at: DateTime<Utc>,
}

/// An agent in a room.
#[derive(Clone, Debug, PartialEq)]
pub struct Participant {
    pub id: ParticipantId,
    pub room: RoomId,
    /// Unique in the room (without regard to case): what `@mentions` name.
    pub name: String,
    pub model: ModelRef,
    pub role: Option<String>,
    pub personality: Option<String>,
    pub instructions: Option<String>,
    /// A disabled agent receives nothing (unless mentioned).
    pub enabled: bool,
    /// Display order.
    pub position: i64,
    /// A CSS colour for its messages and pill, e.g. `#3b82f6`.
    pub colour: String,
}

/// Who wrote a room message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Author {
    Person,
    /// An agent's answer. Its name is kept with the message, so a removed agent's messages
    /// still say whose they were.
    Agent {
        id: ParticipantId,
        name: String,
    },
    /// An agent's failure to answer, shown in its place; never in anyone's context.
    Error {
        id: ParticipantId,
        name: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomMessage {
    pub id: RoomMessageId,
    pub room: RoomId,
    /// Position in the room: messages are shown and read in this order.
    pub seq: i64,
    pub author: Author,
    pub text: String,
    /// Whether it goes into future contexts.
    pub included: bool,
    pub created_at: DateTime<Utc>,
}

impl RoomMessage {
    /// The participant it came from, for agents' answers and failures.
    pub fn participant(&self) -> Option<ParticipantId> {
        match &self.author {
            Author::Person => None,
            Author::Agent { id, .. } | Author::Error { id, .. } => Some(*id),
        }
    }
}

/// A person's message as it may be stored: not blank, at most [`MAX_MESSAGE_CHARS`].
pub fn check_text(text: &str) -> Result<&str, String> {
    let n = text.chars().count();
    if text.trim().is_empty() {
        Err("the message is empty".into())
    } else if n > MAX_MESSAGE_CHARS {
        Err(format!(
            "a message has at most {MAX_MESSAGE_CHARS} characters; this one has {n}"
        ))
    } else {
        Ok(text)
    }
}

/// The participants `@mentioned` in `text` (names without regard to case), in display order.
pub fn mentioned(text: &str, participants: &[Participant]) -> Vec<ParticipantId> {
    let names: Vec<String> = text
        .split('@')
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
                .collect::<String>()
                .trim_end_matches('.')
                .to_lowercase()
        })
        .filter(|n| !n.is_empty())
        .collect();
    participants
        .iter()
        .filter(|p| names.iter().any(|n| *n == p.name.to_lowercase()))
        .map(|p| p.id)
        .collect()
}

/// Who answers a person's message: those it mentions (disabled ones too: a mention is an
/// explicit ask), else every enabled agent. Nobody, in solo mode.
pub fn responders(text: &str, participants: &[Participant]) -> Vec<ParticipantId> {
    let asked = mentioned(text, participants);
    if !asked.is_empty() {
        return asked;
    }
    participants
        .iter()
        .filter(|p| p.enabled)
        .map(|p| p.id)
        .collect()
}

/// An agent's system prompt: its name, role, personality and instructions, and who else is in
/// the room.
pub fn system_prompt(agent: &Participant, participants: &[Participant]) -> String {
    let mut out = format!(
        "You are {}, taking part in a group conversation with a person and other AI agents.",
        agent.name
    );
    if let Some(role) = agent.role.as_deref().filter(|r| !r.trim().is_empty()) {
        let _ = write!(out, "\n\nYour role: {}", role.trim());
    }
    if let Some(p) = agent
        .personality
        .as_deref()
        .filter(|p| !p.trim().is_empty())
    {
        let _ = write!(out, "\n\nYour personality: {}", p.trim());
    }
    if let Some(i) = agent
        .instructions
        .as_deref()
        .filter(|i| !i.trim().is_empty())
    {
        let _ = write!(out, "\n\nInstructions:\n{}", i.trim());
    }
    let others: Vec<String> = participants
        .iter()
        .filter(|p| p.id != agent.id)
        .map(
            |p| match p.role.as_deref().filter(|r| !r.trim().is_empty()) {
                Some(role) => format!("{} ({})", p.name, role.trim()),
                None => p.name.clone(),
            },
        )
        .collect();
    if others.is_empty() {
        out.push_str("\n\nNo other agents are in the room.");
    } else {
        let _ = write!(
            out,
            "\n\nThe other agents in the room: {}.",
            others.join(", ")
        );
    }
    out.push_str(
        "\nMessages from other agents start with their name. Answer as yourself, in plain text, \
         without a name in front.",
    );
    out
}

/// What `agent` is sent: its system prompt, then the included messages (never failures), in
/// order: the person's as user turns, its own as assistant turns, other agents' as user turns
/// prefixed with their name.
pub fn context(
    agent: &Participant,
    participants: &[Participant],
    messages: &[RoomMessage],
) -> Vec<(Role, String)> {
    let mut out = vec![(Role::System, system_prompt(agent, participants))];
    for m in messages.iter().filter(|m| m.included) {
        match &m.author {
            Author::Person => out.push((Role::User, m.text.clone())),
            Author::Agent { id, .. } if *id == agent.id => {
                out.push((Role::Assistant, m.text.clone()));
            }
            Author::Agent { name, .. } => out.push((Role::User, format!("{name}: {}", m.text))),
            Author::Error { .. } => {}
        }
    }
    out
}

/// Colours given to agents in turn as they join.
pub const COLOURS: [&str; 8] = [
    "#2563eb", "#db2777", "#059669", "#d97706", "#7c3aed", "#0891b2", "#dc2626", "#4d7c0f",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, enabled: bool) -> Participant {
        Participant {
            id: ParticipantId::new(),
            room: RoomId(uuid::Uuid::nil()),
            name: name.into(),
            model: ModelRef::parse("builtin/rules").unwrap_or(ModelRef {
                provider: "builtin".into(),
                model: "rules".into(),
            }),
            role: Some(format!("{name}'s role")),
            personality: None,
            instructions: None,
            enabled,
            position: 0,
            colour: COLOURS[0].into(),
        }
    }

    fn msg(author: Author, text: &str, included: bool) -> RoomMessage {
        RoomMessage {
            id: RoomMessageId::new(),
            room: RoomId(uuid::Uuid::nil()),
            seq: 0,
            author,
            text: text.into(),
            included,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    #[test]
    fn mentions_pick_who_answers_else_the_enabled_do() {
        let ps = vec![
            agent("programmer", true),
            agent("Writer", false),
            agent("critic", true),
        ];
        let ids: Vec<ParticipantId> = ps.iter().map(|p| p.id).collect();
        assert_eq!(responders("hello all", &ps), vec![ids[0], ids[2]]);
        // A mention is an explicit ask: a disabled agent answers it.
        assert_eq!(responders("@writer, a poem?", &ps), vec![ids[1]]);
        assert_eq!(
            responders("@critic and @PROGRAMMER: thoughts.", &ps),
            vec![ids[0], ids[2]],
            "display order, without regard to case"
        );
        assert_eq!(
            responders("mail me at a@nobody.org", &ps),
            vec![ids[0], ids[2]]
        );
        assert_eq!(responders("@critic.", &ps), vec![ids[2]]);
        let solo = vec![agent("a", false), agent("b", false)];
        assert_eq!(responders("anyone?", &solo), vec![], "solo mode");
    }

    #[test]
    fn a_context_holds_included_messages_from_its_point_of_view() {
        let ps = vec![agent("ann", true), agent("bob", true)];
        let (ann, bob) = (&ps[0], &ps[1]);
        let who = |p: &Participant| Author::Agent {
            id: p.id,
            name: p.name.clone(),
        };
        let messages = vec![
            msg(Author::Person, "first", true),
            msg(who(ann), "ann says", true),
            msg(who(bob), "bob says", true),
            msg(who(bob), "bob, left out", false),
            msg(
                Author::Error {
                    id: bob.id,
                    name: "bob".into(),
                },
                "bob failed",
                true,
            ),
            msg(Author::Person, "second", true),
        ];
        let ctx = context(ann, &ps, &messages);
        let (roles, texts): (Vec<Role>, Vec<&str>) =
            ctx.iter().map(|(r, t)| (*r, t.as_str())).unzip();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::User,
                Role::User
            ]
        );
        assert_eq!(
            &texts[1..],
            ["first", "ann says", "bob: bob says", "second"]
        );
        assert!(texts[0].starts_with("You are ann,"), "{}", texts[0]);
        assert!(texts[0].contains("Your role: ann's role"), "{}", texts[0]);
        assert!(texts[0].contains("bob (bob's role)"), "{}", texts[0]);

        let ctx = context(bob, &ps, &messages);
        assert_eq!(ctx[2], (Role::User, "ann: ann says".to_string()));
        assert_eq!(ctx[3], (Role::Assistant, "bob says".to_string()));
    }

    #[test]
    fn messages_have_a_length_limit_in_characters() {
        assert!(check_text("   ").is_err());
        assert!(check_text(&"é".repeat(MAX_MESSAGE_CHARS)).is_ok());
        let long = check_text(&"x".repeat(MAX_MESSAGE_CHARS + 1)).unwrap_err();
        assert!(long.contains("5000") && long.contains("5001"), "{long}");
    }
}
