//! Headers an account stored for one of its HTTP MCP servers (sealed at rest by the runtime):
//! checked once, sent on every request to that server, never logged.

use reqwest::header::{HeaderName, HeaderValue};

/// Most headers one server's credentials may hold.
pub const MAX_HEADERS: usize = 8;
/// Longest name of one header.
pub const MAX_NAME_BYTES: usize = 100;
/// Longest value of one header.
pub const MAX_VALUE_BYTES: usize = 4096;

/// Headers the MCP transport sets itself, or that would change how the request is framed or
/// where it goes: an account cannot set them.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "accept",
    "accept-encoding",
    "cookie",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Valid headers, sorted by name: equal credentials are equal values (the hub shares one
/// connection per server and credentials).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Credentials(Vec<(HeaderName, HeaderValue)>);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Credentials")
            .field(&self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl Credentials {
    /// Checks `headers` (name, value): 1 to [`MAX_HEADERS`] of them, names an HTTP header may
    /// have and none the transport sets itself, values a header may carry. The error says
    /// which header and why.
    pub fn new(headers: &[(String, String)]) -> Result<Self, String> {
        if headers.is_empty() {
            return Err("give at least one header".into());
        }
        if headers.len() > MAX_HEADERS {
            return Err(format!("at most {MAX_HEADERS} headers"));
        }
        let mut out: Vec<(HeaderName, HeaderValue)> = Vec::new();
        for (name, value) in headers {
            if name.len() > MAX_NAME_BYTES {
                return Err(format!(
                    "a header's name has at most {MAX_NAME_BYTES} bytes"
                ));
            }
            let header = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| format!("`{name}` is not a header name"))?;
            if RESERVED.contains(&header.as_str()) {
                return Err(format!(
                    "`{name}` is set by the MCP client itself and cannot be stored"
                ));
            }
            if out.iter().any(|(n, _)| *n == header) {
                return Err(format!("`{name}` is given twice"));
            }
            if value.is_empty() || value.len() > MAX_VALUE_BYTES {
                return Err(format!(
                    "the value of `{name}` must have 1 to {MAX_VALUE_BYTES} bytes"
                ));
            }
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                format!("the value of `{name}` holds characters a header cannot carry")
            })?;
            value.set_sensitive(true);
            out.push((header, value));
        }
        out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        Ok(Self(out))
    }

    /// The headers' names (what may be shown of them).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    pub(crate) fn headers(&self) -> impl Iterator<Item = (HeaderName, HeaderValue)> + '_ {
        self.0.iter().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn headers_are_checked_and_sorted() {
        let c =
            Credentials::new(&pairs(&[("X-Api-Key", "k"), ("Authorization", "Bearer t")])).unwrap();
        assert_eq!(
            c.names().collect::<Vec<_>>(),
            ["authorization", "x-api-key"]
        );
        assert_eq!(
            c,
            Credentials::new(&pairs(&[("authorization", "Bearer t"), ("x-api-key", "k")])).unwrap()
        );
        assert!(!format!("{c:?}").contains("Bearer"), "never shown");
        for (bad, says) in [
            (pairs(&[]), "at least one"),
            (pairs(&[("Host", "evil")]), "set by the MCP client"),
            (pairs(&[("Mcp-Session-Id", "x")]), "set by the MCP client"),
            (pairs(&[("bad header", "x")]), "not a header name"),
            (pairs(&[("a", "x"), ("A", "y")]), "given twice"),
            (pairs(&[("a", "line\nbreak")]), "cannot carry"),
            (pairs(&[("a", "")]), "1 to"),
        ] {
            let e = Credentials::new(&bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}

/// Who declared a server, with what an account stored for it: the operator's configuration
/// is trusted (its HTTP servers take headers from its variables, `headers_env`); an account's
/// HTTP server gets the credentials the account stored for it, if any.
#[derive(Clone, Copy, Debug)]
pub enum Declarer<'a> {
    Operator,
    Account(Option<&'a Credentials>),
}

impl Declarer<'_> {
    pub fn declared(&self) -> crate::Declared {
        match self {
            Declarer::Operator => crate::Declared::Operator,
            Declarer::Account(_) => crate::Declared::Account,
        }
    }

    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        match self {
            Declarer::Operator => None,
            Declarer::Account(c) => *c,
        }
    }
}

impl From<crate::Declared> for Declarer<'_> {
    fn from(d: crate::Declared) -> Self {
        match d {
            crate::Declared::Operator => Declarer::Operator,
            crate::Declared::Account => Declarer::Account(None),
        }
    }
}
