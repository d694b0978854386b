//! PostgreSQL, through sqlx: for more than one machine.

use std::str::FromStr;
use std::time::Duration;

use agency_core::{Agency, AgencyId, Conversation, ConversationId, Message, TurnId, TurnRecord};
use async_trait::async_trait;
use chrono::Utc;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool, Postgres, QueryBuilder};

use agency_core::Published;

use crate::shared::agencies::{self, AgencyRow, AgentRow, agencies_of, blocks_json};
use crate::shared::conversations::{self, ConversationRow, MessageRow, TurnRow};
use crate::shared::{keys, secrets, settings};
use crate::{
    AgencyState, AgencyStore, ConversationStore, KeyStore, Result, SealedKey, SecretStore,
    SettingsStore, StoreError, Write, redact,
};

mod accounts;
mod memory;
mod rooms;

pub struct PostgresStore {
    pool: PgPool,
}

/// Rows per multi-row INSERT (PostgreSQL allows 65,535 parameters; a row has 16).
const ROWS_PER_INSERT: usize = 1_000;

impl PostgresStore {
    pub async fn open(url: &str) -> Result<Self> {
        let open_err = |source: sqlx::Error| StoreError::Open {
            url: redact(url),
            cause: source.to_string(),
        };
        let options = PgConnectOptions::from_str(url).map_err(open_err)?;
        // One plain connection first: a refused or misconfigured server fails at once with its
        // own error, instead of after the pool's acquire timeout.
        sqlx::Connection::close(options.connect().await.map_err(open_err)?)
            .await
            .map_err(open_err)?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(open_err)?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))?;
        Ok(Self { pool })
    }

    async fn one_agency(&self, row: Option<AgencyRow>) -> Result<Option<Agency>> {
        let Some(row) = row else { return Ok(None) };
        let agents: Vec<AgentRow> = sqlx::query_as(agencies::AGENTS_OF_AGENCY)
            .bind(row.id)
            .fetch_all(&self.pool)
            .await?;
        Ok(agencies_of(vec![row], agents)?.pop())
    }
}

/// One multi-row INSERT of `messages`.
fn insert_messages(messages: &[Message]) -> QueryBuilder<Postgres> {
    let mut q = QueryBuilder::<Postgres>::new(conversations::INSERT_MESSAGES);
    q.push_values(messages, |mut b, m| {
        let r = MessageRow::from(m);
        b.push_bind(r.id)
            .push_bind(r.conversation_id)
            .push_bind(r.turn_id)
            .push_bind(r.seq)
            .push_bind(r.agent_id)
            .push_bind(r.kind)
            .push_bind(r.linked_message_id)
            .push_bind(r.from_agent)
            .push_bind(r.to_agent)
            .push_bind(r.text)
            .push_bind(r.prompt_tokens)
            .push_bind(r.completion_tokens)
            .push_bind(r.latency_ms)
            .push_bind(r.included)
            .push_bind(r.created_at)
            .push_bind(m.role().as_str());
    });
    q
}

fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

#[async_trait]
impl AgencyStore for PostgresStore {
    async fn save_agency(&self, agency: &Agency) -> Result<()> {
        let now = Utc::now();
        let mut tx = self.pool.begin().await?;
        let saved = sqlx::query(agencies::SAVE_AGENCY)
            .bind(agency.id.0)
            .bind(&agency.owner)
            .bind(&agency.name)
            .bind(&agency.handle)
            .bind(agency.protocol.as_str())
            .bind(i64::from(agency.manager.get()))
            .bind(i64::from(agency.limits.max_hops))
            .bind(agencies::deadline_ms(agency))
            .bind(agencies::providers_json(&agency.providers))
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await;
        match saved {
            Err(e) if unique_violation(&e) => return Err(agencies::name_taken(agency)),
            other => other?,
        };
        sqlx::query(agencies::DELETE_AGENTS)
            .bind(agency.id.0)
            .execute(&mut *tx)
            .await?;
        for (position, a) in (0i64..).zip(&agency.agents) {
            sqlx::query(agencies::INSERT_AGENT)
                .bind(agency.id.0)
                .bind(i64::from(a.id.get()))
                .bind(position)
                .bind(&a.name)
                .bind(&a.handle)
                .bind(&a.role)
                .bind(a.model.to_string())
                .bind(agencies::settings_json(a))
                .bind(blocks_json(&a.blocks))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn agency(&self, id: AgencyId) -> Result<Option<Agency>> {
        let row = sqlx::query_as(agencies::AGENCY_BY_ID)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        self.one_agency(row).await
    }

    async fn agency_state(&self, id: AgencyId) -> Result<Option<AgencyState>> {
        let state: Option<(i64, Option<i64>)> = sqlx::query_as(agencies::AGENCY_STATE)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        state.map(agencies::agency_state).transpose()
    }

    async fn agency_by_name(&self, owner: &str, name: &str) -> Result<Option<Agency>> {
        let row = sqlx::query_as(agencies::AGENCY_BY_NAME)
            .bind(owner)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        self.one_agency(row).await
    }

    async fn list_agencies(&self, owner: &str) -> Result<Vec<Agency>> {
        let rows: Vec<AgencyRow> = sqlx::query_as(agencies::AGENCIES_OF_OWNER)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        let agents: Vec<AgentRow> = sqlx::query_as(agencies::AGENTS_OF_OWNER)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        agencies_of(rows, agents)
    }

    async fn delete_agency(&self, id: AgencyId) -> Result<bool> {
        let done = sqlx::query(agencies::DELETE_AGENCY)
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn publish(
        &self,
        id: AgencyId,
        body: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<Published> {
        let mut tx = self.pool.begin().await?;
        let bumped = sqlx::query(agencies::BUMP_REVISION)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        if bumped.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!("no agency {id}")));
        }
        let version: i64 = sqlx::query_scalar(agencies::NEXT_VERSION)
            .bind(id.0)
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(agencies::INSERT_VERSION)
            .bind(id.0)
            .bind(version)
            .bind(body)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        agencies::published(version, at)
    }

    async fn version(&self, id: AgencyId, version: u32) -> Result<Option<(Published, String)>> {
        let row: Option<(i64, chrono::DateTime<Utc>, String)> = sqlx::query_as(agencies::VERSION)
            .bind(id.0)
            .bind(i64::from(version))
            .fetch_optional(&self.pool)
            .await?;
        row.map(|(v, at, body)| Ok((agencies::published(v, at)?, body)))
            .transpose()
    }

    async fn versions(&self, id: AgencyId) -> Result<Vec<Published>> {
        let rows: Vec<(i64, chrono::DateTime<Utc>)> = sqlx::query_as(agencies::VERSIONS)
            .bind(id.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|(v, at)| agencies::published(v, at))
            .collect()
    }
}

#[async_trait]
impl ConversationStore for PostgresStore {
    async fn write(&self, write: Write) -> Result<Write> {
        match &write {
            w if w.is_empty() => {}
            // One statement is atomic by itself: a hop's write needs no BEGIN/COMMIT round
            // trips.
            Write {
                conversation: None,
                messages,
                turn: None,
                thread: None,
            } if messages.len() <= ROWS_PER_INSERT => {
                insert_messages(messages)
                    .build()
                    .execute(&self.pool)
                    .await?;
            }
            w => {
                let mut tx = self.pool.begin().await?;
                if let Some(c) = &w.conversation {
                    sqlx::query(conversations::INSERT_CONVERSATION)
                        .bind(c.id.0)
                        .bind(c.agency_id.0)
                        .bind(c.version.map(i64::from))
                        .bind(c.created_at)
                        .execute(&mut *tx)
                        .await?;
                }
                for chunk in w.messages.chunks(ROWS_PER_INSERT) {
                    insert_messages(chunk).build().execute(&mut *tx).await?;
                }
                if let Some(t) = &w.turn {
                    let r = TurnRow::from(t);
                    sqlx::query(conversations::SAVE_TURN)
                        .bind(r.id)
                        .bind(r.conversation_id)
                        .bind(r.number)
                        .bind(r.started_at)
                        .bind(r.finished_at)
                        .bind(r.stopped_by)
                        .bind(r.hops)
                        .bind(r.prompt_tokens)
                        .bind(r.completion_tokens)
                        .bind(r.error)
                        .bind(r.cost_pico)
                        .execute(&mut *tx)
                        .await?;
                }
                if let Some(t) = &w.thread {
                    sqlx::query(conversations::DROP_API_THREADS)
                        .bind(t.key)
                        .bind(&t.hash)
                        .bind(t.conversation.0)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(conversations::PUT_API_THREAD)
                        .bind(t.key)
                        .bind(&t.hash)
                        .bind(t.conversation.0)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
        }
        Ok(write)
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

    async fn turns(&self, conversation: ConversationId) -> Result<Vec<TurnRecord>> {
        let rows: Vec<TurnRow> = sqlx::query_as(conversations::TURNS_OF_CONVERSATION)
            .bind(conversation.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }
}

#[async_trait]
impl SettingsStore for PostgresStore {
    async fn claim_once(&self, key: &str) -> Result<bool> {
        let done = sqlx::query(settings::CLAIM_SETTING)
            .bind(key)
            .bind(Utc::now().to_rfc3339())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn is_claimed(&self, key: &str) -> Result<bool> {
        Ok(sqlx::query(settings::SETTING_EXISTS)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }
}

#[async_trait]
impl SecretStore for PostgresStore {
    async fn put_provider_key(&self, k: &SealedKey) -> Result<()> {
        sqlx::query(secrets::PUT_PROVIDER_KEY)
            .bind(&k.owner)
            .bind(&k.provider)
            .bind(&k.nonce)
            .bind(&k.sealed)
            .bind(&k.suffix)
            .bind(k.created_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn add_provider_key(&self, k: &SealedKey) -> Result<bool> {
        let done = sqlx::query(secrets::ADD_PROVIDER_KEY)
            .bind(&k.owner)
            .bind(&k.provider)
            .bind(&k.nonce)
            .bind(&k.sealed)
            .bind(&k.suffix)
            .bind(k.created_at)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn provider_key(&self, owner: &str, provider: &str) -> Result<Option<SealedKey>> {
        let row: Option<secrets::SealedKeyRow> = sqlx::query_as(secrets::PROVIDER_KEY)
            .bind(owner)
            .bind(provider)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn provider_keys(&self, owner: &str) -> Result<Vec<SealedKey>> {
        let rows: Vec<secrets::SealedKeyRow> = sqlx::query_as(secrets::PROVIDER_KEYS_OF_OWNER)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn all_provider_keys(&self) -> Result<Vec<SealedKey>> {
        let rows: Vec<secrets::SealedKeyRow> = sqlx::query_as(secrets::ALL_PROVIDER_KEYS)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn reseal_provider_keys(&self, keys: &[SealedKey]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for k in keys {
            sqlx::query(secrets::RESEAL_PROVIDER_KEY)
                .bind(&k.nonce)
                .bind(&k.sealed)
                .bind(&k.owner)
                .bind(&k.provider)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_provider_key(&self, owner: &str, provider: &str) -> Result<bool> {
        let done = sqlx::query(secrets::DELETE_PROVIDER_KEY)
            .bind(owner)
            .bind(provider)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl KeyStore for PostgresStore {
    async fn create_api_key(&self, k: &agency_core::ApiKey) -> Result<()> {
        let done = sqlx::query(keys::INSERT_API_KEY)
            .bind(k.id)
            .bind(k.agency_id.0)
            .bind(&k.name)
            .bind(&k.prefix)
            .bind(&k.hash)
            .bind(i64::from(k.rate_limit_per_minute))
            .bind(k.created_at)
            .bind(k.expires_at)
            .bind(k.last_used_at)
            .bind(k.revoked_at)
            .execute(&self.pool)
            .await;
        match done {
            Err(e) if unique_violation(&e) => Err(keys::key_name_taken(k)),
            other => other.map(|_| ()).map_err(Into::into),
        }
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<agency_core::ApiKey>> {
        let row: Option<keys::ApiKeyRow> = sqlx::query_as(keys::API_KEY_BY_HASH)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn api_keys(&self, agency: AgencyId) -> Result<Vec<agency_core::ApiKey>> {
        let rows: Vec<keys::ApiKeyRow> = sqlx::query_as(keys::API_KEYS_OF_AGENCY)
            .bind(agency.0)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn revoke_api_key(
        &self,
        agency: AgencyId,
        name: &str,
        at: chrono::DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(keys::REVOKE_API_KEY)
            .bind(at)
            .bind(agency.0)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn api_thread(&self, key: uuid::Uuid, hash: &str) -> Result<Option<ConversationId>> {
        let id: Option<uuid::Uuid> = sqlx::query_scalar(keys::API_THREAD)
            .bind(key)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(id.map(ConversationId))
    }

    async fn touch_api_keys(&self, used: &[(uuid::Uuid, chrono::DateTime<Utc>)]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for (id, at) in used {
            sqlx::query(keys::TOUCH_API_KEY)
                .bind(at)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
