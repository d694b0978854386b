//! The SQL both backends run, written once. Parameters are `$1, $2, ...` in order of first use,
//! which PostgreSQL and SQLite both read the same way.

macro_rules! agency_columns {
    () => {
        "id, owner, name, handle, protocol, manager, max_hops, deadline_ms, providers"
    };
}
macro_rules! agent_columns {
    () => {
        "agents.agency_id, agents.id, agents.name, agents.handle, agents.role, agents.model, \
         agents.sampling, agents.blocks"
    };
}
macro_rules! message_columns {
    () => {
        "id, conversation_id, turn_id, seq, agent_id, kind, linked_message_id, from_agent, \
         to_agent, text, prompt_tokens, completion_tokens, latency_ms, included, created_at, role"
    };
}
macro_rules! turn_columns {
    () => {
        "id, conversation_id, number, started_at, finished_at, stopped_by, hops, prompt_tokens, \
         completion_tokens, error, cost_pico"
    };
}

pub(crate) const SAVE_AGENCY: &str = concat!(
    "INSERT INTO agencies (",
    agency_columns!(),
    ", created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, name = excluded.name, \
     handle = excluded.handle, protocol = excluded.protocol, manager = excluded.manager, \
     max_hops = excluded.max_hops, deadline_ms = excluded.deadline_ms, \
     providers = excluded.providers, revision = agencies.revision + 1, \
     updated_at = excluded.updated_at"
);
pub(crate) const DELETE_AGENTS: &str = "DELETE FROM agents WHERE agency_id = $1";
pub(crate) const INSERT_AGENT: &str = "INSERT INTO agents (agency_id, id, position, name, handle, role, model, \
     sampling, blocks) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
pub(crate) const AGENCY_BY_ID: &str =
    concat!("SELECT ", agency_columns!(), " FROM agencies WHERE id = $1");
pub(crate) const AGENCY_STATE: &str = "SELECT revision, \
     (SELECT MAX(version) FROM agency_versions WHERE agency_id = $1) FROM agencies WHERE id = $1";
pub(crate) const DELETE_AGENCY: &str = "DELETE FROM agencies WHERE id = $1";
/// Moves the revision; it also locks the agency's row, so that publications take their
/// numbers ([`NEXT_VERSION`], a statement of its own to see the last one committed) in turn.
pub(crate) const BUMP_REVISION: &str = "UPDATE agencies SET revision = revision + 1 WHERE id = $1";
pub(crate) const NEXT_VERSION: &str =
    "SELECT COALESCE(MAX(version), 0) + 1 FROM agency_versions WHERE agency_id = $1";
pub(crate) const INSERT_VERSION: &str =
    "INSERT INTO agency_versions (agency_id, version, body, published_at) VALUES ($1, $2, $3, $4)";
pub(crate) const VERSION: &str =
    "SELECT version, published_at, body FROM agency_versions WHERE agency_id = $1 AND version = $2";
pub(crate) const VERSIONS: &str = "SELECT version, published_at FROM agency_versions \
     WHERE agency_id = $1 ORDER BY version DESC";

pub(crate) const INSERT_USER: &str =
    "INSERT INTO users (id, email, password_hash, created_at) VALUES ($1, $2, $3, $4)";
pub(crate) const USER_BY_ID: &str =
    "SELECT id, email, password_hash, created_at FROM users WHERE id = $1";
pub(crate) const USER_BY_EMAIL: &str =
    "SELECT id, email, password_hash, created_at FROM users WHERE email = $1";
/// SQLite numbers `$N` parameters in the order they first appear: keep them in order.
pub(crate) const SET_PASSWORD: &str = "UPDATE users SET password_hash = $1 WHERE id = $2";
pub(crate) const INSERT_SESSION: &str =
    "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)";
pub(crate) const SESSION_USER: &str = "SELECT users.id, users.email, users.password_hash, \
     users.created_at FROM sessions JOIN users ON users.id = sessions.user_id \
     WHERE sessions.token_hash = $1 AND sessions.expires_at > $2";
pub(crate) const DELETE_SESSION: &str = "DELETE FROM sessions WHERE token_hash = $1";
pub(crate) const DELETE_OTHER_SESSIONS: &str =
    "DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $2";
pub(crate) const AGENCY_BY_NAME: &str = concat!(
    "SELECT ",
    agency_columns!(),
    " FROM agencies WHERE owner = $1 AND name = $2"
);
pub(crate) const AGENCIES_OF_OWNER: &str = concat!(
    "SELECT ",
    agency_columns!(),
    " FROM agencies WHERE owner = $1 ORDER BY name"
);
pub(crate) const AGENTS_OF_AGENCY: &str = concat!(
    "SELECT ",
    agent_columns!(),
    " FROM agents WHERE agency_id = $1 ORDER BY position"
);
pub(crate) const AGENTS_OF_OWNER: &str = concat!(
    "SELECT ",
    agent_columns!(),
    " FROM agents JOIN agencies ON agencies.id = agents.agency_id \
     WHERE agencies.owner = $1 ORDER BY agents.agency_id, agents.position"
);

pub(crate) const INSERT_CONVERSATION: &str =
    "INSERT INTO conversations (id, agency_id, version, created_at) VALUES ($1, $2, $3, $4)";
pub(crate) const CONVERSATION: &str =
    "SELECT id, agency_id, version, created_at FROM conversations WHERE id = $1";
pub(crate) const CONVERSATIONS_OF_AGENCY: &str = "SELECT id, agency_id, version, created_at FROM conversations \
     WHERE agency_id = $1 ORDER BY created_at DESC, id DESC";

/// Followed by one `(...)` of 16 values per row.
pub(crate) const INSERT_MESSAGES: &str =
    concat!("INSERT INTO messages (", message_columns!(), ") ");
pub(crate) const INSERT_MESSAGE: &str = concat!(
    "INSERT INTO messages (",
    message_columns!(),
    ") \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
);
pub(crate) const MESSAGES_OF_CONVERSATION: &str = concat!(
    "SELECT ",
    message_columns!(),
    " FROM messages WHERE conversation_id = $1 ORDER BY seq"
);
pub(crate) const MESSAGES_OF_TURN: &str = concat!(
    "SELECT ",
    message_columns!(),
    " FROM messages WHERE conversation_id = $1 AND turn_id = $2 ORDER BY seq"
);

pub(crate) const SAVE_TURN: &str = concat!(
    "INSERT INTO turns (",
    turn_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, \
     stopped_by = excluded.stopped_by, hops = excluded.hops, \
     prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, \
     error = excluded.error, cost_pico = excluded.cost_pico"
);
pub(crate) const TURNS_OF_CONVERSATION: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE conversation_id = $1 ORDER BY number"
);

pub(crate) const CLAIM_SETTING: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
pub(crate) const SETTING_EXISTS: &str = "SELECT 1 FROM settings WHERE key = $1";

pub(crate) const PUT_PROVIDER_KEY: &str = "INSERT INTO provider_keys (owner, provider, nonce, sealed, suffix, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner, provider) DO UPDATE SET nonce = excluded.nonce, \
     sealed = excluded.sealed, suffix = excluded.suffix, created_at = excluded.created_at";
pub(crate) const PROVIDER_KEY: &str = "SELECT owner, provider, nonce, sealed, suffix, created_at FROM provider_keys WHERE owner = $1 AND provider = $2";
pub(crate) const PROVIDER_KEYS_OF_OWNER: &str = "SELECT owner, provider, nonce, sealed, suffix, created_at FROM provider_keys WHERE owner = $1 ORDER BY provider";
pub(crate) const ALL_PROVIDER_KEYS: &str = "SELECT owner, provider, nonce, sealed, suffix, created_at FROM provider_keys ORDER BY owner, provider";
pub(crate) const RESEAL_PROVIDER_KEY: &str =
    "UPDATE provider_keys SET nonce = $1, sealed = $2 WHERE owner = $3 AND provider = $4";
pub(crate) const DELETE_PROVIDER_KEY: &str =
    "DELETE FROM provider_keys WHERE owner = $1 AND provider = $2";

macro_rules! api_key_columns {
    () => {
        "id, agency_id, name, prefix, hash, rate_limit_per_minute, created_at, expires_at, last_used_at, revoked_at"
    };
}
pub(crate) const INSERT_API_KEY: &str = concat!(
    "INSERT INTO api_keys (",
    api_key_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
);
pub(crate) const API_KEY_BY_HASH: &str = concat!(
    "SELECT ",
    api_key_columns!(),
    " FROM api_keys WHERE hash = $1"
);
pub(crate) const API_KEYS_OF_AGENCY: &str = concat!(
    "SELECT ",
    api_key_columns!(),
    " FROM api_keys WHERE agency_id = $1 ORDER BY created_at, name"
);
pub(crate) const REVOKE_API_KEY: &str =
    "UPDATE api_keys SET revoked_at = $1 WHERE agency_id = $2 AND name = $3 AND revoked_at IS NULL";
pub(crate) const TOUCH_API_KEY: &str = "UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)";
pub(crate) const ADD_PROVIDER_KEY: &str = "INSERT INTO provider_keys (owner, provider, nonce, sealed, suffix, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner, provider) DO NOTHING";
pub(crate) const API_THREAD: &str =
    "SELECT conversation_id FROM api_threads WHERE key_id = $1 AND hash = $2";
/// A conversation's transcript hash replaces its earlier ones (an edited history must not
/// continue it), and a hash names one conversation (the latest). Two index lookups (the key
/// and hash, the conversation), never a scan of the key's threads.
pub(crate) const DROP_API_THREADS: &str =
    "DELETE FROM api_threads WHERE (key_id = $1 AND hash = $2) OR conversation_id = $3";
pub(crate) const PUT_API_THREAD: &str =
    "INSERT INTO api_threads (key_id, hash, conversation_id) VALUES ($1, $2, $3)";
