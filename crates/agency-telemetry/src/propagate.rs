//! W3C trace context in and out: an incoming `traceparent` continues the caller's trace; the
//! server's own calls (providers, bots, MCP servers over HTTP, MQTT publications) carry the
//! current span's. Without tracing on, nothing is read or written.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;

struct ReadHeaders<'a>(&'a http::HeaderMap);

impl Extractor for ReadHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The current span's W3C trace context: its `traceparent` (`00-{trace}-{span}-{flags}`),
/// written without allocating, and its `tracestate` when it has one.
fn current() -> Option<([u8; 55], Option<String>)> {
    use opentelemetry::trace::TraceContextExt as _;
    use std::io::Write as _;
    let cx = Context::current();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let mut parent = [0u8; 55];
    write!(
        &mut parent[..],
        "00-{:032x}-{:016x}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
    .ok()?;
    let state = Some(sc.trace_state().header()).filter(|s| !s.is_empty());
    Some((parent, state))
}

/// Adds the current span's `traceparent` (and `tracestate`) to an outgoing request's headers.
pub fn inject(headers: &mut http::HeaderMap) {
    if !crate::tracing_on() {
        return;
    }
    let Some((parent, state)) = current() else {
        return;
    };
    if let Ok(value) = http::HeaderValue::from_bytes(&parent) {
        headers.insert(http::HeaderName::from_static("traceparent"), value);
    }
    if let Some(Ok(value)) = state.map(http::HeaderValue::try_from) {
        headers.insert(http::HeaderName::from_static("tracestate"), value);
    }
}

/// The context an incoming request's `traceparent` names (the caller's span), when it names
/// one: the parent of the request's span. Otherwise the current context.
pub fn continue_from(headers: &http::HeaderMap) -> Context {
    if !crate::tracing_on() || !headers.contains_key("traceparent") {
        return Context::current();
    }
    TraceContextPropagator::new().extract(&ReadHeaders(headers))
}

/// The current span's trace context as name-value pairs (for MQTT 5 user properties).
pub fn pairs() -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    if !crate::tracing_on() {
        return pairs;
    }
    if let Some((parent, state)) = current() {
        pairs.push((
            "traceparent".to_string(),
            String::from_utf8_lossy(&parent).into_owned(),
        ));
        if let Some(state) = state {
            pairs.push(("tracestate".to_string(), state));
        }
    }
    pairs
}

/// The context `pairs` (MQTT 5 user properties) name, when they name one; otherwise the
/// current context.
pub fn continue_from_pairs(pairs: &[(String, String)]) -> Context {
    if !crate::tracing_on() || !pairs.iter().any(|(k, _)| k == "traceparent") {
        return Context::current();
    }
    struct Read<'a>(&'a [(String, String)]);
    impl Extractor for Read<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.iter().map(|(k, _)| k.as_str()).collect()
        }
    }
    TraceContextPropagator::new().extract(&Read(pairs))
}
