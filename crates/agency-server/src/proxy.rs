//! Who a request comes from when it came through proxies: only the proxies the operator names
//! (`--trusted-proxy`) are believed. A connection from one of them is a proxy's: the client is
//! the last address the chain of forwarding headers names that is not itself a trusted proxy
//! (`Forwarded: for=…`, else `X-Forwarded-For`), read from the right, so whatever a client
//! wrote in those headers itself is never taken. A connection from anywhere else is the
//! client's own, whatever headers it sends.

use std::net::IpAddr;

use axum::http::HeaderMap;

/// The proxies the operator names: addresses or networks (`10.0.0.0/8`, `::1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

/// The client's address, as the trusted proxies tell it (the peer's own when it is not one):
/// what per-address limits and logs count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

impl TrustedProxies {
    /// `ADDR` or `ADDR/BITS` each.
    pub fn parse(items: &[impl AsRef<str>]) -> Result<Self, String> {
        items
            .iter()
            .map(|item| {
                let item = item.as_ref().trim();
                let (addr, bits) = match item.split_once('/') {
                    Some((addr, bits)) => (addr, Some(bits)),
                    None => (item, None),
                };
                let ip: IpAddr = addr.parse().map_err(|_| {
                    format!("`{item}` is not an address or a network (10.0.0.0/8, ::1)")
                })?;
                let ip = ip.to_canonical();
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let bits = match bits {
                    None => max,
                    Some(b) => b
                        .parse::<u8>()
                        .ok()
                        .filter(|b| *b <= max)
                        .ok_or_else(|| format!("`{item}`: the prefix must be 0 to {max}"))?,
                };
                Ok((ip, bits))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether `ip` is one of them.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|(net, bits)| in_network(ip, *net, *bits))
    }

    /// The client behind `peer` (see the module's documentation).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.contains(peer) {
            return peer;
        }
        let chain = forwarded_chain(headers);
        for hop in chain.iter().rev() {
            match hop {
                // A hop the proxies could not name ("unknown", an obfuscated name): no one
                // further left can be believed.
                None => return peer,
                Some(ip) if !self.contains(*ip) => return *ip,
                Some(_) => {}
            }
        }
        // Proxies all the way: the first of them.
        chain.first().copied().flatten().unwrap_or(peer)
    }
}

fn in_network(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

/// The addresses the forwarding headers name, left to right (`None` for one that is not an
/// address): `Forwarded`'s `for=` when there is such a header (RFC 7239), else
/// `X-Forwarded-For`.
fn forwarded_chain(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let forwarded = values("forwarded");
    if !forwarded.is_empty() {
        return forwarded
            .iter()
            .map(|element| {
                element
                    .split(';')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(k, _)| k.trim().eq_ignore_ascii_case("for"))
                    .and_then(|(_, v)| node(v.trim().trim_matches('"')))
            })
            .collect();
    }
    values("x-forwarded-for").iter().map(|v| node(v)).collect()
}

/// An address as forwarding headers write it: `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`,
/// `[2001:db8::1]:4711`, `2001:db8::1`.
fn node(v: &str) -> Option<IpAddr> {
    if let Some(rest) = v.strip_prefix('[') {
        return rest
            .split_once(']')?
            .0
            .parse::<IpAddr>()
            .ok()
            .map(|ip| ip.to_canonical());
    }
    if let Ok(ip) = v.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let (host, port) = v.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn addresses_and_networks_are_read() {
        let p = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8"]).unwrap();
        assert!(p.contains(ip("10.9.8.7")));
        assert!(!p.contains(ip("11.0.0.1")));
        assert!(
            p.contains(ip("::ffff:127.0.0.1")),
            "an IPv4 peer on an IPv6 socket"
        );
        assert!(p.contains(ip("fd12::1")));
        assert!(!p.contains(ip("fe80::1")));
        assert!(
            TrustedProxies::parse(&["0.0.0.0/0"])
                .unwrap()
                .contains(ip("8.8.8.8"))
        );
        for bad in ["10.0.0.0/33", "proxy.local", "::1/129", "10.0.0.0/x", ""] {
            assert!(TrustedProxies::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_trusted_peers_headers_are_believed_from_the_right() {
        let p = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let xff = |v: &str| headers(&[("x-forwarded-for", v)]);
        // Not a proxy: its headers are its own words.
        assert_eq!(
            p.client(ip("203.0.113.9"), &xff("1.2.3.4")),
            ip("203.0.113.9")
        );
        // The proxy appended the client; what the client wrote before is not taken.
        assert_eq!(
            p.client(ip("10.0.0.2"), &xff("6.6.6.6, 1.2.3.4")),
            ip("1.2.3.4")
        );
        // Two proxies of ours in the chain.
        assert_eq!(
            p.client(ip("10.0.0.2"), &xff("1.2.3.4, 10.0.0.3")),
            ip("1.2.3.4")
        );
        // Proxies all the way, or no header: the first proxy, or the peer.
        assert_eq!(p.client(ip("10.0.0.2"), &xff("10.0.0.5")), ip("10.0.0.5"));
        assert_eq!(p.client(ip("10.0.0.2"), &HeaderMap::new()), ip("10.0.0.2"));
        // A hop the proxy could not name stops the walk.
        assert_eq!(
            p.client(ip("10.0.0.2"), &xff("1.2.3.4, unknown")),
            ip("10.0.0.2")
        );
        // Nobody trusted: nobody's headers.
        assert_eq!(
            TrustedProxies::default().client(ip("127.0.0.1"), &xff("1.2.3.4")),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn forwarded_is_read_before_x_forwarded_for() {
        let p = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let h = headers(&[
            (
                "forwarded",
                r#"for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711""#,
            ),
            ("x-forwarded-for", "9.9.9.9"),
        ]);
        assert_eq!(p.client(ip("10.1.1.1"), &h), ip("2001:db8:cafe::17"));
        let h = headers(&[("forwarded", "for=192.0.2.43:8080;by=10.0.0.1")]);
        assert_eq!(p.client(ip("10.1.1.1"), &h), ip("192.0.2.43"));
        let h = headers(&[("forwarded", "For=\"_hidden\"")]);
        assert_eq!(p.client(ip("10.1.1.1"), &h), ip("10.1.1.1"));
    }
}
