//! The embedded broker's door: every client connects through it, and it passes each packet on
//! to the broker (and back) as it came, but for what it must check.
//!
//! - **Who comes in.** A client that logs in with a password gives an agency's API key
//!   (`agk_…`, or `Bearer agk_…`): the connection then acts for that agency's team and may
//!   publish and subscribe only under `XMAGS/{teamId}/`; its messages reach the server with
//!   the key as their `authorization` user property, as if the client had sent it. A client
//!   without a password may use anything but accounts' teams (whose team ids are agency ids),
//!   unless the operator requires keys (`--mqtt-require-key`), then it is refused. A key that
//!   stops being valid (revoked, expired) ends its connections within [`RECHECK_EVERY`].
//! - **What it may do.** A publish outside what the connection may reach is refused as MQTT 5
//!   says (`PUBACK`/`PUBREC` with *Not authorized*; at QoS 0 it is dropped), a subscription
//!   likewise (`SUBACK` *Not authorized* for that filter, the others subscribed). Shared
//!   subscriptions are not for clients here: rumqttd keys a share group by its name alone, so a
//!   client's group could be the server's.
//! - **What it hears.** No key leaves the broker: `authorization` user properties are taken off
//!   every message delivered to a client.
//!
//! Client ids are kept apart from the server's and between teams (`o.ID` without a key, `t.TEAM.ID` with one),
//! so no client can take over another's session.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_runtime::keys::AuthError;
use bytes::{Bytes, BytesMut};
use rumqttc::v5::mqttbytes::v5::{
    ConnAck, ConnectReturnCode, Disconnect, DisconnectReasonCode, FixedHeader, Login, Packet,
    PacketType, PubAck, PubAckReason, PubComp, PubCompReason, PubRec, PubRecReason, PubRel,
    Publish, SubAck, Subscribe, SubscribeReasonCode, check,
};
use rumqttc::v5::mqttbytes::{Error as PacketError, QoS};
use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use super::{Keeper, MAX_PAYLOAD, SERVER_USER};
use crate::topic::ROOT;
use crate::wire::{AUTHORIZATION, bearer_token};

/// A client must send its `CONNECT` this soon.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);
/// How often a connection's key is checked again.
const RECHECK_EVERY: Duration = Duration::from_secs(30);
/// The largest packet either way: the broker's largest payload, with room for its headers.
const MAX_PACKET: u32 = (MAX_PAYLOAD + 64 * 1024) as u32;

pub(super) struct Door {
    keeper: Keeper,
    inner: SocketAddr,
    password: SecretString,
}

/// What a connection may reach.
enum Access {
    /// Logged in without a key: anything but accounts' teams.
    Open,
    /// Logged in with one of an agency's keys: its team's topics.
    Team { team: String, token: String },
}

impl Door {
    pub(super) fn new(keeper: Keeper, inner: SocketAddr, password: SecretString) -> Arc<Self> {
        Arc::new(Self {
            keeper,
            inner,
            password,
        })
    }
}

/// Lets clients in until `stop`, then gives the listener back.
pub(super) async fn run(
    listener: TcpListener,
    door: Arc<Door>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> TcpListener {
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return listener,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let door = door.clone();
                tokio::spawn(async move {
                    if let Err(e) = door.serve(stream).await {
                        tracing::debug!(error = %e, "an MQTT client's connection ended");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept an MQTT connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

type ClientWriter = tokio::sync::Mutex<OwnedWriteHalf>;

impl Door {
    async fn serve(&self, client: TcpStream) -> io::Result<()> {
        client.set_nodelay(true)?;
        let (mut from_client, to_client) = client.into_split();
        let to_client = tokio::sync::Mutex::new(to_client);
        let mut buf = BytesMut::with_capacity(4096);
        let frame = tokio::time::timeout(CONNECT_WITHIN, read_frame(&mut from_client, &mut buf))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no CONNECT in time"))??;
        let Some((_, frame)) = frame else {
            return Ok(());
        };
        let Ok(Packet::Connect(mut connect, will, login)) =
            Packet::read(&mut BytesMut::from(&frame[..]), None)
        else {
            return Err(io::Error::other(
                "the first packet is not an MQTT 5 CONNECT",
            ));
        };
        let password = login
            .as_ref()
            .map(|l| l.password.trim())
            .filter(|p| !p.is_empty());
        let access = match password {
            Some(password) => match self.admit(password).await {
                Ok(access) => access,
                Err(code) => return refuse(&to_client, code).await,
            },
            None if self.keeper.require_key => {
                return refuse(&to_client, ConnectReturnCode::NotAuthorized).await;
            }
            None => Access::Open,
        };
        if let Some(will) = &will
            && !allowed(&access, &String::from_utf8_lossy(&will.topic), false)
        {
            return refuse(&to_client, ConnectReturnCode::NotAuthorized).await;
        }
        connect.client_id = access.client_id(&connect.client_id);
        let (user, password) = (SERVER_USER, self.password.expose_secret());
        let mut broker = TcpStream::connect(self.inner).await?;
        broker.set_nodelay(true)?;
        broker
            .write_all(&encode(&Packet::Connect(
                connect,
                will,
                Some(Login::new(user, password)),
            ))?)
            .await?;
        let (from_broker, to_broker) = broker.into_split();
        // SUBSCRIBEs passed on with some filters left out: the SUBACK puts them back, refused.
        let pending = Mutex::new(HashMap::new());
        let up = self.upstream(from_client, buf, to_broker, &to_client, &pending, &access);
        let down = downstream(from_broker, &to_client, &pending);
        tokio::select! {
            r = up => r,
            r = down => r,
        }
    }

    /// The access a password gives: an agency's live key (counted as a request of the key)
    /// opens its team, once the agency is published.
    async fn admit(&self, password: &str) -> Result<Access, ConnectReturnCode> {
        let token = bearer_token(password);
        let key = match self.keeper.auth.authenticate(Some(token)).await {
            Ok(key) => key,
            Err(AuthError::RateLimited { .. }) => return Err(ConnectReturnCode::QuotaExceeded),
            Err(_) => return Err(ConnectReturnCode::BadUserNamePassword),
        };
        let agency = self
            .keeper
            .rt
            .agencies()
            .published(key.agency_id)
            .await
            .map_err(|_| ConnectReturnCode::NotAuthorized)?;
        Ok(Access::Team {
            team: agency_runtime::team_id(&agency).into_owned(),
            token: token.to_string(),
        })
    }

    /// Client to broker: publishes and subscriptions checked, a key's connection's publishes
    /// given its key.
    async fn upstream(
        &self,
        mut from_client: OwnedReadHalf,
        mut buf: BytesMut,
        mut to_broker: OwnedWriteHalf,
        to_client: &ClientWriter,
        pending: &Mutex<HashMap<u16, Vec<bool>>>,
        access: &Access,
    ) -> io::Result<()> {
        // The client's topic aliases (MQTT 5): a publish may name its topic by one.
        let mut aliases: HashMap<u16, String> = HashMap::new();
        // QoS 2 publishes refused: their PUBREL is answered here.
        let mut refused: HashSet<u16> = HashSet::new();
        let start = tokio::time::Instant::now() + RECHECK_EVERY;
        let mut recheck = tokio::time::interval_at(start, RECHECK_EVERY);
        loop {
            let frame = tokio::select! {
                frame = read_frame(&mut from_client, &mut buf) => frame?,
                _ = recheck.tick() => {
                    if let Access::Team { token, .. } = access
                        && self.keeper.auth.verify(Some(token)).await.is_err()
                    {
                        let bye = Disconnect::new(DisconnectReasonCode::NotAuthorized);
                        send(to_client, &Packet::Disconnect(bye)).await?;
                        return Ok(());
                    }
                    continue;
                }
            };
            let Some((header, frame)) = frame else {
                return Ok(());
            };
            match header.packet_type() {
                Ok(PacketType::Publish) => {
                    let mut publish = Publish::read(header, frame.clone()).map_err(invalid)?;
                    let topic = topic_of(&publish, &mut aliases)?;
                    if !allowed(access, &topic, false) {
                        refuse_publish(to_client, &publish, &mut refused).await?;
                        continue;
                    }
                    match access {
                        Access::Team { token, .. } if !carries_key(&publish) => {
                            let properties =
                                publish.properties.get_or_insert_with(Default::default);
                            properties
                                .user_properties
                                .push((AUTHORIZATION.into(), format!("Bearer {token}")));
                            to_broker
                                .write_all(&encode(&Packet::Publish(publish))?)
                                .await?;
                        }
                        _ => to_broker.write_all(&frame).await?,
                    }
                }
                Ok(PacketType::Subscribe) => {
                    let mut subscribe = Subscribe::read(header, frame.clone()).map_err(invalid)?;
                    let verdicts: Vec<bool> = subscribe
                        .filters
                        .iter()
                        .map(|f| allowed(access, &f.path, true))
                        .collect();
                    if verdicts.iter().all(|v| *v) {
                        to_broker.write_all(&frame).await?;
                    } else if !verdicts.iter().any(|v| *v) {
                        let refusal = SubAck {
                            pkid: subscribe.pkid,
                            return_codes: vec![SubscribeReasonCode::NotAuthorized; verdicts.len()],
                            properties: None,
                        };
                        send(to_client, &Packet::SubAck(refusal)).await?;
                    } else {
                        let mut verdict = verdicts.iter();
                        subscribe
                            .filters
                            .retain(|_| verdict.next().copied().unwrap_or(false));
                        if let Ok(mut p) = pending.lock() {
                            p.insert(subscribe.pkid, verdicts);
                        }
                        to_broker
                            .write_all(&encode(&Packet::Subscribe(subscribe))?)
                            .await?;
                    }
                }
                Ok(PacketType::PubRel) => {
                    let rel = PubRel::read(header, frame.clone()).map_err(invalid)?;
                    if refused.remove(&rel.pkid) {
                        let mut comp = PubComp::new(rel.pkid, None);
                        comp.reason = PubCompReason::Success;
                        send(to_client, &Packet::PubComp(comp)).await?;
                    } else {
                        to_broker.write_all(&frame).await?;
                    }
                }
                Ok(PacketType::Connect) => {
                    return Err(io::Error::other("a second CONNECT on one connection"));
                }
                _ => to_broker.write_all(&frame).await?,
            }
        }
    }
}

/// Broker to client: keys taken off messages, refused filters put back into SUBACKs.
async fn downstream(
    mut from_broker: OwnedReadHalf,
    to_client: &ClientWriter,
    pending: &Mutex<HashMap<u16, Vec<bool>>>,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(4096);
    while let Some((header, frame)) = read_frame(&mut from_broker, &mut buf).await? {
        let out = match header.packet_type() {
            Ok(PacketType::Publish) => {
                let mut publish = Publish::read(header, frame.clone()).map_err(invalid)?;
                match publish.properties.as_mut() {
                    Some(p) if carries_key_in(&p.user_properties) => {
                        p.user_properties
                            .retain(|(name, _)| !name.eq_ignore_ascii_case(AUTHORIZATION));
                        encode(&Packet::Publish(publish))?.freeze()
                    }
                    _ => frame,
                }
            }
            Ok(PacketType::SubAck) if pending.lock().is_ok_and(|p| !p.is_empty()) => {
                let mut ack = SubAck::read(header, frame).map_err(invalid)?;
                let verdicts = pending.lock().ok().and_then(|mut p| p.remove(&ack.pkid));
                if let Some(verdicts) = verdicts {
                    let mut given = std::mem::take(&mut ack.return_codes).into_iter();
                    ack.return_codes = verdicts
                        .iter()
                        .map(|allowed| match allowed {
                            true => given.next().unwrap_or(SubscribeReasonCode::Unspecified),
                            false => SubscribeReasonCode::NotAuthorized,
                        })
                        .collect();
                }
                encode(&Packet::SubAck(ack))?.freeze()
            }
            _ => frame,
        };
        to_client.lock().await.write_all(&out).await?;
    }
    Ok(())
}

impl Access {
    /// The client id the broker knows the client by: apart from the server's and from other
    /// teams' clients. An empty one (MQTT 5 lets the broker choose) gets one of its own.
    fn client_id(&self, given: &str) -> String {
        let given = if given.is_empty() {
            uuid::Uuid::now_v7().simple().to_string()
        } else {
            given.to_string()
        };
        match self {
            Access::Open => format!("o.{given}"),
            Access::Team { team, .. } => format!("t.{team}.{given}"),
        }
    }
}

/// Whether `access` may publish to the topic (or subscribe to the filter) `path`.
fn allowed(access: &Access, path: &str, filter: bool) -> bool {
    if path.starts_with("$share/") {
        return false;
    }
    let mut levels = path.split('/');
    let first = levels.next().unwrap_or_default();
    let second = levels.next();
    match access {
        Access::Team { team, .. } => first == ROOT && second == Some(team.as_str()),
        Access::Open => {
            let reaches_root = first == ROOT || (filter && matches!(first, "+" | "#"));
            if !reaches_root {
                return true;
            }
            match second {
                // `#` covers every team; `XMAGS` or `+` alone, a single level, none.
                None => first != "#",
                Some("+" | "#") => false,
                // An account's team id is its agency's id.
                Some(team) => team.parse::<agency_core::AgencyId>().is_err(),
            }
        }
    }
}

/// A publish outside the connection's team is answered as not authorized and goes no further
/// (at QoS 2 its PUBREL is answered here too: it is kept in `refused`).
async fn refuse_publish(
    to_client: &ClientWriter,
    publish: &Publish,
    refused: &mut HashSet<u16>,
) -> io::Result<()> {
    let pkid = publish.pkid;
    match publish.qos {
        QoS::AtMostOnce => Ok(()),
        QoS::AtLeastOnce => {
            let mut ack = PubAck::new(pkid, None);
            ack.reason = PubAckReason::NotAuthorized;
            send(to_client, &Packet::PubAck(ack)).await
        }
        QoS::ExactlyOnce => {
            refused.insert(pkid);
            let mut rec = PubRec::new(pkid, None);
            rec.reason = PubRecReason::NotAuthorized;
            send(to_client, &Packet::PubRec(rec)).await
        }
    }
}

/// The topic a publish goes to, by name or by the alias it set before.
fn topic_of(publish: &Publish, aliases: &mut HashMap<u16, String>) -> io::Result<String> {
    let alias = publish.properties.as_ref().and_then(|p| p.topic_alias);
    let topic = String::from_utf8_lossy(&publish.topic).into_owned();
    match alias {
        Some(alias) if topic.is_empty() => aliases
            .get(&alias)
            .cloned()
            .ok_or_else(|| io::Error::other(format!("topic alias {alias} was never set"))),
        Some(alias) => {
            aliases.insert(alias, topic.clone());
            Ok(topic)
        }
        None => Ok(topic),
    }
}

fn carries_key(publish: &Publish) -> bool {
    publish
        .properties
        .as_ref()
        .is_some_and(|p| carries_key_in(&p.user_properties))
}

fn carries_key_in(user_properties: &[(String, String)]) -> bool {
    user_properties
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case(AUTHORIZATION))
}

/// Reads one whole packet (`None` when the connection closed): its fixed header and bytes.
async fn read_frame(
    from: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
) -> io::Result<Option<(FixedHeader, Bytes)>> {
    loop {
        match check(buf.iter(), Some(MAX_PACKET)) {
            Ok(header) => {
                let frame = buf.split_to(header.frame_length()).freeze();
                return Ok(Some((header, frame)));
            }
            Err(PacketError::InsufficientBytes(_)) => {}
            Err(e) => return Err(invalid(e)),
        }
        if from.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

fn encode(packet: &Packet) -> io::Result<BytesMut> {
    let mut out = BytesMut::with_capacity(packet.size() + 5);
    packet.write(&mut out, None).map_err(invalid)?;
    Ok(out)
}

async fn send(to_client: &ClientWriter, packet: &Packet) -> io::Result<()> {
    let bytes = encode(packet)?;
    to_client.lock().await.write_all(&bytes).await
}

/// Answers a `CONNECT` with a refusal; the connection then closes.
async fn refuse(to_client: &ClientWriter, code: ConnectReturnCode) -> io::Result<()> {
    let ack = ConnAck {
        session_present: false,
        code,
        properties: None,
    };
    send(to_client, &Packet::ConnAck(ack)).await?;
    to_client.lock().await.shutdown().await
}

fn invalid(e: PacketError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}
