//! Conversations, their messages, their turns and the transcript hashes that continue them:
//! the SQL and the rows.

use agency_core::{
    AgencyId, Conversation, ConversationId, Message, MessageId, MessageKind, StopReason, ToolCall,
    ToolPart, ToolResult, TurnId, TurnRecord, Usage,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{corrupt, opt_agent, u32_of};
use crate::StoreError;

/// The columns a message is written with.
macro_rules! message_columns {
    () => {
        "id, conversation_id, turn_id, seq, agent_id, kind, linked_message_id, from_agent, \
         to_agent, text, prompt_tokens, completion_tokens, latency_ms, included, created_at, role, tool, \
         images, prompt"
    };
}
/// The columns a message is read with, in [`MessageRow`]'s order: a system prompt's text from
/// `prompts` (see [`prompt_hash`]). Every read names its conversation as `$1`.
macro_rules! message_read_columns {
    () => {
        "id, conversation_id, turn_id, seq, agent_id, kind, linked_message_id, from_agent, \
         to_agent, CASE WHEN prompt IS NULL THEN text ELSE (SELECT p.text FROM prompts p \
         JOIN conversations c ON c.agency_id = p.agency_id WHERE c.id = $1 AND p.hash = prompt) \
         END AS text, prompt_tokens, completion_tokens, latency_ms, included, created_at, role, \
         tool, images"
    };
}
macro_rules! turn_columns {
    () => {
        "id, conversation_id, number, started_at, finished_at, stopped_by, hops, prompt_tokens, \
         completion_tokens, error, cost_pico, face"
    };
}
pub(crate) const INSERT_CONVERSATION: &str =
    "INSERT INTO conversations (id, agency_id, version, created_at) VALUES ($1, $2, $3, $4)";
pub(crate) const CONVERSATION: &str =
    "SELECT id, agency_id, version, created_at FROM conversations WHERE id = $1";
pub(crate) const CONVERSATIONS_OF_AGENCY: &str = "SELECT id, agency_id, version, created_at FROM conversations \
     WHERE agency_id = $1 ORDER BY created_at DESC, id DESC";
pub(crate) const INSERT_MESSAGE: &str = concat!(
    "INSERT INTO messages (",
    message_columns!(),
    ") \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
     $19)"
);
/// A system prompt's text, once per agency (SQLite: the agency read from the conversation,
/// written in the same transaction).
pub(crate) const INSERT_PROMPT: &str = "INSERT INTO prompts (agency_id, hash, text) \
     SELECT agency_id, $1, $2 FROM conversations WHERE id = $3 ON CONFLICT DO NOTHING";
/// Prompts' texts as arrays (PostgreSQL): agencies, hashes, texts.
pub(crate) const INSERT_PROMPTS: &str = "INSERT INTO prompts (agency_id, hash, text) \
     SELECT * FROM UNNEST($1::uuid[], $2::bytea[], $3::text[]) ON CONFLICT DO NOTHING";
/// The agencies of conversations (PostgreSQL: those a write of prompts names without creating).
pub(crate) const AGENCIES_OF_CONVERSATIONS: &str =
    "SELECT id, agency_id FROM conversations WHERE id = ANY($1)";
pub(crate) const MESSAGES_OF_CONVERSATION: &str = concat!(
    "SELECT ",
    message_read_columns!(),
    " FROM messages WHERE conversation_id = $1 ORDER BY seq"
);
pub(crate) const MESSAGE_BY_ID: &str = concat!(
    "SELECT ",
    message_read_columns!(),
    " FROM messages WHERE conversation_id = $1 AND id = $2"
);
/// Messages by id in one round trip: PostgreSQL's alone (an array parameter); SQLite reads
/// [`MESSAGE_BY_ID`] once per id.
pub(crate) const MESSAGES_BY_IDS: &str = concat!(
    "SELECT ",
    message_read_columns!(),
    " FROM messages WHERE conversation_id = $1 AND id = ANY($2) ORDER BY seq"
);
pub(crate) const MESSAGES_OF_TURN: &str = concat!(
    "SELECT ",
    message_read_columns!(),
    " FROM messages WHERE conversation_id = $1 AND turn_id = $2 ORDER BY seq"
);
pub(crate) const MESSAGES_THROUGH_TURN: &str = concat!(
    "SELECT ",
    message_read_columns!(),
    " FROM messages WHERE conversation_id = $1 AND (turn_id IS NULL OR turn_id IN \
     (SELECT id FROM turns WHERE conversation_id = $1 AND number <= $2)) ORDER BY seq"
);
macro_rules! save_turn_on_conflict {
    () => {
        " ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, \
         stopped_by = excluded.stopped_by, hops = excluded.hops, \
         prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, \
         error = excluded.error, cost_pico = excluded.cost_pico, face = excluded.face"
    };
}
pub(crate) const SAVE_TURN: &str = concat!(
    "INSERT INTO turns (",
    turn_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    save_turn_on_conflict!()
);
/// [`SAVE_TURN`] in parts, for many rows: the head, one `(...)` of 11 values per row, the tail.
pub(crate) const TURNS_OF_CONVERSATION: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE conversation_id = $1 ORDER BY number"
);
pub(crate) const LAST_TURN: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE conversation_id = $1 ORDER BY number DESC LIMIT 1"
);
/// The `seq` the conversation's next message gets.
pub(crate) const NEXT_SEQ: &str =
    "SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE conversation_id = $1";
/// A transcript hash names one conversation, the latest to reach it; a conversation keeps the
/// hash of every answered turn.
macro_rules! put_api_thread_on_conflict {
    () => {
        " ON CONFLICT (key_id, hash) DO UPDATE SET conversation_id = excluded.conversation_id, \
         turn_number = excluded.turn_number"
    };
}
pub(crate) const PUT_API_THREAD: &str = concat!(
    "INSERT INTO api_threads (key_id, hash, conversation_id, turn_number) \
     VALUES ($1, $2, $3, $4)",
    put_api_thread_on_conflict!()
);

/// Messages as arrays, one per column (PostgreSQL): `$1` to `$19`.
macro_rules! insert_message_rows {
    () => {
        concat!(
            "INSERT INTO messages (",
            message_columns!(),
            ") SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::int8[], \
             $5::int8[], $6::text[], $7::uuid[], $8::int8[], $9::int8[], $10::text[], \
             $11::int8[], $12::int8[], $13::int8[], $14::bool[], $15::timestamptz[], \
             $16::text[], $17::text[], $18::text[], $19::bytea[])"
        )
    };
}
/// PostgreSQL's group commit (`postgres/group_commit.rs`) of messages alone, the usual hop.
/// Its text never changes with the number of rows, so it is parsed and planned once per
/// connection.
pub(crate) const COMMIT_MESSAGES: &str = insert_message_rows!();
/// The same with conversations, turn records and transcripts too: each table's rows as arrays.
/// Atomic by itself (its parts are `WITH` clauses, each run once; foreign keys are checked at
/// its end); a part with no rows inserts nothing.
pub(crate) const COMMIT_GROUP: &str = concat!(
    "WITH m AS (",
    insert_message_rows!(),
    "), c AS (INSERT INTO conversations (id, agency_id, version, created_at) \
     SELECT * FROM UNNEST($20::uuid[], $21::uuid[], $22::int8[], $23::timestamptz[])), \
     t AS (INSERT INTO turns (",
    turn_columns!(),
    ") SELECT * FROM UNNEST($24::uuid[], $25::uuid[], $26::int8[], $27::timestamptz[], \
     $28::timestamptz[], $29::text[], $30::int8[], $31::int8[], $32::int8[], $33::text[], \
     $34::int8[], $35::text[])",
    save_turn_on_conflict!(),
    "), a AS (INSERT INTO api_threads (key_id, hash, conversation_id, turn_number) \
     SELECT * FROM UNNEST($36::uuid[], $37::text[], $38::uuid[], $39::int8[])",
    put_api_thread_on_conflict!(),
    ") SELECT 1"
);

#[derive(sqlx::FromRow)]
pub(crate) struct ConversationRow {
    pub id: Uuid,
    pub agency_id: Uuid,
    pub version: Option<i64>,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<ConversationRow> for Conversation {
    type Error = StoreError;
    fn try_from(r: ConversationRow) -> Result<Self, StoreError> {
        Ok(Conversation {
            id: ConversationId(r.id),
            agency_id: AgencyId(r.agency_id),
            version: r.version.map(|v| u32_of(v, "version")).transpose()?,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct MessageRow {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub turn_id: Option<Uuid>,
    pub seq: i64,
    pub agent_id: Option<i64>,
    pub kind: String,
    pub linked_message_id: Option<Uuid>,
    pub from_agent: Option<i64>,
    pub to_agent: Option<i64>,
    pub text: String,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub latency_ms: Option<i64>,
    pub included: bool,
    pub created_at: DateTime<Utc>,
    /// [`ToolPart`] as JSON.
    pub tool: Option<String>,
    /// The images' URLs as a JSON array; `NULL` for none.
    pub images: Option<String>,
}

impl From<&Message> for MessageRow {
    fn from(m: &Message) -> Self {
        Self {
            id: m.id.0,
            conversation_id: m.conversation_id.0,
            turn_id: m.turn_id.map(|t| t.0),
            seq: m.seq,
            agent_id: m.agent.map(|a| i64::from(a.get())),
            kind: m.kind.as_str().to_string(),
            linked_message_id: m.linked.map(|l| l.0),
            from_agent: m.from.map(|a| i64::from(a.get())),
            to_agent: m.to.map(|a| i64::from(a.get())),
            // A system prompt's text is kept in `prompts` (see [`prompt_hash`]).
            text: if m.kind == MessageKind::System {
                String::new()
            } else {
                m.text.clone()
            },
            prompt_tokens: m.usage.map(|u| i64::from(u.prompt_tokens)),
            completion_tokens: m.usage.map(|u| i64::from(u.completion_tokens)),
            latency_ms: m.latency_ms.map(i64::from),
            included: m.included,
            created_at: m.created_at,
            tool: m.tool.as_ref().map(tool_json),
            images: (!m.images.is_empty())
                .then(|| serde_json::Value::from(m.images.clone()).to_string()),
        }
    }
}

/// A system prompt's key in `prompts`: the SHA-256 of its text (its row's `prompt`); none for
/// other messages, which keep their text.
///
/// An agency's few prompts open every one of its conversations, so their hashes are remembered
/// (a pure function's results, shared by every store of the process): hashing each again cost
/// a new conversation more than the rest of its first write (issue 40). The memory is bounded
/// by its texts' size and starts over when full.
pub(crate) fn prompt_hash(m: &Message) -> Option<[u8; 32]> {
    use sha2::Digest;
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex, PoisonError};
    /// At most this many bytes of prompts' texts are remembered.
    const REMEMBERED: usize = 4 << 20;
    /// The hashes remembered, and their texts' bytes.
    #[derive(Default)]
    struct Remembered {
        hashes: HashMap<Box<str>, [u8; 32]>,
        bytes: usize,
    }
    static HASHES: LazyLock<Mutex<Remembered>> = LazyLock::new(Mutex::default);
    if m.kind != MessageKind::System {
        return None;
    }
    let mut guard = HASHES.lock().unwrap_or_else(PoisonError::into_inner);
    let Remembered { hashes, bytes } = &mut *guard;
    if let Some(hash) = hashes.get(m.text.as_str()) {
        return Some(*hash);
    }
    let hash: [u8; 32] = sha2::Sha256::digest(m.text.as_bytes()).into();
    if m.text.len() <= REMEMBERED {
        if *bytes + m.text.len() > REMEMBERED {
            hashes.clear();
            *bytes = 0;
        }
        *bytes += m.text.len();
        hashes.insert(m.text.as_str().into(), hash);
    }
    Some(hash)
}

/// A message's tool part as stored: `{"calls": [{"id", "name", "arguments"}]}` or
/// `{"result": {"call_id", "name", "is_error"}}`.
fn tool_json(part: &ToolPart) -> String {
    let value = match part {
        ToolPart::Calls(calls) => serde_json::json!({
            "calls": calls
                .iter()
                .map(|c| serde_json::json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
                .collect::<Vec<_>>()
        }),
        ToolPart::Result(r) => serde_json::json!({
            "result": {"call_id": r.call_id, "name": r.name, "is_error": r.is_error}
        }),
    };
    value.to_string()
}

fn tool_of(json: &str) -> Result<ToolPart, StoreError> {
    let bad = || corrupt(json);
    let v: serde_json::Value = serde_json::from_str(json).map_err(|_| bad())?;
    let text = |v: &serde_json::Value, k: &str| v[k].as_str().map(str::to_string).ok_or_else(bad);
    if let Some(calls) = v["calls"].as_array() {
        let calls = calls
            .iter()
            .map(|c| {
                Ok(ToolCall {
                    id: text(c, "id")?,
                    name: text(c, "name")?,
                    arguments: text(c, "arguments")?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        return Ok(ToolPart::Calls(calls));
    }
    let r = &v["result"];
    Ok(ToolPart::Result(ToolResult {
        call_id: text(r, "call_id")?,
        name: text(r, "name")?,
        is_error: r["is_error"].as_bool().ok_or_else(bad)?,
    }))
}

impl TryFrom<MessageRow> for Message {
    type Error = StoreError;
    fn try_from(r: MessageRow) -> Result<Self, StoreError> {
        let usage = match (r.prompt_tokens, r.completion_tokens) {
            (Some(p), Some(c)) => Some(Usage {
                prompt_tokens: u32_of(p, "prompt_tokens")?,
                completion_tokens: u32_of(c, "completion_tokens")?,
            }),
            _ => None,
        };
        Ok(Message {
            images: match r.images.as_deref() {
                None => Vec::new(),
                Some(json) => serde_json::from_str(json).map_err(|_| corrupt(json))?,
            },
            id: MessageId(r.id),
            conversation_id: ConversationId(r.conversation_id),
            turn_id: r.turn_id.map(TurnId),
            seq: r.seq,
            agent: opt_agent(r.agent_id)?,
            kind: MessageKind::parse(&r.kind).ok_or_else(|| corrupt(&r.kind))?,
            linked: r.linked_message_id.map(MessageId),
            from: opt_agent(r.from_agent)?,
            to: opt_agent(r.to_agent)?,
            text: r.text,
            tool: r.tool.as_deref().map(tool_of).transpose()?,
            usage,
            latency_ms: r.latency_ms.map(|l| u32_of(l, "latency_ms")).transpose()?,
            included: r.included,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct TurnRow {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub number: i64,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub stopped_by: Option<String>,
    pub hops: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub error: Option<String>,
    pub cost_pico: Option<i64>,
    pub face: Option<String>,
}

impl From<&TurnRecord> for TurnRow {
    fn from(t: &TurnRecord) -> Self {
        Self {
            id: t.id.0,
            conversation_id: t.conversation_id.0,
            number: i64::from(t.number),
            started_at: t.started_at,
            finished_at: t.finished_at,
            stopped_by: t.stopped_by.map(|s| s.as_str().to_string()),
            hops: i64::from(t.hops),
            prompt_tokens: i64::from(t.usage.prompt_tokens),
            completion_tokens: i64::from(t.usage.completion_tokens),
            error: t.error.clone(),
            cost_pico: t.cost.map(|c| i64::try_from(c.0).unwrap_or(i64::MAX)),
            face: t.face.map(|f| f.as_str().to_string()),
        }
    }
}

impl TryFrom<TurnRow> for TurnRecord {
    type Error = StoreError;
    fn try_from(r: TurnRow) -> Result<Self, StoreError> {
        Ok(TurnRecord {
            id: TurnId(r.id),
            conversation_id: ConversationId(r.conversation_id),
            number: u32_of(r.number, "turn number")?,
            started_at: r.started_at,
            finished_at: r.finished_at,
            stopped_by: r
                .stopped_by
                .map(|s| StopReason::parse(&s).ok_or_else(|| corrupt(&s)))
                .transpose()?,
            hops: u32_of(r.hops, "hops")?,
            usage: Usage {
                prompt_tokens: u32_of(r.prompt_tokens, "prompt_tokens")?,
                completion_tokens: u32_of(r.completion_tokens, "completion_tokens")?,
            },
            cost: r
                .cost_pico
                .map(|c| {
                    u64::try_from(c)
                        .map(agency_core::Cost)
                        .map_err(|_| corrupt(c))
                })
                .transpose()?,
            error: r.error,
            // A face this program does not know (a newer one's) reads as none.
            face: r.face.as_deref().and_then(agency_core::Face::parse),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    fn message(kind: MessageKind, text: &str) -> Message {
        Message {
            id: MessageId(Uuid::nil()),
            conversation_id: ConversationId(Uuid::nil()),
            turn_id: None,
            seq: 0,
            agent: None,
            kind,
            linked: None,
            from: None,
            to: None,
            text: text.to_string(),
            tool: None,
            images: Vec::new(),
            usage: None,
            latency_ms: None,
            included: true,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_remembered_prompt_hash_is_its_texts_sha256() {
        for text in [
            "You are the manager.",
            "You are the writer.",
            "You are the manager.",
        ] {
            let expected: [u8; 32] = sha2::Sha256::digest(text.as_bytes()).into();
            let m = message(MessageKind::System, text);
            assert_eq!(prompt_hash(&m), Some(expected), "{text}");
            assert_eq!(prompt_hash(&m), Some(expected), "{text}, remembered");
        }
        assert_eq!(prompt_hash(&message(MessageKind::Input, "hello")), None);
    }
}
