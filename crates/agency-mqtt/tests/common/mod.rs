//! A whole server for the MQTT tests: a fresh SQLite database, the runtime with the built-in
//! rules model, the HTTP API on 127.0.0.1:0 and the MQTT bridge on a real broker; and a client
//! that speaks to it with a stock MQTT library (rumqttc).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use agency_runtime::{LOCAL_OWNER, Runtime};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use secrecy::ExposeSecret;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// The broker the suites use: `AGENCY_TEST_MQTT` (`host:port`), default 127.0.0.1:1883.
pub fn broker_addr() -> String {
    std::env::var("AGENCY_TEST_MQTT").unwrap_or_else(|_| "127.0.0.1:1883".to_string())
}

/// The broker, if one answers; `None` (the test skips) when none does — unless `CI=true`,
/// where a missing broker fails the run.
pub async fn broker() -> Option<(String, u16)> {
    let addr = broker_addr();
    #[cfg(feature = "embedded")]
    if addr == "embedded" {
        return Some(("127.0.0.1".to_string(), embedded_broker().await));
    }
    match tokio::net::TcpStream::connect(&addr).await {
        Ok(_) => {}
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but the MQTT broker at {addr} is not reachable: {e}")
        }
        Err(e) => {
            eprintln!("skipping: the MQTT broker at {addr} is not reachable: {e}");
            return None;
        }
    }
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    Some((host.to_string(), port.parse().expect("a port")))
}

/// `AGENCY_TEST_MQTT=embedded`: an embedded broker of the test's own on a free port (its door
/// runs on the test's runtime, which ends with the test). A server started on that port
/// connects to it as `--mqtt embedded` does, and the first one opens its door.
#[cfg(feature = "embedded")]
pub async fn embedded_broker() -> u16 {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let broker = agency_mqtt::embedded::start(([127, 0, 0, 1], port).into()).unwrap();
    embedded_brokers().lock().unwrap().insert(port, broker);
    port
}

#[cfg(feature = "embedded")]
fn embedded_brokers()
-> &'static std::sync::Mutex<std::collections::HashMap<u16, Arc<agency_mqtt::embedded::Broker>>> {
    static BROKERS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<u16, Arc<agency_mqtt::embedded::Broker>>>,
    > = std::sync::OnceLock::new();
    BROKERS.get_or_init(Default::default)
}

/// An object's keys, sorted (to check a payload has exactly its fields).
pub fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

pub fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()[20..].to_string()
}

/// What a test server is made with; `Setup::default()` is the rules-model plant of
/// [`agency_yaml`], subscribed without a share group.
#[derive(Default)]
pub struct Setup {
    /// Providers beside the built-in rules model, by name (`NAME/model` in the agency file).
    pub providers: Vec<(String, Arc<dyn agency_providers::Provider>)>,
    /// The agency file for a name and a team handle; [`agency_yaml`] when unset.
    pub yaml: Option<fn(&str, &str) -> String>,
    /// `?share=GROUP`: subscribe through MQTT 5 shared subscriptions.
    pub share: Option<String>,
    /// The operator's MCP servers.
    pub mcp_servers: Vec<(String, agency_core::McpServer)>,
    /// `--mqtt-require-key`.
    pub require_key: bool,
}

pub struct Server {
    pub rt: Arc<Runtime>,
    /// The runtime's store, for tests to look at what it wrote.
    pub store: Arc<dyn agency_store::Store>,
    /// The server's API keys.
    pub auth: Arc<agency_runtime::keys::Authenticator>,
    pub http: String,
    pub key: String,
    pub team: String,
    pub manager: String,
    pub agent: String,
    share: Option<String>,
    require_key: bool,
    providers: Vec<(String, Arc<dyn agency_providers::Provider>)>,
    stop: Option<oneshot::Sender<()>>,
    mqtt: Option<tokio::task::JoinHandle<Result<(), agency_mqtt::MqttError>>>,
    _dir: Option<tempfile::TempDir>,
}

pub fn agency_yaml(name: &str, team: &str) -> String {
    format!(
        r#"
name: {name}
handle: {team}
manager: manager
agents:
  - name: manager
    handle: MGR-001
    model: builtin/rules
    rules:
      - {{ when: user, do: "Please check: {{{{message}}}}", send_to: monitor }}
      - {{ when: monitor, do: "Status: {{{{message}}}}", send_to: [user] }}
  - name: monitor
    handle: FERM-DATA-AGENT-001
    model: builtin/rules
    rules:
      - {{ when: manager, do: "All normal ({{{{message}}}})", send_to: manager }}
"#
    )
}

impl Server {
    /// Starts everything against the broker at `host:port`.
    pub async fn start(host: &str, port: u16) -> Server {
        Self::start_with(host, port, Setup::default()).await
    }

    pub async fn start_with(host: &str, port: u16, setup: Setup) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let served = agency_testing::serve(
            dir.path(),
            providers(&setup.providers),
            setup.mcp_servers,
            agency_server::Connections::default(),
        )
        .await
        .unwrap();
        let rt = served.rt;
        let id = unique();
        let (name, team) = (format!("plant-{id}"), format!("PLANT-{id}"));
        let yaml = setup.yaml.unwrap_or(agency_yaml)(&name, &team);
        let file = agency_file::AgencyFile::parse("plant.yaml", &yaml).unwrap();
        let agency = rt.agencies().save(&file.draft, LOCAL_OWNER).await.unwrap();
        let (_, key) = served
            .auth
            .create_key(
                &agency,
                "test",
                None,
                None,
                agency_core::KeyBudgets::default(),
            )
            .await
            .unwrap();
        let http = served.base;
        let (stop, mqtt) = bridge(
            &rt,
            &served.auth,
            (host, port),
            setup.share.as_deref(),
            setup.require_key,
        );
        Server {
            rt,
            store: served.store,
            auth: served.auth,
            http,
            key: key.expose_secret().to_string(),
            team,
            manager: "MGR-001".into(),
            agent: "FERM-DATA-AGENT-001".into(),
            share: setup.share,
            require_key: setup.require_key,
            providers: setup.providers,
            stop: Some(stop),
            mqtt: Some(mqtt),
            _dir: Some(dir),
        }
    }

    /// Another server process on the same database and broker: a runtime of its own (its own
    /// sessions and caches) and a bridge with its own client id, in the same share group.
    /// It serves no HTTP (`http` and `key` are this server's).
    pub async fn peer(&self, host: &str, port: u16) -> Server {
        let rt = Runtime::new(self.store.clone(), providers(&self.providers));
        let (stop, mqtt) = bridge(
            &rt,
            &self.auth,
            (host, port),
            self.share.as_deref(),
            self.require_key,
        );
        Server {
            rt,
            store: self.store.clone(),
            auth: self.auth.clone(),
            http: self.http.clone(),
            key: self.key.clone(),
            team: self.team.clone(),
            manager: self.manager.clone(),
            agent: self.agent.clone(),
            share: self.share.clone(),
            require_key: self.require_key,
            providers: self.providers.clone(),
            stop: Some(stop),
            mqtt: Some(mqtt),
            _dir: None,
        }
    }

    pub async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(m) = self.mqtt.take() {
            m.await.unwrap().unwrap();
        }
    }

    /// `GET` with the agency's key.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.http))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

fn providers(
    extra: &[(String, Arc<dyn agency_providers::Provider>)],
) -> agency_providers::Providers {
    let mut p = agency_providers::Providers::builtin();
    for (name, provider) in extra {
        p.insert(name, provider.clone());
    }
    p
}

type Bridge = (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), agency_mqtt::MqttError>>,
);

/// The MQTT bridge of `rt` on the broker, with a client id of its own.
fn bridge(
    rt: &Arc<Runtime>,
    auth: &Arc<agency_runtime::keys::Authenticator>,
    (host, port): (&str, u16),
    share: Option<&str>,
    require_key: bool,
) -> Bridge {
    let share = share.map(|g| format!("&share={g}")).unwrap_or_default();
    let mut config = agency_mqtt::MqttConfig::parse(&format!(
        "mqtt://{host}:{port}?client_id=agency-test-{}{share}",
        unique()
    ))
    .unwrap();
    config.require_key = require_key;
    #[cfg(feature = "embedded")]
    {
        config.broker = embedded_brokers().lock().unwrap().get(&port).cloned();
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let mqtt = tokio::spawn(agency_mqtt::serve(
        rt.clone(),
        auth.clone(),
        config,
        async move {
            let _ = stopped.await;
        },
    ));
    (stop, mqtt)
}

/// A model that blocks every call until the test opens its gate (then answers `reply`
/// at once, from then on): `gate/any` once inserted as provider `gate`.
pub struct Gate {
    open: tokio::sync::watch::Sender<bool>,
    reply: String,
}

impl Gate {
    pub fn new(reply: &str) -> Arc<Self> {
        Arc::new(Self {
            open: tokio::sync::watch::channel(false).0,
            reply: reply.to_string(),
        })
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Calls from now on block again (calls already past the gate are not affected).
    pub fn close(&self) {
        self.open.send_replace(false);
    }
}

/// The plant with a manager on `{provider}/any` (the monitor stays on the rules model).
pub fn plant_on(provider: &str, name: &str, team: &str) -> String {
    format!(
        r#"
name: {name}
handle: {team}
manager: manager
agents:
  - name: manager
    handle: MGR-001
    model: {provider}/any
  - name: monitor
    handle: FERM-DATA-AGENT-001
    model: builtin/rules
"#
    )
}

#[async_trait::async_trait]
impl agency_providers::Model for Gate {
    async fn chat(
        &self,
        _request: agency_providers::ChatRequest,
    ) -> Result<agency_providers::Completion, agency_providers::ModelError> {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|o| *o).await;
        Ok(agency_providers::Completion {
            text: self.reply.clone(),
            ..agency_providers::Completion::default()
        })
    }
}

pub struct GateProvider(pub Arc<Gate>);

impl agency_providers::Provider for GateProvider {
    fn model(&self, _name: &str) -> Option<Arc<dyn agency_providers::Model>> {
        Some(self.0.clone())
    }
}

/// A stock MQTT 5 client subscribed to every event of one team.
pub struct Client {
    pub client: AsyncClient,
    pub inbox: mpsc::UnboundedReceiver<(String, Value)>,
    pub team: String,
    /// Sent with every message as its `authorization` user property.
    pub key: Option<String>,
}

impl Client {
    pub async fn connect(host: &str, port: u16, team: &str) -> Client {
        Self::connect_to(host, port, team, &[format!("XMAGS/{team}/EVT/#")]).await
    }

    /// A client subscribed to `filters` (subscribed once this returns).
    pub async fn connect_to(host: &str, port: u16, team: &str, filters: &[String]) -> Client {
        let mut options = MqttOptions::new(format!("test-client-{}", unique()), host, port);
        options.set_keep_alive(Duration::from_secs(30));
        Self::with_options(options, team, filters).await
    }

    /// A client with a persistent session (it and the broker keep what is in flight across
    /// a disconnection), subscribed to the team's events.
    pub async fn connect_persistent(host: &str, port: u16, team: &str) -> Client {
        let mut options = MqttOptions::new(format!("test-client-{}", unique()), host, port);
        options
            .set_keep_alive(Duration::from_secs(5))
            .set_clean_start(false)
            .set_session_expiry_interval(Some(3600));
        Self::with_options(options, team, &[format!("XMAGS/{team}/EVT/#")]).await
    }

    /// A client holding one of the team's keys: it logs in with it (which the embedded broker
    /// checks, and an external one ignores) and sends it with every message.
    pub async fn connect_keyed(host: &str, port: u16, team: &str, key: &str) -> Client {
        let mut options = MqttOptions::new(format!("test-client-{}", unique()), host, port);
        options
            .set_keep_alive(Duration::from_secs(30))
            .set_credentials("key", key);
        let mut client = Self::with_options(options, team, &[format!("XMAGS/{team}/EVT/#")]).await;
        client.key = Some(key.to_string());
        client
    }

    async fn with_options(mut options: MqttOptions, team: &str, filters: &[String]) -> Client {
        let mut network = rumqttc::NetworkOptions::new();
        network.set_tcp_nodelay(true);
        options.set_network_options(network);
        let (client, mut eventloop) = AsyncClient::new(options, 64);
        let (tx, inbox) = mpsc::unbounded_channel();
        let (subscribed_tx, subscribed) = oneshot::channel();
        let mut subscribed_tx = Some(subscribed_tx);
        tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let topic = String::from_utf8_lossy(&p.topic).into_owned();
                        let body = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                        if tx.send((topic, body)).is_err() {
                            return;
                        }
                    }
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        if let Some(s) = subscribed_tx.take() {
                            let _ = s.send(());
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        });
        client
            .subscribe_many(
                filters
                    .iter()
                    .map(|f| rumqttc::v5::mqttbytes::v5::Filter::new(f.clone(), QoS::AtLeastOnce)),
            )
            .await
            .unwrap();
        subscribed.await.unwrap();
        Client {
            client,
            inbox,
            team: team.to_string(),
            key: None,
        }
    }

    pub async fn send(&self, topic: &str, payload: impl Into<Vec<u8>>) {
        let properties = rumqttc::v5::mqttbytes::v5::PublishProperties {
            user_properties: self
                .key
                .iter()
                .map(|k| ("authorization".to_string(), format!("Bearer {k}")))
                .collect(),
            ..Default::default()
        };
        self.client
            .publish_with_properties(
                format!("XMAGS/{}/{topic}", self.team),
                QoS::AtLeastOnce,
                false,
                payload.into(),
                properties,
            )
            .await
            .unwrap();
    }

    pub async fn send_json(&self, topic: &str, payload: Value) {
        self.send(topic, serde_json::to_vec(&payload).unwrap())
            .await;
    }

    /// The next message whose topic ends with `suffix` (others are dropped); fails after a
    /// generous wait, so a broken server fails the test instead of hanging it.
    pub async fn next(&mut self, suffix: &str) -> Value {
        self.next_within(suffix, Duration::from_secs(60))
            .await
            .unwrap_or_else(|| panic!("nothing arrived on …{suffix}"))
    }

    pub async fn next_within(&mut self, suffix: &str, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let (topic, body) = tokio::time::timeout_at(deadline, self.inbox.recv())
                .await
                .ok()??;
            if topic.ends_with(suffix) {
                return Some(body);
            }
        }
    }

    /// Everything up to and including the first message whose topic ends with `suffix`.
    pub async fn until(&mut self, suffix: &str) -> Vec<(String, Value)> {
        let mut seen = Vec::new();
        loop {
            let (topic, body) = tokio::time::timeout(Duration::from_secs(60), self.inbox.recv())
                .await
                .unwrap_or_else(|_| panic!("nothing arrived on …{suffix}; saw {seen:?}"))
                .unwrap();
            let done = topic.ends_with(suffix);
            seen.push((topic, body));
            if done {
                return seen;
            }
        }
    }

    /// A new conversation with `agent` (`chat_new`, its `initialized` awaited), one message in
    /// it, and everything that arrived up to the response: the conversation's id and what was
    /// seen.
    pub async fn converse(&mut self, agent: &str, content: &str) -> (String, Vec<(String, Value)>) {
        let cid = uuid::Uuid::now_v7().to_string();
        self.send_json(
            &format!("CMD/chat_new/{agent}"),
            serde_json::json!({"agent_id": agent, "conversation_id": cid, "content": " "}),
        )
        .await;
        self.next(&format!("EVT/chat_progress/{agent}/{cid}")).await;
        self.send_json(
            &format!("DATA/chat/{agent}/{cid}"),
            serde_json::json!({"agent_id": agent, "conversation_id": cid, "content": content}),
        )
        .await;
        let seen = self
            .until(&format!("EVT/chat_response/{agent}/{cid}"))
            .await;
        (cid, seen)
    }

    /// Waits until the server answers on the broker: sends `chat_new` for a probe conversation
    /// until its answer arrives (the server subscribes when it connects, which may be after
    /// this client did).
    pub async fn wait_for_server(&mut self, agent: &str) {
        let probe = uuid::Uuid::now_v7().to_string();
        for _ in 0..100 {
            self.send_json(
                &format!("CMD/chat_new/{agent}"),
                serde_json::json!({"agent_id": agent, "conversation_id": probe, "content": " "}),
            )
            .await;
            let suffix = format!("EVT/chat_progress/{agent}/{probe}");
            if self
                .next_within(&suffix, Duration::from_millis(500))
                .await
                .is_some()
            {
                // Later answers to the probe may still come: let them pass.
                while self
                    .next_within(&suffix, Duration::from_millis(300))
                    .await
                    .is_some()
                {}
                return;
            }
        }
        panic!("the server never answered on the broker");
    }
}
