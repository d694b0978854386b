//! `agency`: the one binary. Serves the HTTP API, imports and exports agency files, and chats
//! with an agency from the terminal. `cli` says what each command takes, `commands/` what it
//! does; this file reads the configuration and starts the runtime.

mod cli;
mod commands;

use std::process::ExitCode;

use agency_file::AgencyFile;
use agency_providers::Providers;
use agency_runtime::secrets::{MASTER_KEY_ENV, MasterKeySource};
use agency_runtime::{LOCAL_OWNER, Runtime};
use anyhow::Context;
use clap::Parser;
use cli::{Cli, Command, MasterKeyCommand};
use secrecy::SecretString;

/// mimalloc: against glibc's allocator it cut the endpoint's CPU per request by about a fifth
/// (`cargo bench -p agency-server --bench endpoint`, which uses it too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The embedded broker logs every client's disconnection as an error, and the MCP SDK
    // every session's start and end at `info`: quiet by default
    // (AGENCY_LOG=info,rumqttd=info,rmcp=info shows them).
    let serving = matches!(cli.command, Command::Serve { .. });
    let settings = match agency_telemetry::Settings::from_env(if serving {
        "info,rumqttd=off,rmcp=warn"
    } else {
        "warn"
    }) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|rt| rt.block_on(start(cli, settings)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs, traces and metrics (see `agency-telemetry`), then the command; what is still queued
/// for export leaves before the process ends.
async fn start(cli: Cli, mut settings: agency_telemetry::Settings) -> anyhow::Result<()> {
    if let Command::Serve {
        metrics_listen,
        otlp_endpoint,
        ..
    } = &cli.command
    {
        settings.otlp = true;
        settings.prometheus = metrics_listen.is_some();
        settings.otlp_endpoint.clone_from(otlp_endpoint);
    }
    let telemetry = std::sync::Arc::new(agency_telemetry::init(settings)?);
    let result = run(cli, telemetry.clone()).await;
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    result
}

async fn run(
    cli: Cli,
    telemetry: std::sync::Arc<agency_telemetry::Telemetry>,
) -> anyhow::Result<()> {
    let master_key = match std::env::var(MASTER_KEY_ENV) {
        Ok(hex) if !hex.trim().is_empty() => MasterKeySource::Hex(SecretString::from(hex)),
        _ => MasterKeySource::File(cli.master_key_file.clone()),
    };
    let store = agency_store::open(&cli.db).await?;
    // Before the server's providers are built: building them may need the keys these repair.
    let repair = || {
        Runtime::with_master_key(
            store.clone(),
            Providers::builtin(),
            Some(master_key.clone()),
        )
    };
    match &cli.command {
        Command::ProviderKey(c) => {
            let rt = repair();
            let owner = owner_of(&rt, cli.owner.as_deref()).await?;
            return commands::keys::provider_key(&rt, &owner, c).await;
        }
        Command::MasterKey(MasterKeyCommand::Rotate) => {
            return commands::keys::rotate_master_key(&repair()).await;
        }
        _ => {}
    }
    let Configured { specs, mcp_servers } = configured(cli.config.as_deref())?;
    let base = builtin_providers(&cli)?;
    let tool_servers: Vec<String> = mcp_servers.iter().map(|(n, _)| n.clone()).collect();
    let rt = Runtime::open(store, base, &specs, mcp_servers, master_key).await?;
    // The demo agency, the first time a database is opened.
    let studio = agency_file::examples::example("studio").context("the studio example")?;
    let demo = AgencyFile::parse("examples/studio.yaml", studio.file)?;
    rt.agencies()
        .seed("demo-agency-imported", LOCAL_OWNER, &demo.draft)
        .await?;
    let owner = match cli.command {
        Command::Serve { .. } => LOCAL_OWNER.to_string(),
        _ => owner_of(&rt, cli.owner.as_deref()).await?,
    };
    match cli.command {
        command @ Command::Serve { .. } => {
            let paths = (cli.db.clone(), cli.config.clone());
            serve(rt, command, paths, (&specs, tool_servers), &telemetry).await
        }
        Command::Import { file } => commands::agencies::import(&rt, &owner, &file).await,
        Command::Export { name, output } => {
            commands::agencies::export(&rt, &owner, &name, output).await
        }
        Command::List => commands::agencies::list(&rt, &owner).await,
        Command::Keys(command) => commands::keys::keys(&rt, &owner, command).await,
        // Handled above, before the runtime starts.
        Command::ProviderKey(_) | Command::MasterKey(_) => Ok(()),
        Command::Eval(args) => commands::eval::run(&rt, args).await,
        Command::Chat {
            name,
            message,
            json,
            conversation,
        } => commands::chat::run(&rt, &owner, &name, message, json, conversation).await,
        Command::Mcp { name } => {
            let agency = std::sync::Arc::new(rt.agencies().get(&owner, &name).await?);
            agency_server::mcp::stdio::serve(
                rt.clone(),
                agency,
                tokio::io::stdin(),
                tokio::io::stdout(),
            )
            .await
            .context("serving MCP on stdio")
        }
    }
}

/// `agency serve`: the operator's settings given to the runtime, then the server, until it
/// stops.
async fn serve(
    rt: std::sync::Arc<Runtime>,
    command: Command,
    (db, config): (String, Option<std::path::PathBuf>),
    (specs, tool_servers): (&[agency_core::ProviderSpec], Vec<String>),
    telemetry: &agency_telemetry::Telemetry,
) -> anyhow::Result<()> {
    let Command::Serve {
        listen,
        mqtt,
        mqtt_require_key,
        max_connections,
        max_connections_per_address,
        header_timeout,
        cors_origins,
        client_tools_wait,
        approval_timeout,
        mcp_idle_secs,
        trusted_proxies,
        metrics_listen,
        ..
    } = command
    else {
        return Ok(());
    };
    rt.set_client_tools_wait(std::time::Duration::from_secs(client_tools_wait));
    rt.set_approval_timeout(std::time::Duration::from_secs(approval_timeout));
    rt.set_mcp_idle(std::time::Duration::from_secs(mcp_idle_secs));
    let cors = agency_server::CorsOrigins::parse(&cors_origins).map_err(anyhow::Error::msg)?;
    let connections = agency_server::Connections {
        max: commands::serve::within_file_limit(max_connections),
        max_per_address: max_connections_per_address,
        header_timeout: std::time::Duration::from_secs(header_timeout.max(1)),
        trusted_proxies: agency_server::TrustedProxies::parse(&trusted_proxies)
            .map_err(anyhow::Error::msg)?,
    };
    let loaded = commands::serve::Loaded {
        db,
        config,
        providers: specs.iter().map(|s| s.name.clone()).collect(),
        tool_servers,
        local_agencies: rt
            .agencies()
            .list(LOCAL_OWNER)
            .await?
            .into_iter()
            .map(|a| a.agency.name)
            .collect(),
    };
    let metrics = metrics_listen.zip(telemetry.prometheus());
    let mqtt = match mqtt {
        Some(url) => Some(agency_mqtt::MqttConfig {
            require_key: mqtt_require_key,
            ..agency_mqtt::MqttConfig::parse(&url)?
        }),
        None => None,
    };
    commands::serve::serve(rt, loaded, listen, mqtt, connections, cors, metrics).await
}

/// The server's own providers before its configured ones: the built-in, with the HTTP settings
/// and the addresses the operator allows.
fn builtin_providers(cli: &Cli) -> anyhow::Result<Providers> {
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
    Ok(base)
}

/// Whose agencies a command works on: the account with `--owner EMAIL`, else the CLI's local
/// owner.
async fn owner_of(rt: &Runtime, email: Option<&str>) -> anyhow::Result<String> {
    match email {
        Some(email) => rt
            .accounts()
            .owner_of_email(email)
            .await
            .with_context(|| format!("--owner {email}")),
        None => Ok(LOCAL_OWNER.to_string()),
    }
}

/// What the operator's configuration gives every agency.
struct Configured {
    /// `openai`, `anthropic` and `ollama` by default, then those of the configuration file
    /// (replacing defaults of the same name).
    specs: Vec<agency_core::ProviderSpec>,
    /// The configuration's MCP servers.
    mcp_servers: Vec<(String, agency_core::McpServer)>,
}

fn configured(config: Option<&std::path::Path>) -> anyhow::Result<Configured> {
    let mut specs = agency_providers::default_specs();
    let mut mcp_servers = Vec::new();
    if let Some(path) = config {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the configuration {source}"))?;
        let file = agency_file::ConfigFile::parse(&source, &text)?;
        let configured = file.validate()?;
        specs.retain(|d| !configured.iter().any(|c| c.name == d.name));
        specs.extend(configured);
        mcp_servers = file.validate_mcp_servers()?;
    }
    Ok(Configured { specs, mcp_servers })
}
