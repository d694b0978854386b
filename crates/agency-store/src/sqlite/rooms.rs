//! Rooms on SQLite.

use agency_core::room::{Definition, Participant, Room, RoomMessage};
use agency_core::{DefinitionId, ParticipantId, RoomId, RoomMessageId};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{SqliteStore, unique_violation};
use crate::shared::rooms::{
    self, DefinitionRow, ParticipantRow, RoomMessageRow, RoomRow, author_columns, persona_columns,
    speaker_columns, tagged_column, tools_column,
};
use crate::{Result, RoomStore, StoreError};

fn put(conn: &Connection, p: &Participant) -> rusqlite::Result<usize> {
    let (model, bot_endpoint, bot_emulates) = speaker_columns(p);
    let (role, role_id, personality, personality_id) = persona_columns(p);
    conn.prepare_cached(rooms::PUT_PARTICIPANT)?
        .execute(params![
            p.id.0,
            p.room.0,
            p.name,
            p.name.to_lowercase(),
            model,
            role,
            personality,
            p.instructions,
            p.enabled,
            p.position,
            p.colour,
            bot_endpoint,
            bot_emulates,
            role_id,
            personality_id,
            tools_column(p)
        ])
}

#[async_trait]
impl RoomStore for SqliteStore {
    async fn create_room(&self, room: &Room, participants: &[Participant]) -> Result<()> {
        let made = self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                rooms::INSERT_ROOM,
                params![
                    room.id.0,
                    room.owner,
                    room.name,
                    room.agency.map(|a| a.0),
                    room.created_at
                ],
            )?;
            for p in participants {
                put(&tx, p)?;
            }
            tx.commit()
        });
        match (made, participants.first()) {
            (Err(StoreError::Sqlite(e)), Some(p)) if unique_violation(&e) => {
                Err(rooms::name_taken(p))
            }
            (other, _) => other,
        }
    }

    async fn room(&self, id: RoomId) -> Result<Option<Room>> {
        let row: Option<RoomRow> = self.with(|conn| {
            conn.prepare_cached(rooms::ROOM)?
                .query_row([id.0], room_row)
                .optional()
        })?;
        Ok(row.map(Into::into))
    }

    async fn rooms(&self, owner: &str) -> Result<Vec<Room>> {
        let rows: Vec<RoomRow> = self.with(|conn| {
            conn.prepare_cached(rooms::ROOMS_OF_OWNER)?
                .query_map([owner], room_row)?
                .collect()
        })?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn delete_room(&self, id: RoomId) -> Result<bool> {
        self.with(|conn| Ok(conn.execute(rooms::DELETE_ROOM, [id.0])? > 0))
    }

    async fn put_participant(&self, p: &Participant) -> Result<()> {
        match self.with(|conn| put(conn, p)) {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(rooms::name_taken(p)),
            other => other.map(|_| ()),
        }
    }

    async fn delete_participant(&self, room: RoomId, id: ParticipantId) -> Result<bool> {
        self.with(|conn| Ok(conn.execute(rooms::DELETE_PARTICIPANT, params![room.0, id.0])? > 0))
    }

    async fn participants(&self, room: RoomId) -> Result<Vec<Participant>> {
        let rows: Vec<ParticipantRow> = self.with(|conn| {
            conn.prepare_cached(rooms::PARTICIPANTS)?
                .query_map([room.0], participant_row)?
                .collect()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn add_room_message(&self, mut m: RoomMessage) -> Result<RoomMessage> {
        m.seq = self.with(|conn| add_message(conn, &m))?;
        Ok(m)
    }

    async fn start_answers(
        &self,
        room: RoomId,
        asked: RoomMessageId,
        agents: &[ParticipantId],
        process: uuid::Uuid,
    ) -> Result<()> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            for agent in agents {
                tx.execute(
                    rooms::START_ANSWER,
                    params![room.0, asked.0, agent.0, process],
                )?;
            }
            tx.commit()
        })
    }

    async fn add_room_answer(
        &self,
        mut m: RoomMessage,
        asked: RoomMessageId,
    ) -> Result<RoomMessage> {
        m.seq = self.with(|conn| {
            let tx = conn.transaction()?;
            let seq = add_message(&tx, &m)?;
            if let Some(agent) = m.participant() {
                tx.execute(rooms::END_ANSWER, params![m.room.0, asked.0, agent.0])?;
            }
            tx.commit()?;
            Ok(seq)
        })?;
        Ok(m)
    }

    async fn interrupted_answers(
        &self,
        except: uuid::Uuid,
        unseen_since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(RoomId, RoomMessageId, ParticipantId)>> {
        self.with(|conn| {
            conn.prepare_cached(rooms::INTERRUPTED_ANSWERS)?
                .query_map(params![except, unseen_since], |r| {
                    Ok((
                        RoomId(r.get(0)?),
                        RoomMessageId(r.get(1)?),
                        ParticipantId(r.get(2)?),
                    ))
                })?
                .collect()
        })
    }

    async fn set_included(&self, room: RoomId, id: RoomMessageId, included: bool) -> Result<bool> {
        self.with(|conn| {
            Ok(conn.execute(rooms::SET_INCLUDED, params![included, room.0, id.0])? > 0)
        })
    }

    async fn room_messages(&self, room: RoomId) -> Result<Vec<RoomMessage>> {
        let rows: Vec<RoomMessageRow> = self.with_long(|conn| {
            conn.prepare_cached(rooms::MESSAGES)?
                .query_map([room.0], room_message_row)?
                .collect()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn room_message(&self, room: RoomId, id: RoomMessageId) -> Result<Option<RoomMessage>> {
        let row = self.with(|conn| {
            conn.prepare_cached(rooms::MESSAGE)?
                .query_row([room.0, id.0], room_message_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn put_definition(&self, d: &Definition) -> Result<()> {
        let put = self.with(|conn| {
            conn.execute(
                rooms::PUT_DEFINITION,
                params![
                    d.id.0,
                    d.owner,
                    d.kind.as_str(),
                    d.name,
                    d.name.to_lowercase(),
                    d.text,
                    d.created_at
                ],
            )
        });
        match put {
            Err(StoreError::Sqlite(e)) if unique_violation(&e) => Err(rooms::definition_taken(d)),
            other => other.map(|_| ()),
        }
    }

    async fn definition(&self, id: DefinitionId) -> Result<Option<Definition>> {
        let row: Option<DefinitionRow> = self.with(|conn| {
            conn.prepare_cached(rooms::DEFINITION)?
                .query_row([id.0], definition_row)
                .optional()
        })?;
        row.map(TryInto::try_into).transpose()
    }

    async fn definitions(&self, owner: &str) -> Result<Vec<Definition>> {
        let rows: Vec<DefinitionRow> = self.with(|conn| {
            conn.prepare_cached(rooms::DEFINITIONS)?
                .query_map([owner], definition_row)?
                .collect()
        })?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn delete_definition(&self, id: DefinitionId) -> Result<bool> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(rooms::KEEP_ROLE_TEXT, [id.0])?;
            tx.execute(rooms::KEEP_PERSONALITY_TEXT, [id.0])?;
            let gone = tx.execute(rooms::DELETE_DEFINITION, [id.0])? > 0;
            tx.commit()?;
            Ok(gone)
        })
    }
}

/// Appends `m` as the room's next message; its `seq`, taken in the statement.
fn add_message(conn: &Connection, m: &RoomMessage) -> rusqlite::Result<i64> {
    let (kind, participant, name) = author_columns(&m.author);
    conn.prepare_cached(rooms::ADD_MESSAGE)?.query_row(
        params![
            m.room.0,
            m.id.0,
            kind,
            participant,
            name,
            m.text,
            m.included,
            m.created_at,
            m.reply_to.map(|r| r.0),
            tagged_column(&m.tagged)
        ],
        |r| r.get(0),
    )
}

fn room_row(r: &Row<'_>) -> rusqlite::Result<RoomRow> {
    Ok(RoomRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        name: r.get(2)?,
        agency_id: r.get(3)?,
        created_at: r.get(4)?,
    })
}

fn participant_row(r: &Row<'_>) -> rusqlite::Result<ParticipantRow> {
    Ok(ParticipantRow {
        id: r.get(0)?,
        room_id: r.get(1)?,
        name: r.get(2)?,
        model: r.get(3)?,
        role: r.get(4)?,
        personality: r.get(5)?,
        instructions: r.get(6)?,
        enabled: r.get(7)?,
        position: r.get(8)?,
        colour: r.get(9)?,
        bot_endpoint: r.get(10)?,
        bot_emulates: r.get(11)?,
        role_id: r.get(12)?,
        personality_id: r.get(13)?,
        tools: r.get(14)?,
    })
}

fn definition_row(r: &Row<'_>) -> rusqlite::Result<DefinitionRow> {
    Ok(DefinitionRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        kind: r.get(2)?,
        name: r.get(3)?,
        text: r.get(4)?,
        created_at: r.get(5)?,
    })
}

fn room_message_row(r: &Row<'_>) -> rusqlite::Result<RoomMessageRow> {
    Ok(RoomMessageRow {
        room_id: r.get(0)?,
        seq: r.get(1)?,
        id: r.get(2)?,
        kind: r.get(3)?,
        participant_id: r.get(4)?,
        author_name: r.get(5)?,
        text: r.get(6)?,
        included: r.get(7)?,
        created_at: r.get(8)?,
        reply_to: r.get(9)?,
        tagged: r.get(10)?,
    })
}
