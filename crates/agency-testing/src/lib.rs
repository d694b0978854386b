//! The real app for tests (the server's and the MQTT crate's), started the way `agency serve`
//! starts it: a fresh SQLite file and master key in a folder of the test's, on 127.0.0.1 and a
//! free port. A crate of its own, so that the server's library does not carry it (nor the
//! store it opens).

use std::path::Path;
use std::sync::Arc;

use agency_providers::Providers;
use agency_runtime::Runtime;
use agency_runtime::keys::Authenticator;
use agency_runtime::secrets::MasterKeySource;

use agency_server::{AppState, Connections, CorsOrigins};

/// A server running until the test's runtime ends.
pub struct Served {
    pub base: String,
    pub rt: Arc<Runtime>,
    /// What stored keys (provider keys, the API keys' secret) are sealed under.
    pub master: MasterKeySource,
    /// The runtime's store, for tests to look at what it wrote.
    pub store: Arc<dyn agency_store::Store>,
    /// The server's API keys, for tests to make some.
    pub auth: Arc<Authenticator>,
}

/// Serves on `providers` and the operator's MCP `servers` with its database and master key in
/// `dir`, holding connections as `connections` says.
pub async fn serve(
    dir: &Path,
    providers: Providers,
    servers: Vec<(String, agency_core::McpServer)>,
    connections: Connections,
) -> Result<Served, Box<dyn std::error::Error + Send + Sync>> {
    serve_with_cors(dir, providers, servers, connections, CorsOrigins::None).await
}

/// [`serve`], letting pages of `cors` origins call the OpenAI endpoints.
pub async fn serve_with_cors(
    dir: &Path,
    providers: Providers,
    servers: Vec<(String, agency_core::McpServer)>,
    connections: Connections,
    cors: CorsOrigins,
) -> Result<Served, Box<dyn std::error::Error + Send + Sync>> {
    let url = format!("sqlite://{}", dir.join("agency.db").display());
    let store = agency_store::open(&url).await?;
    let master = MasterKeySource::File(dir.join("agency.key"));
    let tools = agency_runtime::tools::Tools::new(servers, providers.allows_private());
    let rt = Runtime::assemble(store.clone(), providers, Some(master.clone()), tools);
    let auth = Arc::new(rt.authenticator().await?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let state = AppState {
        rt: rt.clone(),
        auth: auth.clone(),
        cors,
    };
    tokio::spawn(agency_server::serve(
        state,
        listener,
        connections,
        std::future::pending(),
    ));
    Ok(Served {
        base,
        rt,
        master,
        store,
        auth,
    })
}
