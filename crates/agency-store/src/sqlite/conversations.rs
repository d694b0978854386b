//! Conversations, their messages and their turns on SQLite; their writes are committed in
//! groups (`group_commit.rs`).

use agency_core::{AgencyId, Conversation, ConversationId, Message, TurnId, TurnRecord};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::SqliteStore;
use crate::shared::conversations::{self, ConversationRow, MessageRow, TurnRow};
use crate::{ConversationStore, Result, TurnLock, Write};

/// Writes the rows of `w` in the caller's transaction.
pub(super) fn apply(conn: &Connection, w: &Write) -> rusqlite::Result<()> {
    if let Some(c) = &w.conversation {
        conn.prepare_cached(conversations::INSERT_CONVERSATION)?
            .execute(params![c.id.0, c.agency_id.0, c.version, c.created_at])?;
    }
    if !w.messages.is_empty() {
        let mut insert = conn.prepare_cached(conversations::INSERT_MESSAGE)?;
        for m in &w.messages {
            let r = MessageRow::from(m);
            let prompt = conversations::prompt_hash(m);
            if let Some(hash) = &prompt {
                conn.prepare_cached(conversations::INSERT_PROMPT)?
                    .execute(params![hash, m.text, r.conversation_id])?;
            }
            insert.execute(params![
                r.id,
                r.conversation_id,
                r.turn_id,
                r.seq,
                r.agent_id,
                r.kind,
                r.linked_message_id,
                r.from_agent,
                r.to_agent,
                r.text,
                r.prompt_tokens,
                r.completion_tokens,
                r.latency_ms,
                r.included,
                r.created_at,
                m.role().as_str(),
                r.tool,
                r.images,
                prompt
            ])?;
        }
    }
    for t in &w.turns {
        let r = TurnRow::from(t);
        conn.prepare_cached(conversations::SAVE_TURN)?
            .execute(params![
                r.id,
                r.conversation_id,
                r.number,
                r.started_at,
                r.finished_at,
                r.stopped_by,
                r.hops,
                r.prompt_tokens,
                r.completion_tokens,
                r.error,
                r.cost_pico,
                r.face
            ])?;
    }
    if let Some(t) = &w.thread {
        conn.prepare_cached(conversations::PUT_API_THREAD)?
            .execute(params![t.key, t.hash, t.conversation.0, t.turn])?;
    }
    Ok(())
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn write(&self, write: Write) -> Result<Write> {
        self.write_in_group(write).await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        let row = self.with(|conn| {
            conn.prepare_cached(conversations::CONVERSATION)?
                .query_row([id.0], conversation_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_conversations(&self, agency: AgencyId) -> Result<Vec<Conversation>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(conversations::CONVERSATIONS_OF_AGENCY)?
                .query_map([agency.0], conversation_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn messages(&self, conversation: ConversationId) -> Result<Vec<Message>> {
        let rows = self.with_long(|conn| {
            conn.prepare_cached(conversations::MESSAGES_OF_CONVERSATION)?
                .query_map([conversation.0], message_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn turn_messages(
        &self,
        conversation: ConversationId,
        turn: TurnId,
    ) -> Result<Vec<Message>> {
        let rows = self.with_long(|conn| {
            conn.prepare_cached(conversations::MESSAGES_OF_TURN)?
                .query_map([conversation.0, turn.0], message_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn messages_through(
        &self,
        conversation: ConversationId,
        number: u32,
    ) -> Result<Vec<Message>> {
        let rows = self.with_long(|conn| {
            conn.prepare_cached(conversations::MESSAGES_THROUGH_TURN)?
                .query_map(params![conversation.0, number], message_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn turns(&self, conversation: ConversationId) -> Result<Vec<TurnRecord>> {
        let rows = self.with(|conn| {
            conn.prepare_cached(conversations::TURNS_OF_CONVERSATION)?
                .query_map([conversation.0], turn_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn last_turn(&self, conversation: ConversationId) -> Result<Option<TurnRecord>> {
        let row = self.with(|conn| {
            conn.prepare_cached(conversations::LAST_TURN)?
                .query_row([conversation.0], turn_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn messages_by_id(
        &self,
        conversation: ConversationId,
        ids: &[agency_core::MessageId],
    ) -> Result<Vec<Message>> {
        let rows = self.with(|conn| {
            let mut read = conn.prepare_cached(conversations::MESSAGE_BY_ID)?;
            let mut rows = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(row) = read
                    .query_row([conversation.0, id.0], message_row)
                    .optional()?
                {
                    rows.push(row);
                }
            }
            Ok(rows)
        })?;
        let mut out = rows
            .into_iter()
            .map(TryInto::try_into)
            .collect::<Result<Vec<Message>>>()?;
        out.sort_by_key(|m| m.seq);
        Ok(out)
    }

    async fn lock_turn(
        &self,
        conversation: ConversationId,
        holder: uuid::Uuid,
        lease: std::time::Duration,
    ) -> Result<TurnLock> {
        {
            let mut locks = match self.turn_locks.lock() {
                Ok(l) => l,
                Err(poisoned) => poisoned.into_inner(),
            };
            let now = std::time::Instant::now();
            match locks.get(&conversation) {
                Some((other, until)) if *other != holder && *until > now => {
                    return Ok(TurnLock::Held);
                }
                _ => {
                    locks.insert(conversation, (holder, now + lease));
                }
            }
        }
        let next_seq = self.with(|conn| {
            conn.prepare_cached(conversations::NEXT_SEQ)?
                .query_row([conversation.0], |r| r.get(0))
        })?;
        Ok(TurnLock::Taken { next_seq })
    }

    async fn unlock_turn(&self, conversation: ConversationId, holder: uuid::Uuid) -> Result<()> {
        let mut locks = match self.turn_locks.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        if locks.get(&conversation).is_some_and(|(h, _)| *h == holder) {
            locks.remove(&conversation);
        }
        Ok(())
    }
}

fn conversation_row(r: &Row<'_>) -> rusqlite::Result<ConversationRow> {
    Ok(ConversationRow {
        id: r.get("id")?,
        agency_id: r.get("agency_id")?,
        version: r.get("version")?,
        created_at: r.get("created_at")?,
    })
}

/// A row of `message_columns!()`, by position (by name, every field is a scan of the names).
fn message_row(r: &Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        turn_id: r.get(2)?,
        seq: r.get(3)?,
        agent_id: r.get(4)?,
        kind: r.get(5)?,
        linked_message_id: r.get(6)?,
        from_agent: r.get(7)?,
        to_agent: r.get(8)?,
        text: r.get(9)?,
        prompt_tokens: r.get(10)?,
        completion_tokens: r.get(11)?,
        latency_ms: r.get(12)?,
        included: r.get(13)?,
        created_at: super::timestamp(r, 14)?,
        tool: r.get(16)?,
        images: r.get(17)?,
    })
}

/// A row of `turn_columns!()`, by position.
fn turn_row(r: &Row<'_>) -> rusqlite::Result<TurnRow> {
    Ok(TurnRow {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        number: r.get(2)?,
        started_at: super::timestamp(r, 3)?,
        finished_at: r.get(4)?,
        stopped_by: r.get(5)?,
        hops: r.get(6)?,
        prompt_tokens: r.get(7)?,
        completion_tokens: r.get(8)?,
        error: r.get(9)?,
        cost_pico: r.get(10)?,
        face: r.get(11)?,
    })
}
