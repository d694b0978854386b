//! A stock MQTT 5 client (rumqttc) of one team: subscribed to its events, publishing on its
//! topics.

use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Filter, Packet, PublishProperties};
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use serde_json::Value;
use tokio::sync::mpsc;

pub struct Mqtt {
    client: AsyncClient,
    /// Every message the team's events brought: topic and JSON body (`null` when not JSON).
    pub inbox: mpsc::UnboundedReceiver<(String, Value)>,
    team: String,
}

impl Mqtt {
    /// Connects to the broker at `host:port`, subscribed to `XMAGS/{team}/EVT/#` once this
    /// returns.
    pub async fn connect(addr: &str, team: &str) -> Self {
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        let id = uuid::Uuid::now_v7().simple().to_string();
        let mut options = MqttOptions::new(
            format!("test-client-{id}"),
            host,
            port.parse().expect("a port"),
        );
        options.set_keep_alive(Duration::from_secs(30));
        let (client, mut eventloop) = AsyncClient::new(options, 64);
        let (tx, inbox) = mpsc::unbounded_channel();
        let (subscribed_tx, subscribed) = tokio::sync::oneshot::channel();
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
            .subscribe_many([Filter::new(format!("XMAGS/{team}/EVT/#"), QoS::AtLeastOnce)])
            .await
            .expect("subscribe");
        subscribed.await.expect("subscribed");
        Self {
            client,
            inbox,
            team: team.to_string(),
        }
    }

    /// Publishes `body` on the team's `topic`.
    pub async fn send(&self, topic: &str, body: Value) {
        self.send_traced(topic, body, None).await;
    }

    /// Publishes `body` on the team's `topic`, with a `traceparent` user property if given.
    pub async fn send_traced(&self, topic: &str, body: Value, traceparent: Option<&str>) {
        let properties = PublishProperties {
            user_properties: traceparent
                .map(|tp| vec![("traceparent".to_string(), tp.to_string())])
                .unwrap_or_default(),
            ..PublishProperties::default()
        };
        self.client
            .publish_with_properties(
                format!("XMAGS/{}/{topic}", self.team),
                QoS::AtLeastOnce,
                false,
                serde_json::to_vec(&body).expect("JSON"),
                properties,
            )
            .await
            .expect("publish");
    }

    /// The next message on a topic ending with `suffix` (others dropped), within `wait`.
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
}
