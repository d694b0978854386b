//! A runtime on a fresh SQLite file, and scripted models for the cases the rules model cannot
//! produce (bad replies, slow or failing agents).
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_core::{AgencyDraft, AgentDraft, Message, MessageKind, RuleDraft};
use agency_providers::{
    ChatRequest, Completion, Model, ModelError, ModelRequest, Provider, Providers,
};
use agency_runtime::{LOCAL_OWNER, Runtime};
use async_trait::async_trait;

/// What a scripted model does on one call.
pub enum Act {
    Say(&'static str),
    SayOwned(String),
    Slow(Duration, &'static str),
    Fail(&'static str),
    Hang,
    /// Waits until every holder of the barrier is in a call at the same time.
    Together(Arc<tokio::sync::Barrier>, &'static str),
    /// Answers once the test opens the gate.
    Gated(Arc<tokio::sync::Notify>, &'static str),
    /// Calls tools: `(id, server/tool, arguments)` each.
    Call(Vec<(&'static str, &'static str, &'static str)>),
}

/// A model that plays a script, one act per call (the last act repeats), and records every
/// request it received.
#[derive(Default)]
pub struct Script {
    acts: Mutex<Vec<Act>>,
    /// The contexts of its routed calls.
    pub seen: Mutex<Vec<Arc<Vec<Message>>>>,
    /// The messages of its plain chats (rooms).
    pub chats: Mutex<Vec<Vec<(agency_core::Role, String)>>>,
    /// The tools each plain chat offered, by name.
    pub chat_tools: Mutex<Vec<Vec<String>>>,
    pub running: Mutex<(u32, u32)>, // (now, most at once)
}

impl Script {
    pub fn new(acts: Vec<Act>) -> Arc<Self> {
        Arc::new(Self {
            acts: Mutex::new(acts),
            ..Default::default()
        })
    }
}

#[async_trait]
impl Model for Script {
    async fn complete(&self, request: ModelRequest) -> Result<Completion, ModelError> {
        self.seen.lock().unwrap().push(request.context.clone());
        drop(request);
        self.play().await
    }

    async fn chat(&self, request: ChatRequest) -> Result<Completion, ModelError> {
        self.chat_tools
            .lock()
            .unwrap()
            .push(request.tools.iter().map(|t| t.name.clone()).collect());
        self.chats.lock().unwrap().push(
            request
                .messages
                .into_iter()
                .map(|m| (m.role, m.text))
                .collect(),
        );
        self.play().await
    }
}

impl Script {
    /// The next act, played.
    async fn play(&self) -> Result<Completion, ModelError> {
        let act = {
            let mut acts = self.acts.lock().unwrap();
            if acts.len() > 1 {
                acts.remove(0)
            } else {
                match acts.first() {
                    Some(Act::Say(s)) => Act::Say(s),
                    Some(Act::SayOwned(s)) => Act::SayOwned(s.clone()),
                    Some(Act::Slow(d, s)) => Act::Slow(*d, s),
                    Some(Act::Fail(s)) => Act::Fail(s),
                    Some(Act::Together(b, s)) => Act::Together(b.clone(), s),
                    Some(Act::Gated(g, s)) => Act::Gated(g.clone(), s),
                    Some(Act::Call(c)) => Act::Call(c.clone()),
                    Some(Act::Hang) | None => Act::Hang,
                }
            }
        };
        {
            let mut r = self.running.lock().unwrap();
            r.0 += 1;
            r.1 = r.1.max(r.0);
        }
        let mut tool_calls = Vec::new();
        let out = match act {
            Act::Call(calls) => {
                tool_calls = calls
                    .into_iter()
                    .map(|(id, name, arguments)| agency_core::ToolCall {
                        id: id.into(),
                        name: name.into(),
                        arguments: arguments.into(),
                    })
                    .collect();
                Ok(String::new())
            }
            Act::Say(s) => Ok(s.to_string()),
            Act::SayOwned(s) => Ok(s),
            Act::Slow(d, s) => {
                tokio::time::sleep(d).await;
                Ok(s.to_string())
            }
            Act::Fail(m) => Err(ModelError::Failed {
                provider: "script".into(),
                message: m.into(),
            }),
            Act::Together(barrier, s) => {
                barrier.wait().await;
                Ok(s.to_string())
            }
            Act::Gated(gate, s) => {
                gate.notified().await;
                Ok(s.to_string())
            }
            Act::Hang => {
                tokio::time::sleep(Duration::from_secs(1_000_000)).await;
                Ok(String::new())
            }
        };
        self.running.lock().unwrap().0 -= 1;
        out.map(|text| Completion {
            text,
            usage: agency_core::Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
            },
            tool_calls,
            ..Completion::default()
        })
    }
}

/// `script/NAME` serves the script registered under NAME.
#[derive(Default)]
pub struct Scripts(pub Mutex<std::collections::HashMap<String, Arc<Script>>>);

impl Provider for Scripts {
    fn model(&self, name: &str) -> Option<Arc<dyn Model>> {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .map(|s| s.clone() as Arc<dyn Model>)
    }
}

pub struct Harness {
    pub rt: Arc<Runtime>,
    /// The runtime's store, for tests to look at what it wrote.
    pub store: Arc<dyn agency_store::Store>,
    pub scripts: Arc<Scripts>,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl Harness {
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("agency.db").display());
        Self::on(url, Some(dir)).await
    }

    /// A runtime whose agencies may also use the operator's MCP `servers`.
    pub async fn with_mcp(servers: Vec<(String, agency_core::McpServer)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("agency.db").display());
        Self::build(url, Some(dir), servers).await
    }

    pub async fn on(url: String, dir: Option<tempfile::TempDir>) -> Self {
        Self::build(url, dir, Vec::new()).await
    }

    async fn build(
        url: String,
        dir: Option<tempfile::TempDir>,
        servers: Vec<(String, agency_core::McpServer)>,
    ) -> Self {
        let store = agency_store::open(&url).await.unwrap();
        let scripts = Arc::new(Scripts::default());
        let mut providers = Providers::builtin();
        providers.insert("script", scripts.clone());
        // Bots run on loopback in tests, and a silent one is given up on soon.
        providers.set_bots(
            agency_providers::bot::BotClient::new(
                agency_providers::http::HttpSettings {
                    first_byte_timeout: std::time::Duration::from_secs(2),
                    max_retries: 1,
                    backoff_base: std::time::Duration::from_millis(1),
                    backoff_max: std::time::Duration::from_millis(5),
                    ..agency_providers::bot::default_settings()
                },
                true,
            )
            .unwrap(),
        );
        let master = agency_runtime::secrets::MasterKeySource::Hex(secrecy::SecretString::from(
            "42".repeat(32),
        ));
        let tools = agency_runtime::tools::Tools::new(servers, true);
        Self {
            rt: Runtime::assemble(store.clone(), providers, Some(master), tools),
            store,
            scripts,
            url,
            _dir: dir,
        }
    }

    pub fn script(&self, name: &str, acts: Vec<Act>) -> Arc<Script> {
        let s = Script::new(acts);
        self.scripts
            .0
            .lock()
            .unwrap()
            .insert(name.into(), s.clone());
        s
    }

    pub async fn agency(&self, draft: AgencyDraft) -> agency_core::Agency {
        self.rt.agencies().save(&draft, LOCAL_OWNER).await.unwrap()
    }
}

pub fn agent(id: u32, name: &str, model: &str, rules: &[(&str, &str, &[&str])]) -> AgentDraft {
    AgentDraft {
        id: Some(id),
        name: name.into(),
        model: model.into(),
        rules: rules
            .iter()
            .map(|(when, action, to)| RuleDraft {
                when: (*when).into(),
                action: (*action).into(),
                send_to: to.iter().map(|s| (*s).to_string()).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub fn draft(protocol: &str, max_hops: u32, agents: Vec<AgentDraft>) -> AgencyDraft {
    AgencyDraft {
        name: "team".into(),
        protocol: protocol.into(),
        manager: agents[0].name.clone(),
        max_hops: Some(max_hops),
        turn_deadline_secs: Some(1),
        agents,
        ..Default::default()
    }
}

/// The trace as `from>to:kind:text` lines, with names.
pub fn lines(outcome: &agency_runtime::TurnOutcome, agency: &agency_core::Agency) -> Vec<String> {
    let roster = agency.roster();
    outcome
        .trace
        .iter()
        .map(|e| {
            format!(
                "{}>{}:{}:{}",
                e.from_name(&roster),
                e.to_name(&roster),
                e.kind_name(),
                e.text
            )
        })
        .collect()
}

pub fn kinds(ctx: &[Message]) -> Vec<MessageKind> {
    ctx.iter().map(|m| m.kind).collect()
}
