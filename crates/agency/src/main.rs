//! `agency`: the one binary. Serves the HTTP API, imports and exports agency files, and chats
//! with an agency from the terminal.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agency_core::{Agency, ConversationId, MessageKind};
use agency_file::AgencyFile;
use agency_providers::Providers;
use agency_runtime::secrets::{self, MASTER_KEY_ENV, MasterKeySource};
use agency_runtime::{Event, LOCAL_OWNER, Runtime, RuntimeError, TurnOutcome};
use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use secrecy::SecretString;

/// mimalloc: against glibc's allocator it cut the endpoint's CPU per request by about a fifth
/// (`cargo bench -p agency-server --bench endpoint`, which uses it too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The demo agency, imported on the first start of an empty database.
const DEMO: &str = include_str!("../../../examples/studio.yaml");

#[derive(Parser)]
#[command(
    name = "agency",
    version,
    about = "A team of LLM agents behind one endpoint"
)]
struct Cli {
    /// Database URL: sqlite://PATH or postgres://USER@HOST/DB.
    #[arg(
        long,
        global = true,
        env = "AGENCY_DB",
        default_value = "sqlite://agency.db"
    )]
    db: String,
    /// Server configuration: the providers every agency can use (YAML, as an agency file's
    /// `providers:`).
    #[arg(long, global = true, env = "AGENCY_CONFIG")]
    config: Option<PathBuf>,
    /// The master key that seals stored secrets (created, mode 0600, by the first `serve`, or
    /// the first key stored). `AGENCY_MASTER_KEY` (64 hex digits) takes precedence.
    #[arg(
        long,
        global = true,
        env = "AGENCY_MASTER_KEY_FILE",
        default_value = "agency.key"
    )]
    master_key_file: PathBuf,
    /// Seconds a streamed model call waits for the provider's first byte before trying again
    /// (a call answered whole waits 120).
    #[arg(
        long,
        global = true,
        env = "AGENCY_STREAM_FIRST_BYTE_TIMEOUT",
        default_value_t = 30
    )]
    stream_first_byte_timeout: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the HTTP server.
    Serve {
        #[arg(long, env = "AGENCY_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Also speak the XMAGS MQTT protocol through this broker:
        /// mqtt://[USER[:PASSWORD]@]HOST[:PORT][?client_id=ID&share=GROUP], or mqtts://; or
        /// `embedded`: a broker inside the process on 127.0.0.1:1883 (embedded://HOST:PORT).
        #[arg(long, env = "AGENCY_MQTT")]
        mqtt: Option<String>,
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
    Eval {
        /// A transcript: JSON `{"users": [...], "messages": [...]}`.
        transcript: PathBuf,
        /// Whom the bots emulate: a user's id or username in the transcript.
        #[arg(long)]
        person: String,
        /// A webhook bot's endpoint, `URL` or `LABEL=URL` (repeatable). Endpoints on this
        /// machine and private networks are allowed: these are your own bots.
        #[arg(long = "bot")]
        bots: Vec<String>,
        /// The caller key endpoint bots are sent in `X-CALLER-KEY`.
        #[arg(long, env = "AGENCY_BOT_KEY", hide_env_values = true)]
        bot_key: Option<String>,
        /// One of our agents, `AGENCY:AGENT` (repeatable): AGENCY an agency file or the name
        /// of an imported agency, AGENT one of its agents.
        #[arg(long = "agent")]
        agents: Vec<String>,
        /// An OpenAI-compatible embeddings endpoint (`…/v1`), its key in
        /// `AGENCY_EMBEDDINGS_KEY`. Without it, all-MiniLM-L6-v2 runs on this machine.
        #[arg(long)]
        embeddings_url: Option<String>,
        #[arg(long, default_value = "text-embedding-3-small")]
        embeddings_model: String,
        /// The local model's folder (config.json, tokenizer.json, model.safetensors).
        #[arg(long, env = "AGENCY_EMBEDDINGS_MODEL_DIR")]
        model_dir: Option<PathBuf>,
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write the report as an HTML page with a chart.
        #[arg(long)]
        html: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
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
    },
    /// The agency's keys: name, prefix, created, expires, last used, revoked.
    List { agency: String },
    /// Revoke the agency's key NAME.
    Revoke { agency: String, name: String },
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    agency_core::apikey::parse_duration(s)
        .ok_or_else(|| format!("`{s}` is not a duration: write e.g. 90s, 15m, 12h, 30d or 2w"))
}

#[derive(Subcommand)]
enum ProviderKeyCommand {
    /// Store the key for provider NAME, read from standard input (e.g. `printf %s "$KEY" |
    /// agency provider-key set openai`). It is never printed again.
    Set { name: String },
    /// The stored keys, masked.
    List,
    /// Forget the key for provider NAME.
    Delete { name: String },
}

#[derive(Subcommand)]
enum MasterKeyCommand {
    /// Make a new master key and re-seal every stored provider key under it.
    Rotate,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let serving = matches!(cli.command, Command::Serve { .. });
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENCY_LOG")
                // The embedded broker logs every client's disconnection as an error: quiet by
                // default (AGENCY_LOG=info,rumqttd=info shows it).
                .unwrap_or_else(|_| (if serving { "info,rumqttd=off" } else { "warn" }).into()),
        )
        .init();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|rt| rt.block_on(run(cli)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let master_key = match std::env::var(MASTER_KEY_ENV) {
        Ok(hex) if !hex.trim().is_empty() => MasterKeySource::Hex(SecretString::from(hex)),
        _ => MasterKeySource::File(cli.master_key_file.clone()),
    };
    let store = agency_store::open(&cli.db).await?;
    match &cli.command {
        Command::ProviderKey(c) => return provider_key(&*store, &master_key, c).await,
        Command::MasterKey(MasterKeyCommand::Rotate) => {
            let (n, new_key) = secrets::rotate_master_key(&*store, &master_key).await?;
            match new_key {
                None => println!("rotated the master key; re-sealed {n} stored key(s)"),
                Some(hex) => println!(
                    "re-sealed {n} stored key(s) under a new master key; set {MASTER_KEY_ENV} to it now:\n{hex}"
                ),
            }
            return Ok(());
        }
        _ => {}
    }
    let specs = server_provider_specs(cli.config.as_deref())?;
    let mut base = Providers::builtin();
    base.set_http(agency_providers::http::HttpSettings {
        stream_first_byte_timeout: std::time::Duration::from_secs(
            cli.stream_first_byte_timeout.max(1),
        ),
        ..Default::default()
    });
    if let Command::Serve {
        allow_private_addresses: true,
        ..
    } = &cli.command
    {
        base.allow_private_addresses()?;
    }
    let providers =
        agency_runtime::providers::build(&base, &specs, LOCAL_OWNER, &*store, Some(&master_key))
            .await?;
    let master_key_for_keys = master_key.clone();
    let rt = Runtime::with_master_key(store, providers, Some(master_key));
    seed_demo(&rt).await?;
    match cli.command {
        Command::Serve {
            listen,
            mqtt,
            max_connections,
            max_connections_per_address,
            header_timeout,
            ..
        } => {
            let connections = agency_server::Connections {
                max: within_file_limit(max_connections),
                max_per_address: max_connections_per_address,
                header_timeout: std::time::Duration::from_secs(header_timeout.max(1)),
            };
            serve(rt, &master_key_for_keys, listen, mqtt, connections).await
        }
        Command::Import { file } => import(&rt, &file).await,
        Command::Export { name, output } => export(&rt, &name, output).await,
        Command::List => list(&rt).await,
        Command::Keys(command) => keys(&rt, &master_key_for_keys, command).await,
        // Handled above, before the runtime starts.
        Command::ProviderKey(_) | Command::MasterKey(_) => Ok(()),
        Command::Eval {
            transcript,
            person,
            bots,
            bot_key,
            agents,
            embeddings_url,
            embeddings_model,
            model_dir,
            json,
            html,
        } => {
            let embedder: Box<dyn agency_eval::Embedder> = match embeddings_url {
                Some(base_url) => Box::new(agency_eval::embed::OpenAiEmbeddings {
                    base_url,
                    model: embeddings_model,
                    key: std::env::var("AGENCY_EMBEDDINGS_KEY")
                        .ok()
                        .filter(|k| !k.is_empty())
                        .map(SecretString::from),
                    client: reqwest::Client::new(),
                }),
                None => {
                    let Some(dir) = model_dir else {
                        bail!("no embeddings: {}", agency_eval::embed::INSTALL);
                    };
                    Box::new(agency_eval::embed::LocalModel::load(&dir)?)
                }
            };
            let run = EvalRun {
                transcript,
                person,
                bots,
                bot_key,
                agents,
                json,
                html,
            };
            evaluate(&rt, &master_key_for_keys, run, &*embedder).await
        }
        Command::Chat {
            name,
            message,
            json,
            conversation,
        } => {
            let agency = rt.agency(LOCAL_OWNER, &name).await?;
            let conversation = match conversation {
                Some(id) => {
                    let c = rt.store().conversation(id).await?;
                    match c {
                        Some(c) if c.agency_id == agency.id => id,
                        _ => bail!("agency `{name}` has no conversation {id}"),
                    }
                }
                None => rt.start_conversation(&agency).await?.id,
            };
            let result = match message {
                Some(text) => chat_once(&rt, conversation, text, json).await,
                None => chat(&rt, &agency, conversation).await,
            };
            rt.settle().await;
            result
        }
    }
}

/// The server's providers: `openai`, `anthropic` and `ollama` by default, then those of the
/// configuration file (replacing defaults of the same name).
fn server_provider_specs(
    config: Option<&std::path::Path>,
) -> anyhow::Result<Vec<agency_core::ProviderSpec>> {
    let mut specs = agency_providers::default_specs();
    if let Some(path) = config {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the configuration {source}"))?;
        let configured = agency_file::ConfigFile::parse(&source, &text)?.validate()?;
        specs.retain(|d| !configured.iter().any(|c| c.name == d.name));
        specs.extend(configured);
    }
    Ok(specs)
}

async fn keys(
    rt: &Runtime,
    master_key: &MasterKeySource,
    command: KeysCommand,
) -> anyhow::Result<()> {
    let store = rt.store();
    match command {
        KeysCommand::Create {
            agency,
            name,
            expires_in,
            rate_limit,
        } => {
            let agency = rt.agency(LOCAL_OWNER, &agency).await?;
            let keyring = agency_runtime::keys::Keyring::load(&**store, master_key).await?;
            let (key, plain) = agency_runtime::keys::create_key(
                &**store, &keyring, &agency, &name, expires_in, rate_limit,
            )
            .await?;
            eprintln!(
                "created key `{}` for {} ({} requests/minute{}). It is shown this once:",
                key.name,
                agency.name,
                key.rate_limit_per_minute,
                key.expires_at
                    .map(|t| format!(", expires {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
                    .unwrap_or_default()
            );
            println!("{}", secrecy::ExposeSecret::expose_secret(&plain));
        }
        KeysCommand::List { agency } => {
            let agency = rt.agency(LOCAL_OWNER, &agency).await?;
            let keys = store.api_keys(agency.id).await?;
            if keys.is_empty() {
                println!(
                    "no keys: `agency keys create {} --name dev` makes one",
                    agency.name
                );
            }
            let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
                t.map_or_else(
                    || "-".to_string(),
                    |t| t.format("%Y-%m-%d %H:%M").to_string(),
                )
            };
            println!(
                "{:<16} {:<14} {:<17} {:<17} {:<17} REVOKED",
                "NAME", "PREFIX", "CREATED", "EXPIRES", "LAST USED"
            );
            for k in keys {
                println!(
                    "{:<16} {:<14} {:<17} {:<17} {:<17} {}",
                    k.name,
                    format!("{}…", k.prefix),
                    when(Some(k.created_at)),
                    when(k.expires_at),
                    when(k.last_used_at),
                    when(k.revoked_at)
                );
            }
        }
        KeysCommand::Revoke { agency, name } => {
            let agency = rt.agency(LOCAL_OWNER, &agency).await?;
            if store
                .revoke_api_key(agency.id, &name, chrono::Utc::now())
                .await?
            {
                println!("revoked key `{name}` of {}", agency.name);
            } else {
                bail!("{} has no unrevoked key named `{name}`", agency.name);
            }
        }
    }
    Ok(())
}

async fn provider_key(
    store: &dyn agency_store::Store,
    master_key: &MasterKeySource,
    command: &ProviderKeyCommand,
) -> anyhow::Result<()> {
    match command {
        ProviderKeyCommand::Set { name } => {
            let mut key = String::new();
            std::io::stdin()
                .read_line(&mut key)
                .context("cannot read the key from standard input")?;
            let key = SecretString::from(key.trim().to_string());
            let sealed =
                secrets::store_provider_key(store, master_key, LOCAL_OWNER, name, &key).await?;
            println!("stored the key for `{name}` (…{}), sealed", sealed.suffix);
        }
        ProviderKeyCommand::List => {
            let keys = store.provider_keys(LOCAL_OWNER).await?;
            if keys.is_empty() {
                println!("no stored provider keys");
            }
            for k in keys {
                println!(
                    "{:<20} …{:<6} stored {}",
                    k.provider,
                    k.suffix,
                    k.created_at.format("%Y-%m-%d %H:%M UTC")
                );
            }
        }
        ProviderKeyCommand::Delete { name } => {
            if store.delete_provider_key(LOCAL_OWNER, name).await? {
                println!("deleted the key for `{name}`");
            } else {
                bail!("no key is stored for `{name}`");
            }
        }
    }
    Ok(())
}

/// Imports the demo agency the first time an empty database is opened.
async fn seed_demo(rt: &Runtime) -> anyhow::Result<()> {
    if rt.store().claim_once("demo-agency-imported").await?
        && rt.store().list_agencies(LOCAL_OWNER).await?.is_empty()
    {
        let file = AgencyFile::parse("examples/studio.yaml", DEMO)?;
        rt.save_agency(&file.draft, LOCAL_OWNER).await?;
    }
    Ok(())
}

/// File descriptors kept for what is not a client's connection: the database, the providers'
/// and bots' connections, the broker, logs.
const RESERVED_FILES: u64 = 256;

/// Raises the open-file limit as far as the system allows, and returns `wanted` lowered to
/// what it leaves for connections: a server that runs out of descriptors stops accepting.
fn within_file_limit(wanted: usize) -> usize {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the open-file limit");
            return wanted;
        }
    };
    let room = usize::try_from(limit.saturating_sub(RESERVED_FILES).max(16)).unwrap_or(usize::MAX);
    if room < wanted {
        tracing::warn!(
            open_file_limit = limit,
            max_connections = room,
            "the open-file limit leaves room for fewer connections than --max-connections"
        );
    }
    wanted.min(room)
}

async fn serve(
    rt: Arc<Runtime>,
    master_key: &MasterKeySource,
    listen: SocketAddr,
    mqtt: Option<String>,
    connections: agency_server::Connections,
) -> anyhow::Result<()> {
    let mqtt = mqtt
        .map(|url| agency_mqtt::MqttConfig::parse(&url))
        .transpose()?;
    if let Some(config) = &mqtt {
        agency_mqtt::start_broker(config)?;
        if config.embedded {
            println!(
                "agency: MQTT broker on mqtt://{}:{}",
                config.host, config.port
            );
        }
    }
    // The port first: a server that cannot start makes no key files.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let lost = rt.recover_rooms().await?;
    if lost > 0 {
        tracing::warn!(
            answers = lost,
            "room answers in flight when the server last stopped are shown as failures, with Retry"
        );
    }
    let keyring = agency_runtime::keys::Keyring::load(&**rt.store(), master_key).await?;
    let auth = Arc::new(agency_runtime::keys::Authenticator::new(
        rt.store().clone(),
        keyring,
    ));
    let addr = listener.local_addr()?;
    let shutdown = shutdown_signal()?;
    tracing::info!("listening on http://{addr}");
    println!("agency: listening on http://{addr}");
    let state = agency_server::AppState {
        rt: rt.clone(),
        auth,
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mqtt = mqtt.map(|config| {
        let mut stopped = stopped.clone();
        tokio::spawn(agency_mqtt::serve(rt.clone(), config, async move {
            let _ = stopped.wait_for(|s| *s).await;
        }))
    });
    let shutdown = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    agency_server::serve(state, listener, connections, shutdown).await?;
    if let Some(mqtt) = mqtt {
        mqtt.await??;
    }
    rt.settle().await;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (what service managers send). Armed before the server says it
/// is listening, so no signal slips past.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    let ctrl_c = tokio::spawn(tokio::signal::ctrl_c());
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down: finishing requests in progress");
    })
}

async fn import(rt: &Runtime, path: &PathBuf) -> anyhow::Result<()> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {source}"))?;
    let file = AgencyFile::parse(&source, &text)?;
    let agency = match rt.save_agency(&file.draft, LOCAL_OWNER).await {
        Ok(a) => a,
        Err(RuntimeError::Validation(errors)) => return Err(file.locate(errors).into()),
        Err(e) => return Err(e.into()),
    };
    println!(
        "imported {} ({} agents, manager {})",
        agency.name,
        agency.agents.len(),
        agency.roster().display(Some(agency.manager))
    );
    Ok(())
}

async fn export(rt: &Runtime, name: &str, output: Option<PathBuf>) -> anyhow::Result<()> {
    let agency = rt.agency(LOCAL_OWNER, name).await?;
    let yaml = agency_file::to_yaml(&agency.to_draft());
    match output {
        Some(path) => std::fs::write(&path, yaml)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{yaml}"),
    }
    Ok(())
}

async fn list(rt: &Runtime) -> anyhow::Result<()> {
    let agencies = rt.store().list_agencies(LOCAL_OWNER).await?;
    if agencies.is_empty() {
        println!("no agencies yet: `agency import FILE` adds one");
    }
    for a in agencies {
        let names: Vec<&str> = a.agents.iter().map(|g| g.name.as_str()).collect();
        println!(
            "{:<24} {:<10} manager {:<16} agents: {}",
            a.name,
            a.protocol.as_str(),
            a.roster().display(Some(a.manager)),
            names.join(", ")
        );
    }
    Ok(())
}

async fn chat_once(
    rt: &Arc<Runtime>,
    conversation: ConversationId,
    text: String,
    json: bool,
) -> anyhow::Result<()> {
    let out = rt.send(conversation, text).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&turn_json(&out))?);
    } else {
        println!("{}", out.answer);
    }
    Ok(())
}

fn turn_json(out: &TurnOutcome) -> serde_json::Value {
    serde_json::json!({
        "conversation_id": out.conversation_id.to_string(),
        "answer": out.answer,
        "stopped_by": out.stopped_by.as_str(),
        "hops": out.hops,
        "usage": {
            "prompt_tokens": out.usage.prompt_tokens,
            "completion_tokens": out.usage.completion_tokens,
            "total_tokens": out.usage.total(),
        },
        "trace": out.trace.iter().map(|e| serde_json::json!({
            "from": e.from_name(&out.roster),
            "to": e.to_name(&out.roster),
            "kind": e.kind.as_str(),
            "text": e.text,
        })).collect::<Vec<_>>(),
    })
}

/// The terminal chat: each line is a turn; the agents' messages show as they happen.
async fn chat(
    rt: &Arc<Runtime>,
    agency: &Agency,
    conversation: ConversationId,
) -> anyhow::Result<()> {
    println!(
        "Chatting with {} (conversation {conversation}). Ctrl-D ends.",
        agency.name
    );
    let roster = agency.roster();
    let mut events = rt.subscribe();
    let show = |event: Event| {
        if let Event::Hop {
            conversation: c,
            entry,
            ..
        } = event
            && c == conversation
            && !matches!(entry.kind, MessageKind::Input | MessageKind::Answer)
        {
            println!(
                "  {} → {}: {}",
                entry.from_name(&roster),
                entry.to_name(&roster),
                entry.text.replace('\n', "\n    ")
            );
        }
    };
    let (lines_tx, mut lines) = tokio::sync::mpsc::channel::<String>(1);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if lines_tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    loop {
        print!("you> ");
        std::io::stdout().flush()?;
        let Some(line) = lines.recv().await else {
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        let turn = rt.send(conversation, line);
        tokio::pin!(turn);
        let result = loop {
            tokio::select! {
                Ok(event) = events.recv() => show(event),
                result = &mut turn => break result,
            }
        };
        while let Ok(event) = events.try_recv() {
            show(event);
        }
        match result {
            Ok(out) => {
                let note = if out.stopped_by.is_guard() {
                    format!(" [stopped: {}]", out.stopped_by.as_str())
                } else {
                    String::new()
                };
                println!("{}> {}{note}", agency.name, out.answer);
            }
            Err(e) => eprintln!("error: {e}"),
        }
    }
    println!();
    Ok(())
}

/// What `agency eval` was asked to do.
struct EvalRun {
    transcript: PathBuf,
    person: String,
    bots: Vec<String>,
    bot_key: Option<String>,
    agents: Vec<String>,
    json: bool,
    html: Option<PathBuf>,
}

async fn evaluate(
    rt: &Runtime,
    master_key: &MasterKeySource,
    run: EvalRun,
    embedder: &dyn agency_eval::Embedder,
) -> anyhow::Result<()> {
    let source = run.transcript.display().to_string();
    let text = std::fs::read_to_string(&run.transcript)
        .with_context(|| format!("cannot read the transcript {source}"))?;
    let transcript = agency_eval::transcript::parse(&source, &text)?;
    let Some(person) = transcript.user(&run.person).cloned() else {
        let names: Vec<String> = transcript
            .users
            .iter()
            .map(|u| format!("{} ({})", u.username, u.id))
            .collect();
        bail!(
            "no user `{}` in {source}; its users are {}",
            run.person,
            names.join(", ")
        );
    };
    if run.bots.is_empty() && run.agents.is_empty() {
        bail!("nothing to evaluate: give --bot URL or --agent AGENCY:AGENT (each may repeat)");
    }
    let mut contestants = Vec::new();
    // Evaluation calls the user's own bots, which often run on this machine.
    let client =
        agency_providers::bot::BotClient::new(agency_providers::bot::default_settings(), true)?;
    let key = SecretString::from(run.bot_key.unwrap_or_default());
    for bot in &run.bots {
        let (label, url) = match bot.split_once('=') {
            Some((label, url)) if !label.contains("://") => (label.to_string(), url.to_string()),
            _ => (bot.clone(), bot.clone()),
        };
        agency_providers::bot::parse_endpoint(&url)
            .map_err(|e| anyhow::anyhow!("--bot {bot}: {e}"))?;
        contestants.push(agency_eval::Contestant::Endpoint {
            label,
            url,
            key: key.clone(),
            client: client.clone(),
        });
    }
    for spec in &run.agents {
        contestants.push(eval_agent(rt, master_key, spec).await?);
    }
    let bar = agency_eval::Bar::new();
    let cards = agency_eval::evaluate(&transcript, &person, &contestants, embedder, &bar).await?;
    if run.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&agency_eval::report::json(&transcript, &person, &cards))?
        );
    } else {
        print!(
            "{}",
            agency_eval::report::table(&transcript, &person, &cards)
        );
    }
    if let Some(path) = run.html {
        std::fs::write(
            &path,
            agency_eval::report::html(&transcript, &person, &cards),
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// `AGENCY:AGENT` as a contestant: the agent's model, with its role and instructions.
async fn eval_agent(
    rt: &Runtime,
    master_key: &MasterKeySource,
    spec: &str,
) -> anyhow::Result<agency_eval::Contestant> {
    let Some((agency_ref, agent_name)) = spec.rsplit_once(':') else {
        bail!("--agent {spec}: write AGENCY:AGENT, e.g. examples/studio.yaml:reviewer");
    };
    let path = std::path::Path::new(agency_ref);
    let agency = if path.is_file() {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {agency_ref}"))?;
        let file = agency_file::AgencyFile::parse(agency_ref, &text)?;
        file.draft
            .validate(agency_core::AgencyId::new(), LOCAL_OWNER, &|_| true)
            .map_err(|e| file.locate(e))?
    } else {
        rt.agency(LOCAL_OWNER, agency_ref).await?
    };
    let agent = agency
        .agents
        .iter()
        .find(|a| a.name == agent_name || a.handle.as_deref() == Some(agent_name))
        .ok_or_else(|| anyhow::anyhow!("agency `{}` has no agent `{agent_name}`", agency.name))?;
    let providers = agency_runtime::providers::build(
        rt.providers(),
        &agency.providers,
        LOCAL_OWNER,
        &**rt.store(),
        Some(master_key),
    )
    .await?;
    let answerer = providers
        .resolve(&agent.model)
        .ok_or_else(|| anyhow::anyhow!("no provider serves `{}`", agent.model))?;
    let mut instructions = String::new();
    if let Some(role) = &agent.role {
        instructions.push_str(&format!("Your role: {role}\n"));
    }
    for block in &agent.blocks {
        if let agency_core::Block::Text(t) = block {
            instructions.push_str(t);
            instructions.push('\n');
        }
    }
    Ok(agency_eval::Contestant::Agent {
        label: spec.to_string(),
        instructions,
        model: agent.model.clone(),
        answerer,
    })
}
