use std::fmt;

use secrecy::SecretString;

use crate::MqttError;

/// Where the broker is and how to log in: `mqtt://[USER[:PASSWORD]@]HOST[:PORT][?client_id=ID&share=GROUP]`,
/// or `mqtts://` for TLS (the system's root certificates); or `embedded` (a broker inside the
/// process on 127.0.0.1:1883; `embedded://HOST:PORT` for another address).
#[derive(Clone)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    pub tls: bool,
    pub username: Option<String>,
    pub password: Option<SecretString>,
    /// The broker keeps this client's session (subscriptions, messages not yet acknowledged)
    /// under this id while it is away. Default `agency`; several processes need one each.
    pub client_id: String,
    /// With a group, the server subscribes through MQTT 5 shared subscriptions
    /// (`$share/GROUP/...`): processes of one group share the messages, each handled once.
    pub share_group: Option<String>,
    /// Run the broker inside the process, listening on `host:port`, and connect to it.
    pub embedded: bool,
    /// The embedded broker, once started ([`crate::start_broker`]).
    #[cfg(feature = "embedded")]
    pub broker: Option<std::sync::Arc<crate::embedded::Broker>>,
    /// The operator's own agencies take messages only with a key too, like accounts' (and
    /// the embedded broker lets no one in without one): `--mqtt-require-key`.
    pub require_key: bool,
}

impl fmt::Debug for MqttConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MqttConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("client_id", &self.client_id)
            .field("share_group", &self.share_group)
            .field("embedded", &self.embedded)
            .field("require_key", &self.require_key)
            .finish()
    }
}

impl MqttConfig {
    pub fn parse(url: &str) -> Result<Self, MqttError> {
        let bad = || MqttError::Url(redact(url));
        let url = if url.trim() == "embedded" {
            "embedded://127.0.0.1:1883"
        } else {
            url
        };
        let parsed = url::Url::parse(url).map_err(|_| bad())?;
        let (tls, default_port, embedded) = match parsed.scheme() {
            "mqtt" | "tcp" => (false, 1883, false),
            "mqtts" | "ssl" => (true, 8883, false),
            "embedded" => (false, 1883, true),
            _ => return Err(bad()),
        };
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(bad)?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let username = Some(decode(parsed.username())).filter(|u| !u.is_empty());
        let password = parsed.password().map(|p| SecretString::from(decode(p)));
        let mut client_id = "agency".to_string();
        let mut share_group = None;
        for (k, v) in parsed.query_pairs() {
            match k.as_ref() {
                "client_id" if !v.is_empty() => client_id = v.into_owned(),
                "share" if crate::topic::valid_level(&v) => share_group = Some(v.into_owned()),
                _ => return Err(bad()),
            }
        }
        Ok(Self {
            host,
            port: parsed.port().unwrap_or(default_port),
            tls,
            username,
            password,
            client_id,
            share_group,
            embedded,
            #[cfg(feature = "embedded")]
            broker: None,
            require_key: false,
        })
    }
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => match url[s + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    }
}

/// Percent-decoding of a URL's user or password.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let v = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn urls_parse_with_credentials_and_options() {
        let c = MqttConfig::parse("mqtt://me:p%40ss@broker.local:1884?client_id=a1&share=agency");
        let c = c.ok();
        assert_eq!(c.as_ref().map(|c| c.host.as_str()), Some("broker.local"));
        assert_eq!(c.as_ref().map(|c| c.port), Some(1884));
        assert_eq!(
            c.as_ref().and_then(|c| c.username.clone()),
            Some("me".into())
        );
        assert_eq!(
            c.as_ref()
                .and_then(|c| c.password.as_ref())
                .map(|p| p.expose_secret().to_string()),
            Some("p@ss".into())
        );
        assert_eq!(c.as_ref().map(|c| c.client_id.as_str()), Some("a1"));
        assert_eq!(
            c.as_ref().and_then(|c| c.share_group.clone()),
            Some("agency".into())
        );
        assert!(!format!("{c:?}").contains("p@ss"));
        let tls = MqttConfig::parse("mqtts://broker").ok();
        assert_eq!(tls.map(|c| (c.tls, c.port)), Some((true, 8883)));
        let e = MqttConfig::parse("embedded").ok();
        assert_eq!(
            e.map(|c| (c.embedded, c.host, c.port, c.tls)),
            Some((true, "127.0.0.1".to_string(), 1883, false))
        );
        let e = MqttConfig::parse("embedded://0.0.0.0:1884?client_id=x").ok();
        assert_eq!(
            e.map(|c| (c.embedded, c.host, c.port, c.client_id)),
            Some((true, "0.0.0.0".to_string(), 1884, "x".to_string()))
        );
        assert!(!MqttConfig::parse("mqtt://h").is_ok_and(|c| c.embedded));
    }

    #[test]
    fn bad_urls_are_refused_without_their_password() {
        for url in ["http://x", "mqtt://", "nonsense", "mqtt://h?what=1"] {
            assert!(MqttConfig::parse(url).is_err(), "{url}");
        }
        let e = MqttConfig::parse("ftp://me:secret@h")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| !e.contains("secret")));
    }
}
