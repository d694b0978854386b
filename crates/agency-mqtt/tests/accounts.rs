//! Every account's agencies over MQTT: an account's team id is its agency's id, and its topics
//! act only with one of that agency's API keys — sent as the MQTT 5 user property
//! `authorization` on any broker, or given as the password on the embedded broker, whose door
//! then keeps the connection to that team's topics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{Client, Server, Setup};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

const MANAGER: &str = "MGR-001";

/// An account's published plant (the same name and handle for every account) and one of its
/// keys: its team id and the key.
async fn account_plant(server: &Server, account: &str) -> (String, String) {
    let yaml = common::agency_yaml("plant", "PLANT");
    let file = agency_file::AgencyFile::parse("plant.yaml", &yaml).unwrap();
    let agency = server
        .rt
        .agencies()
        .save(&file.draft, account)
        .await
        .unwrap();
    let (_, key) = server
        .auth
        .create_key(
            &agency,
            "mqtt",
            None,
            None,
            agency_core::KeyBudgets::default(),
        )
        .await
        .unwrap();
    (agency.id.to_string(), key.expose_secret().to_string())
}

/// The entries of a conversation, read over HTTP with `key`.
async fn entries(server: &Server, key: &str, cid: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(format!("{}/api/conversations/{cid}/entries", server.http))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// On any broker: a client with an account's key talks to that account's team as the spec's
/// flow says, the turn stored under that agency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accounts_team_talks_with_its_key() {
    let Some((host, port)) = common::broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let (a_team, a_key) = account_plant(&server, "account-a").await;
    let (b_team, b_key) = account_plant(&server, "account-b").await;
    assert_ne!(
        a_team, b_team,
        "two accounts' plants of one name are two teams"
    );

    let mut a = Client::connect_keyed(&host, port, &a_team, &a_key).await;
    a.wait_for_server(MANAGER).await;
    let (cid, seen) = a.converse(MANAGER, "status of XYZ?").await;
    assert!(
        seen.iter()
            .all(|(topic, _)| topic.starts_with(&format!("XMAGS/{a_team}/"))),
        "{seen:?}"
    );
    let (status, stored) = entries(&server, &a_key, &cid).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored[0]["user_query"], "status of XYZ?");
    assert_eq!(
        stored[0]["response"],
        "Status: All normal (Please check: status of XYZ?)"
    );
    // The other account's key does not read it.
    assert_eq!(entries(&server, &b_key, &cid).await.0, 404);
    server.stop().await;
}

/// On an external broker anyone may publish anywhere: the server acts on an account's team
/// only for a message that carries one of its keys, and says why it does not otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accounts_team_refuses_messages_without_its_key() {
    if common::broker_addr() == "embedded" {
        // The embedded broker's door keeps such messages from the server: see `the_door_*`.
        return;
    }
    let Some((host, port)) = common::broker().await else {
        return;
    };
    let mut server = Server::start(&host, port).await;
    let (a_team, _) = account_plant(&server, "account-a").await;
    let (_, b_key) = account_plant(&server, "account-b").await;
    let mut stranger = Client::connect(&host, port, &a_team).await;
    let cid = uuid::Uuid::now_v7().to_string();
    let init = json!({"agent_id": MANAGER, "conversation_id": cid, "content": " "});

    // No key, another account's, and one that is no one's: each refused, saying why.
    let refusals = [
        (None, "authorization"),
        (Some(b_key), "not one of"),
        (Some("agk_not_a_key".to_string()), "Incorrect API key"),
    ];
    for (key, why) in refusals {
        stranger.key = key;
        stranger
            .send_json(&format!("CMD/chat_new/{MANAGER}"), init.clone())
            .await;
        let error = stranger.next(&format!("EVT/error/{MANAGER}")).await;
        assert_eq!(error["exception_type"], "Unauthorized", "{error}");
        assert!(error["message"].as_str().unwrap().contains(why), "{error}");
    }
    // Nothing was made.
    assert!(
        stranger
            .next_within(
                &format!("EVT/chat_progress/{MANAGER}/{cid}"),
                Duration::from_millis(300)
            )
            .await
            .is_none()
    );
    server.stop().await;
}

/// `--mqtt-require-key`: the operator's own teams take messages only with a key too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_may_require_keys_for_its_own_teams() {
    if common::broker_addr() == "embedded" {
        return; // The door refuses keyless clients there: see `the_door_*`.
    }
    let Some((host, port)) = common::broker().await else {
        return;
    };
    let setup = Setup {
        require_key: true,
        ..Setup::default()
    };
    let mut server = Server::start_with(&host, port, setup).await;
    let mut keyless = Client::connect(&host, port, &server.team).await;
    let cid = uuid::Uuid::now_v7().to_string();
    keyless
        .send_json(
            &format!("CMD/chat_new/{MANAGER}"),
            json!({"agent_id": MANAGER, "conversation_id": cid, "content": " "}),
        )
        .await;
    let error = keyless.next(&format!("EVT/error/{MANAGER}")).await;
    assert_eq!(error["exception_type"], "Unauthorized", "{error}");

    let mut keyed = Client::connect_keyed(&host, port, &server.team, &server.key).await;
    keyed.wait_for_server(MANAGER).await;
    let (_, seen) = keyed.converse(MANAGER, "status?").await;
    assert!(seen.iter().any(|(t, _)| t.contains("chat_response")));
    server.stop().await;
}

#[cfg(feature = "embedded")]
mod door {
    use std::time::Duration;

    use rumqttc::v5::mqttbytes::QoS;
    use rumqttc::v5::mqttbytes::v5::{
        Filter, Packet, PubAckReason, PublishProperties, SubscribeReasonCode,
    };
    use rumqttc::v5::{AsyncClient, ConnectionError, Event, MqttOptions};
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::{MANAGER, account_plant};
    use crate::common::{self, Client, Server, Setup};

    /// A bare MQTT 5 client that hands the test every packet it receives.
    struct Raw {
        client: AsyncClient,
        packets: mpsc::UnboundedReceiver<Result<Packet, String>>,
    }

    impl Raw {
        async fn connect(port: u16, password: Option<&str>) -> Raw {
            let mut options =
                MqttOptions::new(format!("raw-{}", common::unique()), "127.0.0.1", port);
            options.set_keep_alive(Duration::from_secs(30));
            if let Some(password) = password {
                options.set_credentials("key", password);
            }
            let (client, mut eventloop) = AsyncClient::new(options, 16);
            let (tx, packets) = mpsc::unbounded_channel();
            tokio::spawn(async move {
                loop {
                    let sent = match eventloop.poll().await {
                        Ok(Event::Incoming(packet)) => tx.send(Ok(packet)),
                        Ok(Event::Outgoing(_)) => Ok(()),
                        Err(e) => {
                            let _ = tx.send(Err(error_of(&e)));
                            return;
                        }
                    };
                    if sent.is_err() {
                        return;
                    }
                }
            });
            Raw { client, packets }
        }

        /// The next packet the test looks for (keep-alives and the like pass).
        async fn next(&mut self) -> Result<Packet, String> {
            loop {
                let packet = tokio::time::timeout(Duration::from_secs(30), self.packets.recv())
                    .await
                    .expect("nothing arrived")
                    .expect("the connection's loop ended");
                match packet {
                    Ok(Packet::PingResp(_)) => {}
                    other => return other,
                }
            }
        }

        async fn subscribe(&mut self, filters: &[String]) -> Vec<SubscribeReasonCode> {
            self.client
                .subscribe_many(
                    filters
                        .iter()
                        .map(|f| Filter::new(f.clone(), QoS::AtLeastOnce)),
                )
                .await
                .unwrap();
            loop {
                match self.next().await {
                    Ok(Packet::SubAck(ack)) => return ack.return_codes,
                    Ok(_) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    fn error_of(e: &ConnectionError) -> String {
        match e {
            ConnectionError::ConnectionRefused(code) => format!("refused: {code:?}"),
            other => other.to_string(),
        }
    }

    fn granted(code: &SubscribeReasonCode) -> bool {
        matches!(code, SubscribeReasonCode::Success(_))
    }

    /// A key as password keeps the connection to its team: there it talks without sending the
    /// key again, elsewhere it is refused as MQTT 5 says.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_door_keeps_a_keys_connection_to_its_team() {
        let port = common::embedded_broker().await;
        let mut server = Server::start("127.0.0.1", port).await;
        let (a_team, a_key) = account_plant(&server, "account-a").await;
        let (b_team, _) = account_plant(&server, "account-b").await;

        let mut a = Raw::connect(port, Some(&a_key)).await;
        assert!(matches!(a.next().await, Ok(Packet::ConnAck(_))));
        let codes = a
            .subscribe(&[
                format!("XMAGS/{a_team}/EVT/#"),
                format!("XMAGS/{b_team}/EVT/#"),
                format!("XMAGS/{}/EVT/#", server.team),
                "XMAGS/#".into(),
                "#".into(),
                format!("$share/g/XMAGS/{a_team}/EVT/#"),
            ])
            .await;
        assert!(granted(&codes[0]), "{codes:?}");
        assert!(
            codes[1..]
                .iter()
                .all(|c| *c == SubscribeReasonCode::NotAuthorized),
            "{codes:?}"
        );

        // Its own team: the door gives the server the key.
        let cid = uuid::Uuid::now_v7().to_string();
        let init = json!({"agent_id": MANAGER, "conversation_id": cid, "content": " "});
        a.client
            .publish(
                format!("XMAGS/{a_team}/CMD/chat_new/{MANAGER}"),
                QoS::AtLeastOnce,
                false,
                serde_json::to_vec(&init).unwrap(),
            )
            .await
            .unwrap();
        let progress = format!("XMAGS/{a_team}/EVT/chat_progress/{MANAGER}/{cid}");
        loop {
            match a.next().await.unwrap() {
                Packet::Publish(p) if p.topic == progress.as_bytes() => {
                    let body: serde_json::Value = serde_json::from_slice(&p.payload).unwrap();
                    assert_eq!(body["status"], "initialized", "{body}");
                    break;
                }
                Packet::Publish(p) if String::from_utf8_lossy(&p.topic).contains("EVT/error") => {
                    panic!("{}", String::from_utf8_lossy(&p.payload))
                }
                _ => {}
            }
        }

        // Another team's topic: refused, not passed on.
        a.client
            .publish(
                format!("XMAGS/{b_team}/CMD/chat_new/{MANAGER}"),
                QoS::AtLeastOnce,
                false,
                serde_json::to_vec(&init).unwrap(),
            )
            .await
            .unwrap();
        loop {
            match a.next().await.unwrap() {
                Packet::PubAck(ack) if ack.reason != PubAckReason::Success => {
                    assert_eq!(ack.reason, PubAckReason::NotAuthorized);
                    break;
                }
                _ => {}
            }
        }
        server.stop().await;
    }

    /// A password that is no live key, or none when keys are required, is refused at CONNECT;
    /// without one a client reaches the operator's teams but no account's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_door_checks_who_comes_in() {
        let port = common::embedded_broker().await;
        let mut server = Server::start("127.0.0.1", port).await;
        let (a_team, a_key) = account_plant(&server, "account-a").await;

        let mut wrong = Raw::connect(port, Some("agk_not_a_key")).await;
        let refused = wrong.next().await.unwrap_err();
        assert!(refused.contains("BadUserNamePassword"), "{refused}");

        let mut open = Raw::connect(port, None).await;
        assert!(matches!(open.next().await, Ok(Packet::ConnAck(_))));
        let codes = open
            .subscribe(&[
                format!("XMAGS/{}/EVT/#", server.team),
                format!("XMAGS/{a_team}/EVT/#"),
                "XMAGS/+/EVT/#".into(),
                "#".into(),
                "elsewhere/#".into(),
            ])
            .await;
        let verdicts: Vec<bool> = codes.iter().map(granted).collect();
        assert_eq!(verdicts, [true, false, false, false, true], "{codes:?}");

        // A revoked key no longer opens the door.
        server
            .auth
            .revoke(a_team.parse().unwrap(), "mqtt")
            .await
            .unwrap();
        let mut revoked = Raw::connect(port, Some(&a_key)).await;
        let refused = revoked.next().await.unwrap_err();
        assert!(refused.contains("BadUserNamePassword"), "{refused}");
        server.stop().await;

        // Keys required: no way in without one.
        let port = common::embedded_broker().await;
        let setup = Setup {
            require_key: true,
            ..Setup::default()
        };
        let mut server = Server::start_with("127.0.0.1", port, setup).await;
        let mut keyless = Raw::connect(port, None).await;
        let refused = keyless.next().await.unwrap_err();
        assert!(refused.contains("NotAuthorized"), "{refused}");
        let mut keyed = Client::connect_keyed("127.0.0.1", port, &server.team, &server.key).await;
        keyed.wait_for_server(MANAGER).await;
        server.stop().await;
    }

    /// A key sent as a user property is for the server: no client hears it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_door_keeps_keys_from_listeners() {
        let port = common::embedded_broker().await;
        let mut server = Server::start("127.0.0.1", port).await;
        let team = server.team.clone();
        let mut listener = Raw::connect(port, None).await;
        assert!(matches!(listener.next().await, Ok(Packet::ConnAck(_))));
        let codes = listener.subscribe(&[format!("XMAGS/{team}/DATA/#")]).await;
        assert!(granted(&codes[0]), "{codes:?}");

        let sender = Raw::connect(port, None).await;
        let properties = PublishProperties {
            user_properties: vec![
                ("Authorization".into(), format!("Bearer {}", server.key)),
                ("note".into(), "kept".into()),
            ],
            ..Default::default()
        };
        sender
            .client
            .publish_with_properties(
                format!("XMAGS/{team}/DATA/observation/FERM-DATA-AGENT-001"),
                QoS::AtLeastOnce,
                false,
                serde_json::to_vec(&json!({"content": "Valve 9 fine"})).unwrap(),
                properties,
            )
            .await
            .unwrap();
        loop {
            if let Packet::Publish(p) = listener.next().await.unwrap() {
                let heard = p.properties.map(|p| p.user_properties).unwrap_or_default();
                assert_eq!(heard, [("note".to_string(), "kept".to_string())]);
                break;
            }
        }
        server.stop().await;
    }
}
