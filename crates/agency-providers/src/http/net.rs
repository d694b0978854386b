//! Which addresses the server calls for accounts.
//!
//! A URL an account gave — a bot's endpoint, a provider's base URL — is someone else's, called
//! from inside our network. Unless the operator allows it, such calls reach only public
//! addresses: checked on the URL when it is given, and on every DNS answer when it is called
//! (a name that later resolves elsewhere is caught at connect time), with no proxy and no
//! redirects in between.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::error::ProviderError;

/// How long [`check_url`] waits for a name to resolve before leaving the check to the call.
const LOOKUP_PATIENCE: Duration = Duration::from_secs(3);

/// What lifts the check, for the messages that name it.
pub const ALLOW_FLAG: &str = "--allow-private-addresses";

/// An `http` or `https` URL with a host and no credentials in it; `what` names it in errors
/// (`the endpoint`, `the base URL`).
pub fn parse_url(text: &str, what: &str) -> Result<reqwest::Url, ProviderError> {
    let url = reqwest::Url::parse(text.trim())
        .map_err(|e| ProviderError::Config(format!("`{text}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ProviderError::Config(format!(
            "{what} must be an http or https URL, not `{}:`",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ProviderError::Config(format!("{what} has no host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ProviderError::Config(format!(
            "{what} must not carry credentials"
        )));
    }
    Ok(url)
}

/// Refuses a URL whose host is a non-public address written out (`127.0.0.1`, `[::1]`), which
/// a client calls without asking its resolver.
pub fn refuse_literal(url: &reqwest::Url) -> Result<(), ProviderError> {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => refuse_private(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => refuse_private(IpAddr::V6(ip)),
        _ => Ok(()),
    }
}

/// Whether `url` may be called now: its host a public address, or a name whose every address
/// is public. A name that does not resolve (yet) passes: the call's own resolver checks it
/// again.
pub async fn check_url(url: &reqwest::Url) -> Result<(), ProviderError> {
    refuse_literal(url)?;
    let Some(url::Host::Domain(host)) = url.host() else {
        return Ok(());
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let lookup = tokio::net::lookup_host((host, port));
    let Ok(Ok(addrs)) = tokio::time::timeout(LOOKUP_PATIENCE, lookup).await else {
        return Ok(());
    };
    for addr in addrs {
        refuse_private(addr.ip())?;
    }
    Ok(())
}

pub(crate) fn refuse_private(ip: IpAddr) -> Result<(), ProviderError> {
    if is_public(ip) {
        Ok(())
    } else {
        Err(ProviderError::Config(format!(
            "the address {ip} is loopback or private, which this server does not call for \
             accounts (its operator can allow it with {ALLOW_FLAG})"
        )))
    }
}

/// A client for URLs accounts gave: no proxy, no redirects, and, unless `allow_private`, a
/// resolver that drops non-public addresses.
pub fn guard(builder: reqwest::ClientBuilder, allow_private: bool) -> reqwest::ClientBuilder {
    builder
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
}

/// Whether `ip` is on the public internet: not loopback, private, link-local, shared (CGNAT),
/// unspecified, broadcast, multicast, documentation or benchmarking space.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (first & 0xffc0) == 0xfec0 // site-local fec0::/10
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || (first == 0x0064 && v6.segments()[1] == 0xff9b) // NAT64 64:ff9b::/96
                || v6 == Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 1))
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared 100.64.0.0/10
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18.0.0/15
        || a >= 240)
}

/// The system resolver, without the addresses a client refuses.
struct GuardedResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                let e = format!("`{host}` has no address this server may call");
                return Err(e.into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_out_private_hosts_are_refused() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://[::1]/v1",
            "https://10.0.0.1",
        ] {
            assert!(
                refuse_literal(&parse_url(url, "the URL").unwrap()).is_err(),
                "{url}"
            );
        }
        assert!(
            refuse_literal(&parse_url("https://api.example.com/v1", "the URL").unwrap()).is_ok()
        );
        assert!(parse_url("ftp://example.com", "the URL").is_err());
        assert!(parse_url("http://user:pw@example.com", "the URL").is_err());
    }
}
