//! The client loop: connect, subscribe, hand each message to its conversation's queue, answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_core::Face;
use agency_core::approval::Answer;
use agency_core::{Agency, AgencyId, ApprovalId, ConversationId, Roster, StopReason};
use agency_runtime::keys::Authenticator;
use agency_runtime::{
    Caller, Event, LOCAL_OWNER, Runtime, RuntimeError, TurnEvent, TurnRequest, team_id,
};
use chrono::Utc;
use futures::StreamExt;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Filter, Packet, Publish};
use rumqttc::v5::{AsyncClient, Event as MqttEvent, MqttOptions};
use secrecy::ExposeSecret;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::acks::AckEvent;
use crate::progress;
use crate::topic::{self, Inbound};
use crate::{MqttConfig, MqttError, wire};

/// The largest message the server takes (a chat message may be long; spec 000 caps a message
/// at far less).
const MAX_PACKET: u32 = 1024 * 1024;
/// How long the broker keeps the server's session while it is away.
const SESSION_EXPIRY_SECS: u32 = 24 * 3600;
/// A conversation's queue ends after this long without messages.
const IDLE: Duration = Duration::from_secs(30);
#[path = "memory.rs"]
mod memory;

/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Serves the protocol until `shutdown` resolves, checking keys with `auth`. Reconnects (and
/// subscribes again) whenever the broker goes away; returns only on shutdown. With the embedded
/// broker, also lets clients in through its door (see `embedded::door`).
pub async fn serve(
    rt: Arc<Runtime>,
    auth: Arc<Authenticator>,
    config: MqttConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), MqttError> {
    #[cfg(feature = "embedded")]
    let door = config.broker.as_ref().and_then(|broker| {
        broker.open_door(crate::embedded::Keeper {
            rt: rt.clone(),
            auth: auth.clone(),
            require_key: config.require_key,
        })
    });
    let (client, mut eventloop) = AsyncClient::new(options(&config), 256);
    let (acks, ack_events) = mpsc::unbounded_channel();
    tokio::spawn(crate::acks::run(client.clone(), ack_events));
    let bridge = Arc::new(Bridge {
        rt,
        auth,
        require_key: config.require_key,
        client: client.clone(),
        acks,
        shared: config.share_group.is_some(),
        received: AtomicU64::new(0),
        queues: Mutex::new(HashMap::new()),
        teams: Mutex::new(HashMap::new()),
    });
    let filters: Vec<Filter> = topic::filters(config.share_group.as_deref())
        .into_iter()
        .map(|t| Filter::new(t, QoS::AtLeastOnce))
        .collect();
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(100);
    let mut connected = false;
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            event = eventloop.poll() => match event {
                Ok(MqttEvent::Incoming(Packet::ConnAck(_))) => {
                    tracing::info!(host = %config.host, port = config.port, "MQTT connected");
                    connected = true;
                    backoff = Duration::from_millis(100);
                    let _ = bridge.acks.send(AckEvent::Reset);
                    // Subscribing again on every connection: a broker that restarted without
                    // its sessions has forgotten them.
                    let (c, f) = (client.clone(), filters.clone());
                    tokio::spawn(async move {
                        if let Err(e) = c.subscribe_many(f).await {
                            tracing::error!(error = %e, "cannot subscribe");
                        }
                    });
                }
                Ok(MqttEvent::Incoming(Packet::Publish(p))) => bridge.dispatch(p),
                Ok(_) => {}
                Err(e) => {
                    if connected {
                        tracing::warn!(error = %e, "MQTT connection lost; reconnecting");
                    } else {
                        tracing::warn!(error = %e, host = %config.host, port = config.port, "cannot reach the MQTT broker; retrying");
                    }
                    connected = false;
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
    #[cfg(feature = "embedded")]
    if let (Some(door), Some(broker)) = (door, &config.broker) {
        broker.close_door(door).await;
    }
    // Leave cleanly: messages still being handled stay with the broker unacknowledged.
    if client.try_disconnect().is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while let Ok(ev) = eventloop.poll().await {
                if matches!(ev, MqttEvent::Outgoing(rumqttc::Outgoing::Disconnect)) {
                    break;
                }
            }
        })
        .await;
    }
    Ok(())
}

/// The client's options: a persistent session with manual acknowledgements. On the embedded
/// broker, the server logs in on the broker's own port, not through the clients' door.
fn options(config: &MqttConfig) -> MqttOptions {
    #[cfg(feature = "embedded")]
    if let Some(broker) = &config.broker {
        let (addr, user, password) = broker.inner();
        let mut options =
            MqttOptions::new(config.client_id.clone(), addr.ip().to_string(), addr.port());
        options.set_credentials(user, password);
        return session(options);
    }
    let mut options = MqttOptions::new(config.client_id.clone(), config.host.clone(), config.port);
    if let Some(user) = &config.username {
        let password = config
            .password
            .as_ref()
            .map(|p| p.expose_secret().to_string())
            .unwrap_or_default();
        options.set_credentials(user.clone(), password);
    }
    if config.tls {
        options.set_transport(rumqttc::Transport::tls_with_default_config());
    }
    session(options)
}

/// A persistent session with manual acknowledgements, over TCP_NODELAY.
fn session(mut options: MqttOptions) -> MqttOptions {
    options
        .set_keep_alive(Duration::from_secs(30))
        .set_clean_start(false)
        .set_session_expiry_interval(Some(SESSION_EXPIRY_SECS))
        .set_manual_acks(true)
        .set_max_packet_size(Some(MAX_PACKET));
    // Small packets both ways (a publish, its acknowledgement): without TCP_NODELAY, Nagle's
    // algorithm and delayed acknowledgements hold each one back by tens of milliseconds.
    let mut network = rumqttc::NetworkOptions::new();
    network.set_tcp_nodelay(true);
    options.set_network_options(network);
    options
}

struct Bridge {
    rt: Arc<Runtime>,
    /// Checks the keys messages come with.
    auth: Arc<Authenticator>,
    /// The operator's own agencies need a key too (`--mqtt-require-key`).
    require_key: bool,
    client: AsyncClient,
    /// Acknowledgements, released in arrival order.
    acks: mpsc::UnboundedSender<AckEvent>,
    /// In a share group: other servers get this server's conversations' messages too, and
    /// every server gets each cancel.
    shared: bool,
    /// Messages received so far (each one's number in arrival order).
    received: AtomicU64,
    /// One queue per conversation (or per team's observations): its messages in order.
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<(u64, Publish)>>>,
    /// Team ids as last resolved.
    teams: Mutex<HashMap<String, AgencyId>>,
}

/// Acknowledges a message once, when what it asked for is persisted (or when it was refused);
/// the acknowledgement leaves once those of the messages before it have (see `acks.rs`).
struct Ack {
    acks: mpsc::UnboundedSender<AckEvent>,
    seq: Option<u64>,
}

impl Ack {
    async fn send(&mut self) {
        if let Some(seq) = self.seq.take() {
            let _ = self.acks.send(AckEvent::Done(seq));
        }
    }
}

impl Bridge {
    /// Puts the message in its queue (making the queue and its worker when needed).
    fn dispatch(self: &Arc<Self>, p: Publish) {
        let seq = self.received.fetch_add(1, Ordering::Relaxed);
        let _ = self.acks.send(AckEvent::Received(seq, Box::new(p.clone())));
        let name = String::from_utf8_lossy(&p.topic).into_owned();
        let key = match topic::parse(&name) {
            Some(Inbound::Chat { conversation, .. }) => format!("c/{conversation}"),
            // chat_new goes in the queue of the conversation it makes, so that a chat message
            // sent right after it waits for it.
            Some(Inbound::ChatNew { .. }) => {
                match serde_json::from_slice::<wire::ChatIn>(&p.payload)
                    .ok()
                    .and_then(|c| c.conversation_id)
                {
                    Some(id) => format!("c/{}", id.trim()),
                    None => "invalid".to_string(),
                }
            }
            // A cancel must not wait behind the turn it cancels.
            Some(Inbound::ChatCancel { conversation, .. }) => format!("x/{conversation}"),
            // Nor an answer the turn waits for.
            Some(Inbound::ChatApproval { conversation, .. }) => format!("a/{conversation}"),
            Some(Inbound::Observation { team, .. }) => format!("o/{team}"),
            None => "other".to_string(),
        };
        let Ok(mut queues) = self.queues.lock() else {
            return;
        };
        let p = match queues.get(&key) {
            Some(tx) => match tx.send((seq, p)) {
                Ok(()) => return,
                Err(mpsc::error::SendError(p)) => p,
            },
            None => (seq, p),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(p);
        queues.insert(key.clone(), tx);
        tokio::spawn(self.clone().worker(key, rx));
    }

    async fn worker(self: Arc<Self>, key: String, mut rx: mpsc::UnboundedReceiver<(u64, Publish)>) {
        loop {
            match tokio::time::timeout(IDLE, rx.recv()).await {
                Ok(Some((seq, p))) => self.handle(seq, p).await,
                Ok(None) => return,
                Err(_) => {
                    // Idle: leave the map (no one can send after this), then finish what
                    // arrived meanwhile.
                    if let Ok(mut q) = self.queues.lock() {
                        q.remove(&key);
                    }
                    while let Some((seq, p)) = rx.recv().await {
                        self.handle(seq, p).await;
                    }
                    return;
                }
            }
        }
    }

    /// A message received: counted, and handled in its own span (continuing the trace its
    /// MQTT 5 user properties name, when they name one).
    async fn handle(&self, seq: u64, p: Publish) {
        agency_telemetry::metrics().mqtt(true);
        let parent = match &p.properties {
            Some(props) => agency_telemetry::propagate::continue_from_pairs(&props.user_properties),
            None => agency_telemetry::Context::current(),
        };
        let span =
            agency_telemetry::Span::start_in(&parent, agency_telemetry::SpanKind::Consumer, || {
                (
                    format!("process {}", String::from_utf8_lossy(&p.topic)),
                    Vec::new(),
                )
            });
        span.run(self.handle_message(seq, p)).await;
    }

    async fn handle_message(&self, seq: u64, p: Publish) {
        let name = String::from_utf8_lossy(&p.topic).into_owned();
        let mut ack = Ack {
            acks: self.acks.clone(),
            seq: Some(seq),
        };
        let Some(inbound) = topic::parse(&name) else {
            ack.send().await;
            return;
        };
        // A team this server does not have may be another server's on the same broker: not
        // ours to answer.
        let agency = match self.team(inbound.team()).await {
            Ok(a) => a,
            Err(MqttError::UnknownTeam(team)) => {
                tracing::debug!(team, "message for a team this server does not have");
                ack.send().await;
                return;
            }
            Err(e) => {
                self.error(inbound.team(), inbound.agent().unwrap_or("unknown"), &e)
                    .await;
                ack.send().await;
                return;
            }
        };
        // Only a team's key reaches an account's team (the operator's, unless it requires keys,
        // take messages without one): the message changes nothing otherwise.
        let caller = match self.authorize(&agency, inbound.team(), &p).await {
            Ok(caller) => caller,
            Err(e) => {
                self.error(inbound.team(), inbound.agent().unwrap_or("unknown"), &e)
                    .await;
                ack.send().await;
                return;
            }
        };
        let result = match &inbound {
            Inbound::ChatNew { team, agent } => {
                self.chat_new(&agency, team, agent, &p.payload).await
            }
            Inbound::Chat {
                team,
                agent,
                conversation,
            } => {
                let at = (team.as_str(), agent.as_str(), conversation.as_str());
                self.chat(&agency, caller, at, &p.payload, &mut ack).await
            }
            Inbound::ChatCancel {
                team,
                agent,
                conversation,
            } => match self
                .chat_cancel(&agency, team, agent, conversation, &p.payload)
                .await
            {
                // Every server of a share group gets the cancel; the one running the turn
                // answers. The others say nothing (they cannot tell that none runs it).
                Err(e) if self.shared && !e.is_internal() => {
                    tracing::debug!(error = %e, conversation, "cancel not for this server");
                    Ok(())
                }
                other => other,
            },
            Inbound::ChatApproval {
                team,
                agent,
                conversation,
            } => {
                self.chat_approval(&agency, team, agent, conversation, &p.payload)
                    .await
            }
            Inbound::Observation { team, agent } => {
                self.observation(&agency, team, agent.as_deref(), &p.payload)
                    .await
            }
        };
        if let Err(e) = result {
            // A team-wide observation names its agent in the payload.
            let named = serde_json::from_slice::<wire::ObservationIn>(&p.payload)
                .ok()
                .and_then(|o| o.agent_id)
                .filter(|a| topic::valid_level(a.trim()));
            let agent = inbound
                .agent()
                .or(named.as_deref().map(str::trim))
                .unwrap_or("unknown");
            self.error(inbound.team(), agent, &e).await;
        }
        ack.send().await;
    }

    async fn publish(&self, topic: String, payload: &impl Serialize) {
        let bytes = match serde_json::to_vec(payload) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode an MQTT payload");
                return;
            }
        };
        agency_telemetry::metrics().mqtt(false);
        // The trace goes on at whoever reads it (MQTT 5 user properties), when tracing is on.
        let properties = rumqttc::v5::mqttbytes::v5::PublishProperties {
            user_properties: agency_telemetry::propagate::pairs(),
            ..Default::default()
        };
        if let Err(e) = self
            .client
            .publish_with_properties(topic, QoS::AtLeastOnce, false, bytes, properties)
            .await
        {
            tracing::warn!(error = %e, "cannot publish");
        }
    }

    async fn error(&self, team: &str, agent: &str, e: &MqttError) {
        if e.is_internal() {
            tracing::error!(error = %e, team, agent, "MQTT request failed");
        } else {
            tracing::debug!(error = %e, team, agent, "MQTT request refused");
        }
        self.publish(
            topic::error(team, agent),
            &wire::Error {
                agent_id: agent.to_string(),
                exception_type: e.exception_type().to_string(),
                message: e.public_message(),
                timestamp: wire::time(Utc::now()),
            },
        )
        .await;
    }

    /// Who may act on `agency` with message `p`: the holder of one of its keys (the MQTT 5 user
    /// property `authorization: Bearer KEY`, counted against the key's rate limit, its budgets
    /// paying for the turn); without a key, only the operator's agencies, unless the operator
    /// requires keys.
    async fn authorize(
        &self,
        agency: &Agency,
        team: &str,
        p: &Publish,
    ) -> Result<Caller, MqttError> {
        let bearer = p.properties.as_ref().and_then(|props| {
            props
                .user_properties
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(wire::AUTHORIZATION))
                .map(|(_, value)| wire::bearer_token(value))
        });
        let Some(token) = bearer else {
            if agency.owner == LOCAL_OWNER && !self.require_key {
                return Ok(Caller::Agency(agency.id));
            }
            return Err(MqttError::Unauthorized(format!(
                "team `{team}` takes messages only with one of its API keys: send the MQTT 5 user property `authorization` with `Bearer agk_...`"
            )));
        };
        let key = self.auth.authenticate(Some(token)).await?;
        if key.agency_id != agency.id {
            return Err(MqttError::Unauthorized(format!(
                "this API key ({}) is not one of team `{team}`'s",
                key.prefix
            )));
        }
        Ok(Caller::Key(key))
    }

    /// The published agency a team id names (see [`team_id`]): an account's by its id, the
    /// operator's by handle, else name.
    async fn team(&self, team: &str) -> Result<Arc<Agency>, MqttError> {
        let known = self.teams.lock().ok().and_then(|t| t.get(team).copied());
        if let Some(id) = known {
            match self.rt.agencies().published(id).await {
                Ok(a) if team_id(&a) == team => return Ok(a),
                Ok(_) | Err(RuntimeError::AgencyNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if let Ok(id) = team.parse::<AgencyId>() {
            match self.rt.agencies().published(id).await {
                Ok(a) if team_id(&a) == team => {
                    if let Ok(mut t) = self.teams.lock() {
                        t.insert(team.to_string(), id);
                    }
                    return Ok(a);
                }
                Ok(_) | Err(RuntimeError::AgencyNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let agencies = self.rt.agencies().list(LOCAL_OWNER).await?;
        let found = agencies
            .into_iter()
            .map(|a| a.agency)
            .find(|a| team_id(a) == team)
            .ok_or_else(|| MqttError::UnknownTeam(team.to_string()))?;
        if let Ok(mut t) = self.teams.lock() {
            t.insert(team.to_string(), found.id);
        }
        Ok(self.rt.agencies().published(found.id).await?)
    }

    /// The agency's conversation `id`: one it did not start is not initialized.
    async fn conversation_of(&self, agency: &Agency, id: ConversationId) -> Result<(), MqttError> {
        match self.rt.conversations().of(agency.id, id).await {
            Ok(_) => Ok(()),
            Err(RuntimeError::ConversationNotFound(_)) => {
                Err(MqttError::NotInitialized(id.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn chat_new(
        &self,
        agency: &Agency,
        team: &str,
        agent: &str,
        payload: &[u8],
    ) -> Result<(), MqttError> {
        let body: wire::ChatIn = json(payload)?;
        let id = conversation_id(body.conversation_id.as_deref())?;
        same_agent(body.agent_id.as_deref(), agent)?;
        let entry = agency
            .agent_by_handle(agent)
            .ok_or_else(|| unknown_agent(team, agent))?;
        let progress = |status: &str, message: Option<&str>| wire::Progress {
            conversation_id: id.to_string(),
            agent_id: agent.to_string(),
            status: status.to_string(),
            message: message.map(str::to_string),
            timestamp: wire::time(Utc::now()),
            current_operation: None,
            progress_percentage: None,
            message_sequence: None,
            approval_id: None,
        };
        let topic = topic::chat_progress(team, agent, &id.to_string());
        match self
            .rt
            .conversations()
            .start_as(agency, id, Some(entry.id))
            .await
        {
            Ok(_) => self.publish(topic, &progress("initialized", None)).await,
            Err(RuntimeError::Conflict(_)) => {
                self.publish(
                    topic,
                    &progress("exists", Some("Conversation Id already exists")),
                )
                .await;
            }
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    async fn chat(
        &self,
        agency: &Agency,
        caller: Caller,
        (team, agent, conversation): (&str, &str, &str),
        payload: &[u8],
        ack: &mut Ack,
    ) -> Result<(), MqttError> {
        let body: wire::ChatIn = json(payload)?;
        let id = conversation_id(Some(conversation))?;
        if let Some(in_body) = body.conversation_id.as_deref()
            && in_body.trim().parse::<ConversationId>().ok() != Some(id)
        {
            return Err(MqttError::InvalidPayload(format!(
                "conversation_id `{in_body}` is not the topic's conversation {id}"
            )));
        }
        same_agent(body.agent_id.as_deref(), agent)?;
        let content = body
            .content
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| MqttError::InvalidPayload("`content` is missing or empty".into()))?;
        let chatting = agency
            .agent_by_handle(agent)
            .ok_or_else(|| unknown_agent(team, agent))?;
        // Only an agent that checks its chats for observations needs the message after the turn.
        let observed = chatting.memory.observe_chats.then(|| content.clone());
        let request = TurnRequest {
            progress: true,
            face: Face::Mqtt,
            ..TurnRequest::message(caller, id, content)
        };
        let turn = match self.rt.begin(request).await {
            Err(RuntimeError::ConversationNotFound(_)) => {
                return Err(MqttError::NotInitialized(id.to_string()));
            }
            turn => turn?,
        };
        let roster = agency.roster();
        let cid = id.to_string();
        let progress_topic = topic::chat_progress(team, agent, &cid);
        let mut events = std::pin::pin!(turn.events());
        let mut result = Ok(None);
        while let Some(event) = events.next().await {
            match event {
                TurnEvent::Progress(event) => {
                    self.progress(&event, id, agent, &roster, &progress_topic, ack)
                        .await;
                }
                TurnEvent::Finished { outcome, .. } => result = Ok(Some(outcome)),
                TurnEvent::Text(_) => {}
                TurnEvent::Failed(e) => result = Err(e),
            }
        }
        ack.send().await;
        let outcome = result?;
        // The agent checks what it was told for an observation (its memory settings say
        // whether), before the response, so that the entry lists what it observed.
        if let (Some(message), Some(outcome)) = (observed, outcome)
            && outcome.stopped_by != StopReason::Cancelled
        {
            let check = progress::Update::observation_check().wire(id, agent);
            self.publish(progress_topic.clone(), &check).await;
            let origin = agency_core::memory::ChatOrigin {
                conversation: id,
                turn: outcome.turn_id,
            };
            match self
                .rt
                .memory()
                .observe_chat(agency.id, chatting.id, &message, origin)
                .await
            {
                Ok(Some(observed)) => self.observed(team, agent, &observed).await,
                Ok(None) => {}
                Err(e) => self.error(team, agent, &e.into()).await,
            }
        }
        self.publish(
            topic::chat_response(team, agent, &cid),
            &wire::ChatResponse {
                agent_id: agent.to_string(),
                conversation_id: cid.clone(),
                timestamp: Utc::now().timestamp(),
            },
        )
        .await;
        Ok(())
    }

    /// Cancels the conversation's running turn. Its chat message's handler then answers, as
    /// for any turn: a `cancelled` progress update, then the metadata-only response. With no
    /// turn running there, an error says so.
    async fn chat_cancel(
        &self,
        agency: &Agency,
        team: &str,
        agent: &str,
        conversation: &str,
        payload: &[u8],
    ) -> Result<(), MqttError> {
        // The topic says it all; a payload, when there is one, must agree with it.
        let body: wire::CancelIn = if payload.iter().all(u8::is_ascii_whitespace) {
            wire::CancelIn::default()
        } else {
            json(payload)?
        };
        let named = (body.agent_id.as_deref(), body.conversation_id.as_deref());
        let id = self
            .addressed(agency, (team, agent, conversation), named)
            .await?;
        if self.rt.cancel(id) {
            Ok(())
        } else {
            Err(MqttError::NothingToCancel(id.to_string()))
        }
    }

    /// A person's answer to a call of the conversation's turn that waits for approval: taken
    /// unless someone answered first (then a `Conflict` error); the turn goes on, on whichever
    /// server runs it, and its progress says `approved` or `denied`.
    async fn chat_approval(
        &self,
        agency: &Agency,
        team: &str,
        agent: &str,
        conversation: &str,
        payload: &[u8],
    ) -> Result<(), MqttError> {
        let body: wire::ApprovalIn = json(payload)?;
        let named = (body.agent_id.as_deref(), body.conversation_id.as_deref());
        let id = self
            .addressed(agency, (team, agent, conversation), named)
            .await?;
        let unknown = || {
            MqttError::InvalidPayload(format!(
                "conversation {id} has no approval `{}`",
                body.approval_id
            ))
        };
        let approval: ApprovalId = body.approval_id.trim().parse().map_err(|_| unknown())?;
        let answer = Answer {
            approve: body.approve,
            reason: body.reason,
            arguments: body
                .arguments
                .map(|a| serde_json::Value::Object(a).to_string()),
            by: "MQTT".into(),
        };
        match self
            .rt
            .approvals()
            .answer_in(&agency.owner, id, approval, answer)
            .await
        {
            Ok(_) => Ok(()),
            Err(RuntimeError::NotFound(_)) => Err(unknown()),
            Err(e) => Err(e.into()),
        }
    }

    /// The conversation a command's topic names (`team`, `agent`, `conversation`), which its
    /// payload's `agent_id` and `conversation_id` (when given) must agree with: one of the
    /// agency's, with one of its agents.
    async fn addressed(
        &self,
        agency: &Agency,
        (team, agent, conversation): (&str, &str, &str),
        (named_agent, named_conversation): (Option<&str>, Option<&str>),
    ) -> Result<ConversationId, MqttError> {
        let id = conversation_id(Some(conversation))?;
        if let Some(in_body) = named_conversation
            && in_body.trim().parse::<ConversationId>().ok() != Some(id)
        {
            return Err(MqttError::InvalidPayload(format!(
                "conversation_id `{in_body}` is not the topic's conversation {id}"
            )));
        }
        same_agent(named_agent, agent)?;
        agency
            .agent_by_handle(agent)
            .ok_or_else(|| unknown_agent(team, agent))?;
        self.conversation_of(agency, id).await?;
        Ok(id)
    }

    /// A progress update for an event of this conversation's turn. The user's message being
    /// stored is the moment the chat message is acknowledged.
    async fn progress(
        &self,
        event: &Event,
        id: ConversationId,
        agent: &str,
        roster: &Roster,
        topic: &str,
        ack: &mut Ack,
    ) {
        let Some(update) = progress::update(event, id, roster) else {
            return;
        };
        if update.stored {
            ack.send().await;
        }
        self.publish(topic.to_string(), &update.wire(id, agent))
            .await;
    }
}

fn json<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, MqttError> {
    serde_json::from_slice(payload)
        .map_err(|e| MqttError::InvalidPayload(format!("not the JSON this topic takes: {e}")))
}

fn conversation_id(id: Option<&str>) -> Result<ConversationId, MqttError> {
    let id = id
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| MqttError::InvalidPayload("`conversation_id` is missing".into()))?;
    id.parse()
        .map_err(|_| MqttError::InvalidPayload(format!("conversation_id `{id}` is not a GUID")))
}

/// A payload's `agent_id`, when it has one, must be the topic's.
fn same_agent(in_body: Option<&str>, agent: &str) -> Result<(), MqttError> {
    match in_body.map(str::trim) {
        Some(a) if !a.is_empty() && !a.eq_ignore_ascii_case(agent) => Err(
            MqttError::InvalidPayload(format!("agent_id `{a}` is not the topic's agent `{agent}`")),
        ),
        _ => Ok(()),
    }
}

fn unknown_agent(team: &str, agent: &str) -> MqttError {
    MqttError::UnknownAgent {
        team: team.to_string(),
        agent: agent.to_string(),
    }
}
