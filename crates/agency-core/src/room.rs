//! Roundtable rooms (spec 004): a person and several agents in one room. Each message of the
//! person is answered, in parallel, by the agents it mentions (`@name`) or replies to, or else
//! by every enabled agent. Every message can be left out of future contexts. This module
//! decides who answers and what each agent's context is; the runtime calls the models and
//! stores.
//!
//! An agent may be a **bot** behind a webhook (spec 003): it answers only when a message tags
//! it or replies to one of its messages, and is sent the spec's request ([`bot_call`]). Every
//! room also has a built-in utility bot that registers bots ([`command`]).

use std::collections::HashMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use crate::agency::ModelRef;
use crate::ids::{AgencyId, DefinitionId, ParticipantId, RoomId, RoomMessageId};
use crate::message::Role;
use crate::tool::ToolGrants;

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
    /// Unique in the room (without regard to case): what `@mentions` name. A bot's username.
    pub name: String,
    pub speaker: Speaker,
    /// Its role: the text of the definition `role_id` points to, if it does, else its own.
    pub role: Option<String>,
    pub role_id: Option<DefinitionId>,
    /// Its personality, likewise.
    pub personality: Option<String>,
    pub personality_id: Option<DefinitionId>,
    pub instructions: Option<String>,
    /// The tools its model may call while it answers (`server/tool` or `server/*`); a bot
    /// has none.
    pub tools: ToolGrants,
    /// A disabled agent receives nothing (unless mentioned).
    pub enabled: bool,
    /// Display order.
    pub position: i64,
    /// A CSS colour for its messages and pill, e.g. `#3b82f6`.
    pub colour: String,
}

/// A role or a personality written once and pointed to by any number of room agents: change
/// it, and each of them has the new text from its next answer on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub id: DefinitionId,
    pub owner: String,
    pub kind: DefinitionKind,
    /// Unique among the owner's definitions of its kind (without regard to case).
    pub name: String,
    pub text: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DefinitionKind {
    Role,
    Personality,
}

impl DefinitionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DefinitionKind::Role => "role",
            DefinitionKind::Personality => "personality",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "role" => Some(DefinitionKind::Role),
            "personality" => Some(DefinitionKind::Personality),
            _ => None,
        }
    }
}

/// The longest definition text, in characters.
pub const MAX_DEFINITION_CHARS: usize = 4000;

/// A definition's name and text as they may be stored: a name of 1 to 64 characters, a text
/// not blank and at most [`MAX_DEFINITION_CHARS`]; each problem named by its field.
pub fn check_definition<'a>(
    name: &'a str,
    text: &'a str,
) -> Result<(&'a str, &'a str), Vec<(&'static str, String)>> {
    let (name, text) = (name.trim(), text.trim());
    let mut problems = Vec::new();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        problems.push((
            "name",
            "a name of 1 to 64 characters, e.g. `critic`".to_string(),
        ));
    }
    let n = text.chars().count();
    if n == 0 {
        problems.push(("text", "write what it is".to_string()));
    } else if n > MAX_DEFINITION_CHARS {
        problems.push((
            "text",
            format!("at most {MAX_DEFINITION_CHARS} characters; this has {n}"),
        ));
    }
    if problems.is_empty() {
        Ok((name, text))
    } else {
        Err(problems)
    }
}

/// What answers for a participant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Speaker {
    /// A model, given the agent's context.
    Model(ModelRef),
    /// A bot behind a webhook, given the spec's request.
    Bot(Bot),
}

/// A webhook bot: where it is called, and whom it emulates. Its caller key is not kept: the
/// runtime derives it from the server's secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bot {
    pub endpoint: String,
    /// The name of the person it emulates.
    pub emulates: Option<String>,
}

impl Participant {
    pub fn model(&self) -> Option<&ModelRef> {
        match &self.speaker {
            Speaker::Model(m) => Some(m),
            Speaker::Bot(_) => None,
        }
    }

    pub fn bot(&self) -> Option<&Bot> {
        match &self.speaker {
            Speaker::Bot(b) => Some(b),
            Speaker::Model(_) => None,
        }
    }
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
    /// The room's built-in utility bot, answering a command; never in anyone's context.
    Utility,
}

/// The utility bot's name.
pub const UTILITY: &str = "utility";

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
    /// The message this one answers.
    pub reply_to: Option<RoomMessageId>,
    /// The participants it tags (`@name`).
    pub tagged: Vec<ParticipantId>,
    pub created_at: DateTime<Utc>,
}

impl RoomMessage {
    /// The participant it came from, for agents' answers and failures.
    pub fn participant(&self) -> Option<ParticipantId> {
        match &self.author {
            Author::Person | Author::Utility => None,
            Author::Agent { id, .. } | Author::Error { id, .. } => Some(*id),
        }
    }

    /// Said by the person or an agent: neither a failure nor the utility bot.
    pub fn spoken(&self) -> bool {
        matches!(self.author, Author::Person | Author::Agent { .. })
    }
}

/// Why a participant's name or a message cannot be taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoomTextError {
    #[error("a letter, then letters, digits, `_`, `-` or `.` (at most 64): @mentions name it")]
    BadName,
    #[error("`{UTILITY}` is the room's utility bot")]
    UtilityName,
    #[error("the message is empty")]
    EmptyMessage,
    #[error("a message has at most {MAX_MESSAGE_CHARS} characters; this one has {0}")]
    LongMessage(usize),
}

/// A participant's name as it may be given: a letter, then letters, digits, `_`, `-` or `.`,
/// at most 64, and not the utility bot's.
pub fn check_name(name: &str) -> Result<&str, RoomTextError> {
    let name = name.trim();
    let valid = name.chars().next().is_some_and(char::is_alphabetic)
        && name.chars().count() <= 64
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        Err(RoomTextError::BadName)
    } else if name.eq_ignore_ascii_case(UTILITY) {
        Err(RoomTextError::UtilityName)
    } else {
        Ok(name)
    }
}

/// A person's message as it may be stored: not blank, at most [`MAX_MESSAGE_CHARS`].
pub fn check_text(text: &str) -> Result<&str, RoomTextError> {
    let n = text.chars().count();
    if text.trim().is_empty() {
        Err(RoomTextError::EmptyMessage)
    } else if n > MAX_MESSAGE_CHARS {
        Err(RoomTextError::LongMessage(n))
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

/// Those a person's message asks by name: the agents it mentions and the one whose message it
/// replies to.
fn asked(
    text: &str,
    replied: Option<&RoomMessage>,
    participants: &[Participant],
) -> Vec<ParticipantId> {
    let mut asked = mentioned(text, participants);
    if let Some(Author::Agent { id, .. }) = replied.map(|m| &m.author)
        && !asked.contains(id)
        && participants.iter().any(|p| p.id == *id)
    {
        asked.push(*id);
    }
    asked
}

/// Whom a person's message reaches (see [`responders`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Responders {
    /// Who answers it.
    pub answering: Vec<ParticipantId>,
    /// The disabled agents it asks by name: they receive nothing, and the room says so (see
    /// [`replies::disabled`]).
    pub disabled: Vec<ParticipantId>,
}

/// Who answers a person's message: the enabled among the agents it asks by name (mentions,
/// or the one it replies to), else (when it asks nobody by name) every enabled agent that is
/// not a bot (bots answer only when asked). A disabled agent receives nothing, named or not
/// (spec 004). Nobody, in solo mode.
pub fn responders(
    text: &str,
    replied: Option<&RoomMessage>,
    participants: &[Participant],
) -> Responders {
    let asked = asked(text, replied, participants);
    if asked.is_empty() {
        return Responders {
            answering: participants
                .iter()
                .filter(|p| p.enabled && p.bot().is_none())
                .map(|p| p.id)
                .collect(),
            disabled: Vec::new(),
        };
    }
    let (answering, disabled): (Vec<&Participant>, Vec<&Participant>) = participants
        .iter()
        .filter(|p| asked.contains(&p.id))
        .partition(|p| p.enabled);
    Responders {
        answering: answering.iter().map(|p| p.id).collect(),
        disabled: disabled.iter().map(|p| p.id).collect(),
    }
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
            Author::Error { .. } | Author::Utility => {}
        }
    }
    out
}

/// Replies and tool results a room agent's answer may take before it is told to answer: eight
/// rounds of one tool call each.
pub const MAX_HOPS: u32 = 16;

/// A model agent's answer is a turn of the engine, as a routed conversation's is: this
/// agency of one agent, `agent` itself as its manager, speaking plain chat. The engine decides
/// what its tool calls get (its grants, a refusal, the loop and hop guards); its context is the
/// room's ([`context`]).
pub fn answering_agency(agent: &Participant, model: &ModelRef) -> crate::Agency {
    let id = crate::AgentId::FIRST;
    crate::Agency {
        id: AgencyId(agent.room.0),
        owner: String::new(),
        name: agent.name.clone(),
        handle: None,
        protocol: crate::Protocol::Plain,
        manager: id,
        limits: crate::Limits {
            max_hops: MAX_HOPS,
            ..crate::Limits::default()
        },
        providers: Vec::new(),
        mcp_servers: Vec::new(),
        agents: vec![crate::Agent {
            id,
            name: agent.name.clone(),
            handle: None,
            role: agent.role.clone(),
            model: model.clone(),
            sampling: crate::Sampling::default(),
            blocks: Vec::new(),
            memory: crate::memory::MemorySettings::default(),
            tools: agent.tools.clone(),
            approve: crate::approval::ApprovalPolicy::default(),
        }],
        version: None,
    }
}

/// The most earlier messages a bot is sent as `context`.
pub const BOT_CONTEXT: usize = 50;

/// What a bot is sent when `message` asks it (spec 003): the messages its wire request holds,
/// chosen here and put in the bot's wire format by the runtime.
#[derive(Clone, Debug, PartialEq)]
pub struct BotCall<'a> {
    /// The included messages before `message` (the last [`BOT_CONTEXT`]), oldest first;
    /// never failures or the utility bot's.
    pub context: Vec<&'a RoomMessage>,
    /// Earlier exchanges with the bot: each thread (a message and the replies to it, and to
    /// those) that the bot answered in, oldest first.
    pub conversation: Vec<Exchange<'a>>,
    pub message: &'a RoomMessage,
    /// The participants `message` tags.
    pub users: Vec<&'a Participant>,
}

/// One thread the bot took part in, named by its first message.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange<'a> {
    pub id: RoomMessageId,
    pub messages: Vec<&'a RoomMessage>,
}

/// The thread a message belongs to: the first message of its chain of replies (a reply to a
/// message the room no longer has starts a thread of its own).
fn thread_root(m: &RoomMessage, by_id: &HashMap<RoomMessageId, &RoomMessage>) -> RoomMessageId {
    let mut at = m;
    // A chain of replies only points back in time; the bound guards against damaged data.
    for _ in 0..by_id.len() {
        match at.reply_to.and_then(|r| by_id.get(&r)) {
            Some(parent) => at = parent,
            None => break,
        }
    }
    at.id
}

/// The request for `bot` answering `message`; `history` is the room's messages in order
/// (those after `message` are not looked at).
pub fn bot_call<'a>(
    bot: ParticipantId,
    message: &'a RoomMessage,
    history: &'a [RoomMessage],
    participants: &'a [Participant],
) -> BotCall<'a> {
    let earlier: Vec<&RoomMessage> = history.iter().filter(|m| m.seq < message.seq).collect();
    let by_id: HashMap<RoomMessageId, &RoomMessage> = earlier.iter().map(|m| (m.id, *m)).collect();
    // What the person left out of contexts is left out here too.
    let before: Vec<&RoomMessage> = earlier
        .into_iter()
        .filter(|m| m.included && m.spoken())
        .collect();
    let context = before[before.len().saturating_sub(BOT_CONTEXT)..].to_vec();
    let mut threads: Vec<RoomMessageId> = Vec::new();
    for m in &before {
        if m.participant() == Some(bot) {
            let root = thread_root(m, &by_id);
            if !threads.contains(&root) {
                threads.push(root);
            }
        }
    }
    let mut conversation: Vec<Exchange> = threads
        .iter()
        .map(|&id| Exchange {
            id,
            messages: Vec::new(),
        })
        .collect();
    for m in &before {
        let root = thread_root(m, &by_id);
        if let Some(x) = conversation.iter_mut().find(|x| x.id == root) {
            x.messages.push(m);
        }
    }
    conversation.sort_by_key(|x| x.messages.first().map(|m| m.seq));

    let users = participants
        .iter()
        .filter(|p| message.tagged.contains(&p.id))
        .collect();
    BotCall {
        context,
        conversation,
        message,
        users,
    }
}

/// Whom a bot's answer to `original` tags: those `original` tagged (but the bot), unless
/// `original` is itself a reply to a message that tagged someone — the thread already has
/// their attention (spec 003).
pub fn reply_tags(
    original: &RoomMessage,
    history: &[RoomMessage],
    bot: ParticipantId,
) -> Vec<ParticipantId> {
    let replies_to_tagged = original
        .reply_to
        .and_then(|r| history.iter().find(|m| m.id == r))
        .is_some_and(|m| !m.tagged.is_empty());
    if replies_to_tagged {
        return Vec::new();
    }
    original
        .tagged
        .iter()
        .copied()
        .filter(|t| *t != bot)
        .collect()
}

/// A command for the room's utility bot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/register <username> <endpoint> [emulated name]`
    Register {
        username: String,
        endpoint: String,
        emulates: Option<String>,
    },
    /// `/bots`
    Bots,
    /// `/unregister <username>`
    Unregister { username: String },
    /// `/help`
    Help,
}

/// How to use the utility bot.
/// What the utility bot answers to its commands.
pub mod replies {
    use super::Participant;

    /// A message asked agents that are disabled, which receive nothing: the room says so.
    pub fn disabled(agents: &[&Participant]) -> String {
        let names: Vec<String> = agents.iter().map(|p| format!("@{}", p.name)).collect();
        let (who, verb, it) = match names.as_slice() {
            [one] => (one.clone(), "is", "it"),
            [rest @ .., last] => (format!("{} and {last}", rest.join(", ")), "are", "them"),
            [] => return String::new(),
        };
        format!("{who} {verb} disabled and received nothing: enable {it} to ask {it}.")
    }

    /// `/bots`: the room's bots, or how to add one.
    pub fn bots(bots: &[Participant]) -> String {
        let lines: Vec<String> = bots
            .iter()
            .filter_map(|p| {
                let bot = p.bot()?;
                let who = bot
                    .emulates
                    .as_deref()
                    .map(|e| format!(" (emulating {e})"))
                    .unwrap_or_default();
                Some(format!("@{}{who} at {}", p.name, bot.endpoint))
            })
            .collect();
        if lines.is_empty() {
            "No bots are registered in this room. `/register <username> <endpoint> \
             [emulated name]` adds one."
                .to_string()
        } else {
            format!("Bots in this room:\n{}", lines.join("\n"))
        }
    }

    /// `/register` done: the bot, and the last characters of its caller key (the key itself
    /// is shown once, to whoever registered it, and never stored).
    pub fn registered(bot: &Participant, caller_key: &str) -> String {
        let key: Vec<char> = caller_key.chars().collect();
        let last: String = key[key.len().saturating_sub(4)..].iter().collect();
        format!(
            "Registered @{}: tag it or reply to it and I call {} with the header X-CALLER-KEY. \
             Its caller key (ending in …{last}) was shown once, to whoever registered it.",
            bot.name,
            bot.bot().map(|b| b.endpoint.as_str()).unwrap_or_default(),
        )
    }

    /// `/register` refused, and why.
    pub fn not_registered(why: &str) -> String {
        format!("I could not register it: {why}")
    }

    /// `/register` refused for these problems of what it was given.
    pub fn not_valid(problems: &crate::ValidationErrors) -> String {
        let problems: Vec<String> = problems
            .0
            .iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect();
        format!("I could not register it. {}", problems.join("; "))
    }

    /// `/unregister` done.
    pub fn unregistered(bot: &Participant) -> String {
        format!("Unregistered @{}.", bot.name)
    }

    /// `/unregister` of a bot the room does not have.
    pub fn no_such_bot(why: &str) -> String {
        format!("{why}; `/bots` lists them.")
    }
}

pub const COMMANDS_HELP: &str = "I register bots in this room: `/register <username> <endpoint> \
     [emulated name]` adds one (I answer with its caller key, once), `/bots` lists them, \
     `/unregister <username>` removes one.";

/// What is wrong with a command: the utility bot answers with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error(
        "usage: `/register <username> <endpoint> [emulated name]`, e.g. \
         `/register ada https://bots.example.com/ada Ada Lovelace`"
    )]
    RegisterUsage,
    #[error("`/bots` takes no arguments")]
    BotsUsage,
    #[error("usage: `/unregister <username>`")]
    UnregisterUsage,
    #[error("I do not know `/{0}`. {COMMANDS_HELP}")]
    Unknown(String),
}

/// The utility bot's command in `text`, if it is one (it starts with `/` and a word): the
/// command, or what is wrong with it.
pub fn command(text: &str) -> Option<Result<Command, CommandError>> {
    let rest = text.trim().strip_prefix('/')?;
    let mut words = rest.split_whitespace();
    let name = words.next()?;
    if !name.chars().next().is_some_and(char::is_alphabetic) {
        return None;
    }
    let args: Vec<&str> = words.collect();
    Some(match name.to_lowercase().as_str() {
        "register" => match args.as_slice() {
            [username, endpoint, emulates @ ..] => Ok(Command::Register {
                username: (*username).trim_start_matches('@').to_string(),
                endpoint: (*endpoint).to_string(),
                emulates: (!emulates.is_empty()).then(|| emulates.join(" ")),
            }),
            _ => Err(CommandError::RegisterUsage),
        },
        "bots" if args.is_empty() => Ok(Command::Bots),
        "bots" => Err(CommandError::BotsUsage),
        "unregister" => match args.as_slice() {
            [username] => Ok(Command::Unregister {
                username: username.trim_start_matches('@').to_string(),
            }),
            _ => Err(CommandError::UnregisterUsage),
        },
        "help" => Ok(Command::Help),
        other => Err(CommandError::Unknown(other.to_string())),
    })
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
            speaker: Speaker::Model(ModelRef {
                provider: "builtin".into(),
                model: "rules".into(),
            }),
            role: Some(format!("{name}'s role")),
            role_id: None,
            personality: None,
            personality_id: None,
            instructions: None,
            tools: ToolGrants::default(),
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
            reply_to: None,
            tagged: Vec::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    fn bot(name: &str) -> Participant {
        Participant {
            speaker: Speaker::Bot(Bot {
                endpoint: format!("https://bots.example.com/{name}"),
                emulates: None,
            }),
            ..agent(name, true)
        }
    }

    /// Messages numbered in order, as a room stores them.
    fn numbered(mut ms: Vec<RoomMessage>) -> Vec<RoomMessage> {
        for (m, seq) in ms.iter_mut().zip(1..) {
            m.seq = seq;
        }
        ms
    }

    #[test]
    fn the_utility_bot_lists_bots_and_shows_only_a_keys_end() {
        assert!(replies::bots(&[agent("ada", true)]).contains("`/register"));
        let ferm = bot("ferm");
        assert_eq!(
            replies::bots(std::slice::from_ref(&ferm)),
            "Bots in this room:\n@ferm at https://bots.example.com/ferm"
        );
        let done = replies::registered(&ferm, "ck_0123456789abcdef");
        assert!(
            done.contains("…cdef") && !done.contains("0123456789"),
            "{done}"
        );
        assert_eq!(replies::unregistered(&ferm), "Unregistered @ferm.");
    }

    #[test]
    fn mentions_pick_who_answers_else_the_enabled_do() {
        let ps = vec![
            agent("programmer", true),
            agent("Writer", false),
            agent("critic", true),
        ];
        let ids: Vec<ParticipantId> = ps.iter().map(|p| p.id).collect();
        assert_eq!(
            responders("hello all", None, &ps).answering,
            vec![ids[0], ids[2]]
        );
        // A disabled agent receives nothing, even named; the others named still answer.
        assert_eq!(responders("@writer, a poem?", None, &ps).answering, vec![]);
        assert_eq!(
            responders("@writer, a poem?", None, &ps).disabled,
            vec![ids[1]]
        );
        assert_eq!(
            responders("@writer and @critic?", None, &ps).answering,
            vec![ids[2]]
        );
        assert_eq!(
            replies::disabled(&[&ps[1]]),
            "@Writer is disabled and received nothing: enable it to ask it."
        );
        assert_eq!(
            replies::disabled(&[&ps[0], &ps[1]]),
            "@programmer and @Writer are disabled and received nothing: enable them to ask them."
        );
        assert_eq!(
            responders("@critic and @PROGRAMMER: thoughts.", None, &ps).answering,
            vec![ids[0], ids[2]],
            "display order, without regard to case"
        );
        assert_eq!(
            responders("mail me at a@nobody.org", None, &ps).answering,
            vec![ids[0], ids[2]]
        );
        assert_eq!(responders("@critic.", None, &ps).answering, vec![ids[2]]);
        let solo = vec![agent("a", false), agent("b", false)];
        assert_eq!(
            responders("anyone?", None, &solo).answering,
            vec![],
            "solo mode"
        );
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
    fn bots_answer_only_when_tagged_or_replied_to() {
        let ps = vec![agent("ann", true), bot("ferm"), bot("qa")];
        let ids: Vec<ParticipantId> = ps.iter().map(|p| p.id).collect();
        assert_eq!(responders("status?", None, &ps).answering, vec![ids[0]]);
        assert_eq!(
            responders("@ferm status?", None, &ps).answering,
            vec![ids[1]]
        );
        let ferm_said = msg(
            Author::Agent {
                id: ids[1],
                name: "ferm".into(),
            },
            "31 °C",
            true,
        );
        assert_eq!(
            responders("and now?", Some(&ferm_said), &ps).answering,
            vec![ids[1]],
            "a reply asks the author"
        );
        assert_eq!(
            responders("@qa check it", Some(&ferm_said), &ps).answering,
            vec![ids[1], ids[2]],
            "tags and the replied-to author, in display order"
        );
        let person_said = msg(Author::Person, "hi", true);
        assert_eq!(
            responders("more", Some(&person_said), &ps).answering,
            vec![ids[0]]
        );
    }

    #[test]
    fn a_bot_is_sent_the_context_its_threads_and_the_tagged_users() {
        let ps = vec![agent("ann", true), bot("ferm")];
        let (ann, ferm) = (ps[0].id, ps[1].id);
        let said = |id, name: &str, text| {
            msg(
                Author::Agent {
                    id,
                    name: name.into(),
                },
                text,
                true,
            )
        };
        let mut ms = numbered(vec![
            msg(Author::Person, "morning", true),            // 0
            said(ann, "ann", "morning!"),                    // 1
            msg(Author::Person, "@ferm temperature?", true), // 2
            said(ferm, "ferm", "31 °C"),                     // 3: reply to 2
            msg(Author::Person, "left out", false),          // 4
            msg(Author::Person, "is that high?", true),      // 5: reply to 3
            said(ferm, "ferm", "a little"),                  // 6: reply to 5
            msg(Author::Utility, "registered", false),       // 7
            msg(Author::Person, "@ferm and the pH?", true),  // 8: the message
            msg(Author::Person, "later", true),              // 9
        ]);
        ms[2].tagged = vec![ferm];
        ms[3].reply_to = Some(ms[2].id);
        ms[5].reply_to = Some(ms[3].id);
        ms[6].reply_to = Some(ms[5].id);
        ms[8].tagged = vec![ferm, ann];
        let call = bot_call(ferm, &ms[8], &ms, &ps);
        let ids = |v: &[&RoomMessage]| v.iter().map(|m| m.seq).collect::<Vec<_>>();
        assert_eq!(
            ids(&call.context),
            [1, 2, 3, 4, 6, 7],
            "included and spoken only"
        );
        assert_eq!(
            call.conversation.len(),
            1,
            "one thread, rooted at the first ask"
        );
        assert_eq!(call.conversation[0].id, ms[2].id);
        assert_eq!(ids(&call.conversation[0].messages), [3, 4, 6, 7]);
        assert_eq!(call.message.seq, 9);
        let users: Vec<&str> = call.users.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(users, ["ann", "ferm"]);
    }

    #[test]
    fn a_bot_reply_tags_the_original_tags_unless_the_thread_has_them() {
        let ferm = ParticipantId::new();
        let (ann, bob) = (ParticipantId::new(), ParticipantId::new());
        let mut ms = numbered(vec![
            msg(Author::Person, "@ferm @ann @bob look", true),
            msg(Author::Person, "@ferm again", true),
        ]);
        ms[0].tagged = vec![ferm, ann, bob];
        assert_eq!(reply_tags(&ms[0], &ms, ferm), vec![ann, bob]);
        ms[1].tagged = vec![ferm, ann];
        ms[1].reply_to = Some(ms[0].id);
        assert_eq!(
            reply_tags(&ms[1], &ms, ferm),
            vec![],
            "replies to a tagged message"
        );
    }

    #[test]
    fn the_utility_bot_reads_its_commands() {
        assert_eq!(command("hello /register"), None);
        assert_eq!(command("/ 1"), None);
        assert_eq!(command("/42 is a number"), None);
        assert_eq!(
            command(" /register @ada https://b.example/ada Ada  Lovelace"),
            Some(Ok(Command::Register {
                username: "ada".into(),
                endpoint: "https://b.example/ada".into(),
                emulates: Some("Ada Lovelace".into()),
            }))
        );
        assert_eq!(
            command("/register ada https://b.example/ada"),
            Some(Ok(Command::Register {
                username: "ada".into(),
                endpoint: "https://b.example/ada".into(),
                emulates: None,
            }))
        );
        assert!(
            matches!(command("/register ada"), Some(Err(e)) if e.to_string().contains("usage"))
        );
        assert_eq!(command("/BOTS"), Some(Ok(Command::Bots)));
        assert_eq!(
            command("/unregister @ada"),
            Some(Ok(Command::Unregister {
                username: "ada".into()
            }))
        );
        assert!(matches!(command("/unregister"), Some(Err(e)) if e.to_string().contains("usage")));
        assert!(
            matches!(command("/dance now"), Some(Err(e)) if e.to_string().contains("`/dance`"))
        );
    }

    #[test]
    fn names_are_checked_and_the_utility_bots_is_taken() {
        assert_eq!(check_name(" ada.l "), Ok("ada.l"));
        assert!(check_name("9lives").is_err());
        assert!(check_name("two words").is_err());
        assert!(
            check_name("Utility")
                .unwrap_err()
                .to_string()
                .contains("utility bot")
        );
    }

    #[test]
    fn definitions_have_a_name_and_a_text() {
        assert_eq!(
            check_definition(" critic ", " finds flaws "),
            Ok(("critic", "finds flaws"))
        );
        let problems = check_definition("", &"x".repeat(MAX_DEFINITION_CHARS + 1)).unwrap_err();
        let fields: Vec<&str> = problems.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["name", "text"]);
        assert!(problems[1].1.contains("4001"), "{problems:?}");
        assert_eq!(check_definition("x", " ").unwrap_err()[0].0, "text");
        assert_eq!(DefinitionKind::parse("role"), Some(DefinitionKind::Role));
        assert_eq!(DefinitionKind::parse("mood"), None);
    }

    #[test]
    fn messages_have_a_length_limit_in_characters() {
        assert!(check_text("   ").is_err());
        assert!(check_text(&"é".repeat(MAX_MESSAGE_CHARS)).is_ok());
        let long = check_text(&"x".repeat(MAX_MESSAGE_CHARS + 1))
            .unwrap_err()
            .to_string();
        assert!(long.contains("5000") && long.contains("5001"), "{long}");
    }
}
