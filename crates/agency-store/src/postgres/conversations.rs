//! Conversations, their messages and their turns on PostgreSQL.

use agency_core::{AgencyId, Conversation, ConversationId, Message, TurnId, TurnRecord};
use async_trait::async_trait;

use super::PostgresStore;
use crate::shared::conversations::{self, ConversationRow, MessageRow, TurnRow};
use crate::{ConversationStore, Result, TurnLock, Write};

#[async_trait]
impl ConversationStore for PostgresStore {
    async fn write(&self, write: Write) -> Result<Write> {
        super::group_commit::write(&self.commits, write).await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        let row: Option<ConversationRow> = sqlx::query_as(conversations::CONVERSATION)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_conversations(&self, agency: AgencyId) -> Result<Vec<Conversation>> {
        let rows: Vec<ConversationRow> = sqlx::query_as(conversations::CONVERSATIONS_OF_AGENCY)
            .bind(agency.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn messages(&self, conversation: ConversationId) -> Result<Vec<Message>> {
        let rows: Vec<MessageRow> = sqlx::query_as(conversations::MESSAGES_OF_CONVERSATION)
            .bind(conversation.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn turn_messages(
        &self,
        conversation: ConversationId,
        turn: TurnId,
    ) -> Result<Vec<Message>> {
        let rows: Vec<MessageRow> = sqlx::query_as(conversations::MESSAGES_OF_TURN)
            .bind(conversation.0)
            .bind(turn.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn messages_through(
        &self,
        conversation: ConversationId,
        number: u32,
    ) -> Result<Vec<Message>> {
        let rows: Vec<MessageRow> = sqlx::query_as(conversations::MESSAGES_THROUGH_TURN)
            .bind(conversation.0)
            .bind(i64::from(number))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn turns(&self, conversation: ConversationId) -> Result<Vec<TurnRecord>> {
        let rows: Vec<TurnRow> = sqlx::query_as(conversations::TURNS_OF_CONVERSATION)
            .bind(conversation.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn last_turn(&self, conversation: ConversationId) -> Result<Option<TurnRecord>> {
        let row: Option<TurnRow> = sqlx::query_as(conversations::LAST_TURN)
            .bind(conversation.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn messages_by_id(
        &self,
        conversation: ConversationId,
        ids: &[agency_core::MessageId],
    ) -> Result<Vec<Message>> {
        let ids: Vec<uuid::Uuid> = ids.iter().map(|id| id.0).collect();
        let rows: Vec<MessageRow> = sqlx::query_as(conversations::MESSAGES_BY_IDS)
            .bind(conversation.0)
            .bind(ids)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn lock_turn(
        &self,
        conversation: ConversationId,
        holder: uuid::Uuid,
        lease: std::time::Duration,
    ) -> Result<TurnLock> {
        let (taken, next_seq): (bool, i64) = sqlx::query_as(LOCK_TURN)
            .bind(conversation.0)
            .bind(holder)
            .bind(lease.as_secs_f64())
            .fetch_one(&self.pool)
            .await?;
        Ok(if taken {
            TurnLock::Taken { next_seq }
        } else {
            TurnLock::Held
        })
    }

    async fn unlock_turn(&self, conversation: ConversationId, holder: uuid::Uuid) -> Result<()> {
        sqlx::query("DELETE FROM turn_locks WHERE conversation_id = $1 AND holder = $2")
            .bind(conversation.0)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Takes or extends a turn lock, and reads the conversation's next `seq` in the same round
/// trip. The statement's snapshot begins after the previous holder's writes committed (it
/// wrote them before letting go).
const LOCK_TURN: &str = "WITH taken AS ( \
     INSERT INTO turn_locks (conversation_id, holder, expires_at) \
     VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3)) \
     ON CONFLICT (conversation_id) DO UPDATE SET holder = excluded.holder, \
     expires_at = excluded.expires_at \
     WHERE turn_locks.holder = excluded.holder OR turn_locks.expires_at < clock_timestamp() \
     RETURNING 1) \
     SELECT EXISTS (SELECT 1 FROM taken), \
     (SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE conversation_id = $1)";
