//! The SQLite and PostgreSQL stores. Both run the same SQL text through the same code: the
//! `store_impl!` macro instantiates it once per backend, so the two cannot drift apart. What
//! differs (connection options, migrations, column types) is outside the macro.

use std::str::FromStr;
use std::time::Duration;

use agency_core::{
    Agency, AgencyId, Conversation, ConversationId, Message, TurnId, TurnRecord,
};
use async_trait::async_trait;
use chrono::Utc;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, Postgres, QueryBuilder, Sqlite, SqlitePool};

use crate::rows::{
    AgencyRow, AgentRow, ConversationRow, MessageRow, TurnRow, agency_of, blocks_json,
};
use crate::{AgencyStore, ConversationStore, Result, SettingsStore, StoreError, redact};

/// SQLite, in WAL mode. The default: nothing to install.
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub async fn open(url: &str) -> Result<Self> {
        let open_err = |source| StoreError::Open {
            url: redact(url),
            source,
        };
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let options = SqliteConnectOptions::from_str(url)
            .map_err(open_err)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL: a commit survives a crash of the process; a power cut may lose the
            // last commits but never corrupts the database.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            // An in-memory database exists once per connection.
            .max_connections(if memory { 1 } else { 4 })
            .connect_with(options)
            .await
            .map_err(open_err)?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Self { pool })
    }
}

/// PostgreSQL, for more than one machine.
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    pub async fn open(url: &str) -> Result<Self> {
        let open_err = |source| StoreError::Open {
            url: redact(url),
            source,
        };
        let options = PgConnectOptions::from_str(url).map_err(open_err)?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(open_err)?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }
}

/// Rows per multi-row INSERT: far below SQLite's 32,766 bound parameters.
const ROWS_PER_INSERT: usize = 1_000;

// Column lists as macros, so that every statement is one `&'static str` built by `concat!`.
macro_rules! agency_columns {
    () => {
        "id, owner, name, handle, protocol, manager, max_hops, deadline_ms"
    };
}
macro_rules! agent_columns {
    () => {
        "agency_id, id, name, handle, role, model, blocks"
    };
}
macro_rules! message_columns {
    () => {
        "id, conversation_id, turn_id, seq, agent_id, kind, linked_message_id, from_agent, \
         to_agent, text, prompt_tokens, completion_tokens, latency_ms, included, created_at"
    };
}
macro_rules! turn_columns {
    () => {
        "id, conversation_id, number, started_at, finished_at, stopped_by, hops, prompt_tokens, \
         completion_tokens, error"
    };
}

fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

macro_rules! store_impl {
    ($store:ty, $db:ty) => {
        impl $store {
            async fn load_agencies(&self, rows: Vec<AgencyRow>) -> Result<Vec<Agency>> {
                if rows.is_empty() {
                    return Ok(Vec::new());
                }
                let mut q = QueryBuilder::<$db>::new(concat!("SELECT ", agent_columns!(), " FROM agents WHERE agency_id IN ("));
                let mut ids = q.separated(", ");
                for r in &rows {
                    ids.push_bind(r.id);
                }
                q.push(") ORDER BY agency_id, position");
                let mut agents: Vec<AgentRow> = q.build_query_as().fetch_all(&self.pool).await?;
                rows.into_iter()
                    .map(|row| {
                        let (mine, rest): (Vec<AgentRow>, Vec<AgentRow>) =
                            agents.drain(..).partition(|a| a.agency_id == row.id);
                        agents = rest;
                        agency_of(row, mine)
                    })
                    .collect()
            }

            async fn one_agency(&self, row: Option<AgencyRow>) -> Result<Option<Agency>> {
                match row {
                    None => Ok(None),
                    Some(row) => Ok(self.load_agencies(vec![row]).await?.pop()),
                }
            }
        }

        #[async_trait]
        impl AgencyStore for $store {
            async fn save_agency(&self, agency: &Agency) -> Result<()> {
                let now = Utc::now();
                let mut tx = self.pool.begin().await?;
                let saved = sqlx::query(
                    "INSERT INTO agencies (id, owner, name, handle, protocol, manager, max_hops, \
                     deadline_ms, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                     ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, name = excluded.name, \
                     handle = excluded.handle, protocol = excluded.protocol, \
                     manager = excluded.manager, max_hops = excluded.max_hops, \
                     deadline_ms = excluded.deadline_ms, updated_at = excluded.updated_at",
                )
                .bind(agency.id.0)
                .bind(&agency.owner)
                .bind(&agency.name)
                .bind(&agency.handle)
                .bind(agency.protocol.as_str())
                .bind(i64::from(agency.manager.get()))
                .bind(i64::from(agency.limits.max_hops))
                .bind(i64::try_from(agency.limits.turn_deadline.as_millis()).unwrap_or(i64::MAX))
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await;
                match saved {
                    Err(e) if unique_violation(&e) => {
                        return Err(StoreError::Conflict(format!(
                            "an agency named `{}` already exists",
                            agency.name
                        )));
                    }
                    other => other?,
                };
                sqlx::query("DELETE FROM agents WHERE agency_id = $1")
                    .bind(agency.id.0)
                    .execute(&mut *tx)
                    .await?;
                if !agency.agents.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(
                        "INSERT INTO agents (agency_id, id, position, name, handle, role, model, blocks) ",
                    );
                    q.push_values(agency.agents.iter().enumerate(), |mut b, (i, a)| {
                        b.push_bind(agency.id.0)
                            .push_bind(i64::from(a.id.get()))
                            .push_bind(i64::try_from(i).unwrap_or(i64::MAX))
                            .push_bind(a.name.clone())
                            .push_bind(a.handle.clone())
                            .push_bind(a.role.clone())
                            .push_bind(a.model.to_string())
                            .push_bind(blocks_json(&a.blocks));
                    });
                    q.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn agency(&self, id: AgencyId) -> Result<Option<Agency>> {
                let row = sqlx::query_as(concat!("SELECT ", agency_columns!(), " FROM agencies WHERE id = $1"))
                .bind(id.0)
                .fetch_optional(&self.pool)
                .await?;
                self.one_agency(row).await
            }

            async fn agency_by_name(&self, owner: &str, name: &str) -> Result<Option<Agency>> {
                let row = sqlx::query_as(concat!("SELECT ", agency_columns!(), " FROM agencies WHERE owner = $1 AND name = $2"))
                .bind(owner)
                .bind(name)
                .fetch_optional(&self.pool)
                .await?;
                self.one_agency(row).await
            }

            async fn list_agencies(&self, owner: &str) -> Result<Vec<Agency>> {
                let rows = sqlx::query_as(concat!("SELECT ", agency_columns!(), " FROM agencies WHERE owner = $1 ORDER BY name"))
                .bind(owner)
                .fetch_all(&self.pool)
                .await?;
                self.load_agencies(rows).await
            }
        }

        #[async_trait]
        impl ConversationStore for $store {
            async fn create_conversation(&self, c: &Conversation) -> Result<()> {
                sqlx::query(
                    "INSERT INTO conversations (id, agency_id, created_at) VALUES ($1, $2, $3)",
                )
                .bind(c.id.0)
                .bind(c.agency_id.0)
                .bind(c.created_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
                let row: Option<ConversationRow> = sqlx::query_as(
                    "SELECT id, agency_id, created_at FROM conversations WHERE id = $1",
                )
                .bind(id.0)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(Into::into))
            }

            async fn list_conversations(&self, agency: AgencyId) -> Result<Vec<Conversation>> {
                let rows: Vec<ConversationRow> = sqlx::query_as(
                    "SELECT id, agency_id, created_at FROM conversations WHERE agency_id = $1 \
                     ORDER BY created_at DESC, id DESC",
                )
                .bind(agency.0)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn append_messages(&self, messages: &[Message]) -> Result<()> {
                if messages.is_empty() {
                    return Ok(());
                }
                let mut tx = (messages.len() > ROWS_PER_INSERT)
                    .then(|| self.pool.begin());
                let mut tx = match tx.take() {
                    Some(begin) => Some(begin.await?),
                    None => None,
                };
                for chunk in messages.chunks(ROWS_PER_INSERT) {
                    let mut q = QueryBuilder::<$db>::new(concat!("INSERT INTO messages (", message_columns!(), ", role) "));
                    q.push_values(chunk, |mut b, m| {
                        b.push_bind(m.id.0)
                            .push_bind(m.conversation_id.0)
                            .push_bind(m.turn_id.map(|t| t.0))
                            .push_bind(m.seq)
                            .push_bind(m.agent.map(|a| i64::from(a.get())))
                            .push_bind(m.kind.as_str())
                            .push_bind(m.linked.map(|l| l.0))
                            .push_bind(m.from.map(|a| i64::from(a.get())))
                            .push_bind(m.to.map(|a| i64::from(a.get())))
                            .push_bind(m.text.as_str())
                            .push_bind(m.usage.map(|u| i64::from(u.prompt_tokens)))
                            .push_bind(m.usage.map(|u| i64::from(u.completion_tokens)))
                            .push_bind(m.latency_ms.map(i64::from))
                            .push_bind(m.included)
                            .push_bind(m.created_at)
                            .push_bind(m.role().as_str());
                    });
                    match tx.as_mut() {
                        Some(tx) => q.build().execute(&mut **tx).await?,
                        None => q.build().execute(&self.pool).await?,
                    };
                }
                if let Some(tx) = tx {
                    tx.commit().await?;
                }
                Ok(())
            }

            async fn messages(&self, conversation: ConversationId) -> Result<Vec<Message>> {
                let rows: Vec<MessageRow> = sqlx::query_as(concat!("SELECT ", message_columns!(), " FROM messages WHERE conversation_id = $1 ORDER BY seq"))
                .bind(conversation.0)
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn turn_messages(&self, turn: TurnId) -> Result<Vec<Message>> {
                let rows: Vec<MessageRow> = sqlx::query_as(concat!("SELECT ", message_columns!(), " FROM messages WHERE turn_id = $1 ORDER BY seq"))
                .bind(turn.0)
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn save_turn(&self, t: &TurnRecord) -> Result<()> {
                sqlx::query(concat!("INSERT INTO turns (", turn_columns!(), ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                     ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, \
                     stopped_by = excluded.stopped_by, hops = excluded.hops, \
                     prompt_tokens = excluded.prompt_tokens, \
                     completion_tokens = excluded.completion_tokens, error = excluded.error"))
                .bind(t.id.0)
                .bind(t.conversation_id.0)
                .bind(i64::from(t.number))
                .bind(t.started_at)
                .bind(t.finished_at)
                .bind(t.stopped_by.map(|s| s.as_str()))
                .bind(i64::from(t.hops))
                .bind(i64::from(t.usage.prompt_tokens))
                .bind(i64::from(t.usage.completion_tokens))
                .bind(&t.error)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn turns(&self, conversation: ConversationId) -> Result<Vec<TurnRecord>> {
                let rows: Vec<TurnRow> = sqlx::query_as(concat!("SELECT ", turn_columns!(), " FROM turns WHERE conversation_id = $1 ORDER BY number"))
                .bind(conversation.0)
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }
        }

        #[async_trait]
        impl SettingsStore for $store {
            async fn claim_once(&self, key: &str) -> Result<bool> {
                let done = sqlx::query(
                    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                )
                .bind(key)
                .bind(Utc::now().to_rfc3339())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }
        }
    };
}

store_impl!(SqliteStore, Sqlite);
store_impl!(PostgresStore, Postgres);
