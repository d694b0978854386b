//! The real app for the server's tests, started the way `agency serve` starts it: a fresh
//! SQLite file and master key in a folder of the test's, on 127.0.0.1 and a free port.

#![allow(dead_code, clippy::unwrap_used)] // each test binary uses part of it

use std::path::Path;
use std::sync::Arc;

use agency_providers::Providers;
use agency_runtime::Runtime;
use agency_runtime::secrets::MasterKeySource;

/// A server running until the test ends.
pub struct Served {
    pub base: String,
    pub rt: Arc<Runtime>,
    /// What stored keys (provider keys, the API keys' secret) are sealed under.
    pub master: MasterKeySource,
}

/// Serves on `providers`, holding connections as `connections` says.
pub async fn serve(
    dir: &Path,
    providers: Providers,
    connections: agency_server::Connections,
) -> Served {
    let url = format!("sqlite://{}", dir.join("agency.db").display());
    let store = agency_store::open(&url).await.unwrap();
    let master = MasterKeySource::File(dir.join("agency.key"));
    let rt = Runtime::with_master_key(store, providers, Some(master.clone()));
    let keyring = agency_runtime::keys::Keyring::load(&**rt.store(), &master)
        .await
        .unwrap();
    let auth = Arc::new(agency_runtime::keys::Authenticator::new(
        rt.store().clone(),
        keyring,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(agency_server::serve(
        agency_server::AppState {
            rt: rt.clone(),
            auth,
        },
        listener,
        connections,
        std::future::pending(),
    ));
    Served { base, rt, master }
}
