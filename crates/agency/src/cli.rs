//! The command line: what each command takes (clap). What they do is in `commands/`.

use std::net::SocketAddr;
use std::path::PathBuf;

use agency_core::ConversationId;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "agency",
    version,
    about = "A team of LLM agents behind one endpoint"
)]
pub struct Cli {
    /// Database URL: sqlite://PATH or postgres://USER@HOST/DB.
    #[arg(
        long,
        global = true,
        env = "AGENCY_DB",
        default_value = "sqlite://agency.db"
    )]
    pub db: String,
    /// Server configuration: the providers every agency can use (YAML, as an agency file's
    /// `providers:`).
    #[arg(long, global = true, env = "AGENCY_CONFIG")]
    pub config: Option<PathBuf>,
    /// The master key that seals stored provider keys and the API keys' secret (created, mode
    /// 0600, by the first `serve` or the first key made). `AGENCY_MASTER_KEY` (64 hex digits)
    /// takes precedence.
    #[arg(
        long,
        global = true,
        env = "AGENCY_MASTER_KEY_FILE",
        default_value = "agency.key"
    )]
    pub master_key_file: PathBuf,
    /// Seconds a streamed model call waits for the provider's first byte before trying again
    /// (a call answered whole waits 120).
    #[arg(
        long,
        global = true,
        env = "AGENCY_STREAM_FIRST_BYTE_TIMEOUT",
        default_value_t = 30
    )]
    pub stream_first_byte_timeout: u64,
    /// Work on the agencies (and keys) of the web UI's account with this email, rather than
    /// the CLI's own local owner's (`serve` ignores it).
    #[arg(long, global = true, env = "AGENCY_OWNER", value_name = "EMAIL")]
    pub owner: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Start the HTTP server.
    Serve {
        #[arg(long, env = "AGENCY_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Also speak the XMAGS MQTT protocol through this broker:
        /// mqtt://[USER[:PASSWORD]@]HOST[:PORT][?client_id=ID&share=GROUP], or mqtts://; or
        /// `embedded`: a broker inside the process on 127.0.0.1:1883 (embedded://HOST:PORT).
        #[arg(long, env = "AGENCY_MQTT")]
        mqtt: Option<String>,
        /// Over MQTT, the operator's own agencies (the CLI's) also take messages only with one
        /// of their API keys, as accounts' agencies always do; the embedded broker then lets no
        /// client in without a key.
        #[arg(long, env = "AGENCY_MQTT_REQUIRE_KEY", requires = "mqtt")]
        mqtt_require_key: bool,
        /// Let accounts' providers (their agencies' `base_url`s) and webhook bots live on
        /// loopback and private networks. Off by default: those are URLs accounts gave, called
        /// from inside this server's network. For a server on one's own machine only.
        #[arg(
            long,
            alias = "allow-private-bots",
            env = "AGENCY_ALLOW_PRIVATE_ADDRESSES"
        )]
        allow_private_addresses: bool,
        /// Open connections at most (lowered to what the open-file limit allows); past it, a
        /// connection is answered 503.
        #[arg(long, env = "AGENCY_MAX_CONNECTIONS", default_value_t = 10_000)]
        max_connections: usize,
        /// Open connections from one client address at most. Off by default: behind a load
        /// balancer every connection comes from its address.
        #[arg(long, env = "AGENCY_MAX_CONNECTIONS_PER_ADDRESS")]
        max_connections_per_address: Option<usize>,
        /// Seconds a client has to send a request's headers; a keep-alive connection idle
        /// that long is closed too. Requests in progress and event streams are not cut.
        #[arg(long, env = "AGENCY_HEADER_TIMEOUT", default_value_t = 30)]
        header_timeout: u64,
        /// A web origin whose pages may call the OpenAI endpoints from a browser (CORS), such
        /// as https://app.example.com, or `*` for any; repeat it, or separate with commas. None
        /// by default: only pages of this server's own origin.
        #[arg(
            long = "cors-origin",
            env = "AGENCY_CORS_ORIGIN",
            value_name = "ORIGIN",
            value_delimiter = ',',
            value_parser = cors_origin
        )]
        cors_origins: Vec<String>,
        /// A proxy (an address, or a network such as 10.0.0.0/8) whose `Forwarded` /
        /// `X-Forwarded-For` headers name the client, for per-address limits and logs; repeat
        /// it, or separate with commas. None by default: every connection's peer is the client.
        #[arg(
            long = "trusted-proxy",
            env = "AGENCY_TRUSTED_PROXY",
            value_name = "ADDR[/BITS]",
            value_delimiter = ',',
            value_parser = trusted_proxy
        )]
        trusted_proxies: Vec<String>,
        /// Seconds a turn paused on an API client's own tools waits for their results; results
        /// sent later start a new turn instead of resuming it.
        #[arg(long, env = "AGENCY_CLIENT_TOOLS_WAIT", default_value_t = 3600)]
        client_tools_wait: u64,
        /// Seconds a tool call waits for a person's approval when its agent's policy does not
        /// say (`approve_timeout_secs`); then the policy's `approve_on_timeout` (deny by
        /// default) answers it (docs/approvals.md).
        #[arg(long, env = "AGENCY_APPROVAL_TIMEOUT", default_value_t = 300,
              value_parser = clap::value_parser!(u64).range(1..=604_800))]
        approval_timeout: u64,
        /// Seconds an MCP server's connection is kept unused before it is closed (a stdio
        /// server's processes stopped, an HTTP session ended); the next call opens it again.
        /// 0 keeps connections open (docs/tools.md).
        #[arg(long, env = "AGENCY_MCP_IDLE_SECS", default_value_t = 600)]
        mcp_idle_secs: u64,
        /// Serve Prometheus metrics (`GET /metrics`) on this address, apart from the public
        /// listener. Off by default. Traces and OTLP metrics follow the standard `OTEL_*`
        /// variables (docs/observability.md).
        #[arg(long, env = "AGENCY_METRICS_LISTEN", value_name = "ADDR")]
        metrics_listen: Option<SocketAddr>,
        /// Send traces and metrics over OTLP (http/protobuf) to this collector, such as
        /// http://127.0.0.1:4318; `OTEL_EXPORTER_OTLP_ENDPOINT` and the other standard
        /// variables do the same, gRPC included.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
    },
    /// Create or update an agency from a YAML (or JSON) file.
    Import { file: PathBuf },
    /// Print an agency as YAML.
    Export {
        name: String,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// List the agencies.
    List,
    /// Talk to an agency: one turn with --message, else a terminal chat showing the agents' trace.
    Chat {
        name: String,
        #[arg(short, long)]
        message: Option<String>,
        /// With --message: print the turn as JSON.
        #[arg(long, requires = "message")]
        json: bool,
        /// Continue this conversation instead of starting one.
        #[arg(long)]
        conversation: Option<ConversationId>,
    },
    /// Serve an agency as an MCP server over stdio (for a local client that starts this
    /// command): its one tool asks the team. See docs/mcp-server.md.
    Mcp { name: String },
    /// API keys for an agency's OpenAI-compatible endpoint.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Provider API keys stored in the database, sealed under the master key.
    #[command(subcommand)]
    ProviderKey(ProviderKeyCommand),
    /// The master key that seals stored provider keys.
    #[command(subcommand)]
    MasterKey(MasterKeyCommand),
    /// Score bots against a real conversation: every reply of PERSON in TRANSCRIPT is asked
    /// of each bot, given what came before it, and its answer is compared with the original
    /// by embedding similarity (see docs/eval.md).
    Eval(EvalArgs),
}

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Make a key for AGENCY; it is printed once and stored only as a keyed hash.
    Create {
        agency: String,
        #[arg(long)]
        name: String,
        /// How long it lasts: `1s`, `15m`, `12h`, `30d`, `1w` (default: until revoked).
        #[arg(long, value_parser = parse_duration)]
        expires_in: Option<std::time::Duration>,
        /// Requests per minute (default 600).
        #[arg(long)]
        rate_limit: Option<u32>,
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Set or change the budgets of the agency's key NAME (at once; without
    /// `--budget-usd` or `--user-budget-usd` that budget is removed).
    Budget {
        agency: String,
        name: String,
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// The agency's keys: name, prefix, created, expires, last used, revoked, budgets and
    /// what they spent this period.
    List { agency: String },
    /// Revoke the agency's key NAME.
    Revoke { agency: String, name: String },
}

/// A key's budgets (see docs/budgets.md).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct BudgetArgs {
    /// What the key may spend per period, in dollars (all its end users together).
    #[arg(long)]
    pub budget_usd: Option<String>,
    /// When the budgets renew: day, week, month (default; at midnight UTC) or total.
    #[arg(long)]
    pub budget_period: Option<String>,
    /// What each end user of the key (OpenAI's `user` / `safety_identifier`) may spend per
    /// period, in dollars.
    #[arg(long)]
    pub user_budget_usd: Option<String>,
}

impl BudgetArgs {
    pub fn budgets(&self) -> Result<agency_core::KeyBudgets, agency_runtime::RuntimeError> {
        agency_runtime::spend::key_budgets(
            self.budget_usd.as_deref(),
            self.budget_period.as_deref(),
            self.user_budget_usd.as_deref(),
        )
    }
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    agency_core::apikey::parse_duration(s)
        .ok_or_else(|| format!("`{s}` is not a duration: write e.g. 90s, 15m, 12h, 30d or 2w"))
}

#[derive(Subcommand)]
pub enum ProviderKeyCommand {
    /// Store the key for provider NAME, read from standard input (e.g. `printf %s "$KEY" |
    /// agency provider-key set openai`). It is never printed again.
    Set { name: String },
    /// The stored keys, masked.
    List,
    /// Forget the key for provider NAME.
    Delete { name: String },
}

#[derive(Subcommand)]
pub enum MasterKeyCommand {
    /// Make a new master key and re-seal every stored provider key under it.
    Rotate,
}

/// What `agency eval` is asked to do.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// A transcript: JSON `{"users": [...], "messages": [...]}`.
    pub transcript: PathBuf,
    /// Whom the bots emulate: a user's id or username in the transcript.
    #[arg(long)]
    pub person: String,
    /// A webhook bot's endpoint, `URL` or `LABEL=URL` (repeatable). Endpoints on this
    /// machine and private networks are allowed: these are your own bots.
    #[arg(long = "bot")]
    pub bots: Vec<String>,
    /// The caller key endpoint bots are sent in `X-CALLER-KEY`.
    #[arg(long, env = "AGENCY_BOT_KEY", hide_env_values = true)]
    pub bot_key: Option<String>,
    /// One of our agents, `AGENCY:AGENT` (repeatable): AGENCY an agency file or the name
    /// of an imported agency, AGENT one of its agents.
    #[arg(long = "agent")]
    pub agents: Vec<String>,
    /// An OpenAI-compatible embeddings endpoint (`…/v1`), its key in
    /// `AGENCY_EMBEDDINGS_KEY`. Without it, all-MiniLM-L6-v2 runs on this machine.
    #[arg(long)]
    pub embeddings_url: Option<String>,
    #[arg(long, default_value = "text-embedding-3-small")]
    pub embeddings_model: String,
    /// The local model's folder (config.json, tokenizer.json, model.safetensors).
    #[arg(long, env = "AGENCY_EMBEDDINGS_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as an HTML page with a chart.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

/// One `--trusted-proxy`: an address or a network, checked before anything starts.
fn trusted_proxy(value: &str) -> Result<String, String> {
    agency_server::TrustedProxies::parse(&[value]).map(|_| value.to_string())
}

/// One `--cors-origin`: an origin or `*`, checked before anything starts.
fn cors_origin(value: &str) -> Result<String, String> {
    agency_server::CorsOrigins::parse(&[value]).map(|_| value.to_string())
}
