//! Rooms on PostgreSQL.

use agency_core::room::{Definition, Participant, Room, RoomMessage};
use agency_core::{DefinitionId, ParticipantId, RoomId, RoomMessageId};
use async_trait::async_trait;

use super::{PostgresStore, unique_violation};
use crate::shared::rooms::{
    self, DefinitionRow, ParticipantRow, RoomMessageRow, RoomRow, author_columns, persona_columns,
    speaker_columns, tagged_column,
};
use crate::{Result, RoomStore};

/// Concurrent appends to one room may race for its next seq; the loser takes the one after.
const APPEND_ATTEMPTS: usize = 8;

fn put(p: &Participant) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let (model, bot_endpoint, bot_emulates) = speaker_columns(p);
    let (role, role_id, personality, personality_id) = persona_columns(p);
    sqlx::query(rooms::PUT_PARTICIPANT)
        .bind(p.id.0)
        .bind(p.room.0)
        .bind(&p.name)
        .bind(p.name.to_lowercase())
        .bind(model)
        .bind(role)
        .bind(personality)
        .bind(&p.instructions)
        .bind(p.enabled)
        .bind(p.position)
        .bind(&p.colour)
        .bind(bot_endpoint)
        .bind(bot_emulates)
        .bind(role_id)
        .bind(personality_id)
        .bind(rooms::tools_column(p))
}

#[async_trait]
impl RoomStore for PostgresStore {
    async fn create_room(&self, room: &Room, participants: &[Participant]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(rooms::INSERT_ROOM)
            .bind(room.id.0)
            .bind(&room.owner)
            .bind(&room.name)
            .bind(room.agency.map(|a| a.0))
            .bind(room.created_at)
            .execute(&mut *tx)
            .await?;
        for p in participants {
            match put(p).execute(&mut *tx).await {
                Err(e) if unique_violation(&e) => return Err(rooms::name_taken(p)),
                other => other?,
            };
        }
        tx.commit().await?;
        Ok(())
    }

    async fn room(&self, id: RoomId) -> Result<Option<Room>> {
        let row: Option<RoomRow> = sqlx::query_as(rooms::ROOM)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn rooms(&self, owner: &str) -> Result<Vec<Room>> {
        let rows: Vec<RoomRow> = sqlx::query_as(rooms::ROOMS_OF_OWNER)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn delete_room(&self, id: RoomId) -> Result<bool> {
        let done = sqlx::query(rooms::DELETE_ROOM)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn put_participant(&self, p: &Participant) -> Result<()> {
        match put(p).execute(&self.pool).await {
            Err(e) if unique_violation(&e) => Err(rooms::name_taken(p)),
            other => other.map(|_| ()).map_err(Into::into),
        }
    }

    async fn delete_participant(&self, room: RoomId, id: ParticipantId) -> Result<bool> {
        let done = sqlx::query(rooms::DELETE_PARTICIPANT)
            .bind(room.0)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn participants(&self, room: RoomId) -> Result<Vec<Participant>> {
        let rows: Vec<ParticipantRow> = sqlx::query_as(rooms::PARTICIPANTS)
            .bind(room.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn add_room_message(&self, m: RoomMessage) -> Result<RoomMessage> {
        self.add_message(m, None).await
    }

    async fn start_answers(
        &self,
        room: RoomId,
        asked: RoomMessageId,
        agents: &[ParticipantId],
        process: uuid::Uuid,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for agent in agents {
            sqlx::query(rooms::START_ANSWER)
                .bind(room.0)
                .bind(asked.0)
                .bind(agent.0)
                .bind(process)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn add_room_answer(&self, m: RoomMessage, asked: RoomMessageId) -> Result<RoomMessage> {
        self.add_message(m, Some(asked)).await
    }

    async fn interrupted_answers(
        &self,
        except: uuid::Uuid,
        unseen_since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(RoomId, RoomMessageId, ParticipantId)>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, uuid::Uuid)> =
            sqlx::query_as(rooms::INTERRUPTED_ANSWERS)
                .bind(except)
                .bind(unseen_since)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(r, m, p)| (RoomId(r), RoomMessageId(m), ParticipantId(p)))
            .collect())
    }

    async fn set_included(&self, room: RoomId, id: RoomMessageId, included: bool) -> Result<bool> {
        let done = sqlx::query(rooms::SET_INCLUDED)
            .bind(included)
            .bind(room.0)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn room_messages(&self, room: RoomId) -> Result<Vec<RoomMessage>> {
        let rows: Vec<RoomMessageRow> = sqlx::query_as(rooms::MESSAGES)
            .bind(room.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn room_message(&self, room: RoomId, id: RoomMessageId) -> Result<Option<RoomMessage>> {
        let row: Option<RoomMessageRow> = sqlx::query_as(rooms::MESSAGE)
            .bind(room.0)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn put_definition(&self, d: &Definition) -> Result<()> {
        let put = sqlx::query(rooms::PUT_DEFINITION)
            .bind(d.id.0)
            .bind(&d.owner)
            .bind(d.kind.as_str())
            .bind(&d.name)
            .bind(d.name.to_lowercase())
            .bind(&d.text)
            .bind(d.created_at)
            .execute(&self.pool)
            .await;
        match put {
            Err(e) if unique_violation(&e) => Err(rooms::definition_taken(d)),
            other => other.map(|_| ()).map_err(Into::into),
        }
    }

    async fn definition(&self, id: DefinitionId) -> Result<Option<Definition>> {
        let row: Option<DefinitionRow> = sqlx::query_as(rooms::DEFINITION)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn definitions(&self, owner: &str) -> Result<Vec<Definition>> {
        let rows: Vec<DefinitionRow> = sqlx::query_as(rooms::DEFINITIONS)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn delete_definition(&self, id: DefinitionId) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(rooms::KEEP_ROLE_TEXT)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        sqlx::query(rooms::KEEP_PERSONALITY_TEXT)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query(rooms::DELETE_DEFINITION)
            .bind(id.0)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        tx.commit().await?;
        Ok(gone)
    }
}

impl PostgresStore {
    /// Appends `m` as the room's next message (its place taken in the statement, taken again
    /// when another took it first), and with `answering` clears its author's record of
    /// answering that message in the same transaction.
    async fn add_message(
        &self,
        mut m: RoomMessage,
        answering: Option<RoomMessageId>,
    ) -> Result<RoomMessage> {
        let (kind, participant, name) = author_columns(&m.author);
        let tagged = tagged_column(&m.tagged);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut tx = self.pool.begin().await?;
            let added = sqlx::query_scalar(rooms::ADD_MESSAGE)
                .bind(m.room.0)
                .bind(m.id.0)
                .bind(kind)
                .bind(participant)
                .bind(name)
                .bind(&m.text)
                .bind(m.included)
                .bind(m.created_at)
                .bind(m.reply_to.map(|r| r.0))
                .bind(&tagged)
                .fetch_one(&mut *tx)
                .await;
            let seq = match added {
                Ok(seq) => seq,
                Err(e) if unique_violation(&e) && attempt < APPEND_ATTEMPTS => continue,
                Err(e) => return Err(e.into()),
            };
            if let (Some(asked), Some(agent)) = (answering, m.participant()) {
                sqlx::query(rooms::END_ANSWER)
                    .bind(m.room.0)
                    .bind(asked.0)
                    .bind(agent.0)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            m.seq = seq;
            return Ok(m);
        }
    }
}
