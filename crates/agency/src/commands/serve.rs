//! `agency serve`: the HTTP server, with MQTT when asked.

use std::net::SocketAddr;
use std::sync::Arc;

use agency_runtime::Runtime;
use anyhow::Context;

/// File descriptors kept for what is not a client's connection: the database, the providers'
/// and bots' connections, the broker, logs.
const RESERVED_FILES: u64 = 256;

/// Raises the open-file limit as far as the system allows, and returns `wanted` lowered to
/// what it leaves for connections: a server that runs out of descriptors stops accepting.
pub fn within_file_limit(wanted: usize) -> usize {
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

/// What the server started with, said once it listens: where to go first.
pub struct Loaded {
    pub db: String,
    pub config: Option<std::path::PathBuf>,
    /// The providers every agency may use, by name.
    pub providers: Vec<String>,
    /// The MCP servers of the configuration, by name (`builtin` is always there).
    pub tool_servers: Vec<String>,
    /// The CLI's local owner's agencies (the demo `studio` on a new database).
    pub local_agencies: Vec<String>,
}

impl Loaded {
    /// The lines `serve` prints after the one saying where it listens.
    fn lines(&self, addr: SocketAddr) -> [String; 3] {
        let examples: Vec<&str> = agency_file::examples::EXAMPLES
            .iter()
            .map(|e| e.name)
            .collect();
        let config = self
            .config
            .as_ref()
            .map_or("no --config".to_string(), |c| c.display().to_string());
        let local = if self.local_agencies.is_empty() {
            "none".to_string()
        } else {
            self.local_agencies.join(", ")
        };
        [
            format!(
                "agency: open http://{addr}/signup in a browser, make an account, and start from an example ({})",
                examples.join(", ")
            ),
            format!(
                "agency: loaded {}, {config}; providers: builtin, {}; tool servers: {}",
                self.db,
                self.providers.join(", "),
                std::iter::once("builtin")
                    .chain(self.tool_servers.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "agency: the CLI's own agencies: {local} (`agency chat NAME`; `--owner EMAIL` reaches an account's)"
            ),
        ]
    }
}

pub async fn serve(
    rt: Arc<Runtime>,
    loaded: Loaded,
    listen: SocketAddr,
    mut mqtt: Option<agency_mqtt::MqttConfig>,
    connections: agency_server::Connections,
    cors: agency_server::CorsOrigins,
    metrics: Option<(SocketAddr, agency_telemetry::Prometheus)>,
) -> anyhow::Result<()> {
    if let Some(config) = &mut mqtt {
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
    let metrics = match metrics {
        Some((addr, prometheus)) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for metrics"))?;
            Some((listener, prometheus))
        }
        None => None,
    };
    rt.keep_alive().await?;
    let lost = rt.rooms().recover().await?;
    if lost > 0 {
        tracing::warn!(
            answers = lost,
            "room answers in flight when the server last stopped are shown as failures, with Retry"
        );
    }
    tokio::spawn(tend(rt.clone()));
    rt.observe_sessions();
    let auth = Arc::new(rt.authenticator().await?);
    // Live views show what other servers on the database do (PostgreSQL).
    rt.hear_others().await?;
    let addr = listener.local_addr()?;
    let shutdown = shutdown_signal()?;
    tracing::info!("listening on http://{addr}");
    println!("agency: listening on http://{addr}");
    for line in loaded.lines(addr) {
        println!("{line}");
    }
    let metrics = match metrics {
        Some((listener, prometheus)) => {
            let addr = listener.local_addr()?;
            tracing::info!("Prometheus metrics on http://{addr}/metrics");
            println!("agency: metrics on http://{addr}/metrics");
            Some(tokio::spawn(agency_server::serve_metrics(
                listener, prometheus,
            )))
        }
        None => None,
    };
    log_cors(&cors);
    let state = agency_server::AppState {
        rt: rt.clone(),
        auth: auth.clone(),
        cors,
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mqtt = mqtt.map(|config| {
        let mut stopped = stopped.clone();
        tokio::spawn(agency_mqtt::serve(
            rt.clone(),
            auth.clone(),
            config,
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            },
        ))
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
    // The stdio MCP servers' processes, stopped before the process exits without them.
    rt.close_tools().await;
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    Ok(())
}

/// Which browsers' pages the OpenAI endpoints answer, in the log.
fn log_cors(cors: &agency_server::CorsOrigins) {
    match cors {
        agency_server::CorsOrigins::None => {}
        agency_server::CorsOrigins::Any => {
            tracing::info!("the OpenAI endpoints answer browsers of any origin (CORS)");
        }
        agency_server::CorsOrigins::Only(origins) => {
            tracing::info!(origins = %origins.join(", "), "the OpenAI endpoints answer browsers of these origins (CORS)");
        }
    }
}

/// Says this server is alive, every few seconds; and now and then records as failures the room
/// answers that another server on the database was giving when it died.
async fn tend(rt: Arc<agency_runtime::Runtime>) {
    let mut tick = tokio::time::interval(agency_runtime::rooms::ALIVE_EVERY);
    for n in 0u64.. {
        tick.tick().await;
        if let Err(e) = rt.keep_alive().await {
            tracing::warn!(error = %e, "cannot tell the database this server is alive");
        }
        if n % 3 == 2 {
            match rt.rooms().recover().await {
                Ok(0) => {}
                Ok(lost) => tracing::warn!(
                    answers = lost,
                    "room answers a stopped server was giving are shown as failures, with Retry"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look for room answers a stopped server left")
                }
            }
        }
    }
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
