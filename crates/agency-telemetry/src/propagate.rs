//! W3C trace context in and out: an incoming `traceparent` continues the caller's trace; the
//! server's own calls (providers, bots, MCP servers over HTTP, MQTT publications) carry the
//! current span's. Without tracing on, nothing is read or written.

use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Headers<'a>(&'a mut http::HeaderMap);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct ReadHeaders<'a>(&'a http::HeaderMap);

impl Extractor for ReadHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Adds the current span's `traceparent` (and `tracestate`) to an outgoing request's headers.
pub fn inject(headers: &mut http::HeaderMap) {
    if !crate::tracing_on() {
        return;
    }
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut Headers(headers));
    });
}

/// `span` continues the trace an incoming request's `traceparent` names, when it names one.
pub fn continue_from(span: &tracing::Span, headers: &http::HeaderMap) {
    if !crate::tracing_on() || !headers.contains_key("traceparent") {
        return;
    }
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&ReadHeaders(headers)));
    let _ = span.set_parent(cx);
}

/// The current span's trace context as name-value pairs (for MQTT 5 user properties).
pub fn pairs() -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    if !crate::tracing_on() {
        return pairs;
    }
    struct Pairs<'a>(&'a mut Vec<(String, String)>);
    impl Injector for Pairs<'_> {
        fn set(&mut self, key: &str, value: String) {
            self.0.push((key.to_string(), value));
        }
    }
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut Pairs(&mut pairs))
    });
    pairs
}

/// `span` continues the trace named in `pairs` (MQTT 5 user properties), when they name one.
pub fn continue_from_pairs(span: &tracing::Span, pairs: &[(String, String)]) {
    if !crate::tracing_on() || !pairs.iter().any(|(k, _)| k == "traceparent") {
        return;
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
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Read(pairs)));
    let _ = span.set_parent(cx);
}
