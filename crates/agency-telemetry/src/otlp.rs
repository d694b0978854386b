//! Spans over OTLP http/protobuf, encoded straight from the SDK's span data into the request
//! body. The SDK's own exporter first copies every span into generated protobuf structs (a
//! string for every key and value, a vector for every id) and then encodes those: measured,
//! that copy was most of what exporting a span cost (see `docs/benchmarks.md#telemetry`). This
//! writes the same message (`ExportTraceServiceRequest`, checked against the SDK's in the
//! tests) with one allocation a batch. gRPC stays with the SDK's exporter.

use std::io::Read as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceState};
use opentelemetry::{Array, InstrumentationScope, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::TelemetryError;

/// What the collector may answer at most (an `ExportTraceServiceResponse`): the rest is not read.
const MAX_ANSWER: u64 = 64 << 10;

/// The exporter: one `POST` of `application/x-protobuf` a batch.
#[derive(Debug)]
pub(crate) struct HttpProtobuf {
    client: reqwest::blocking::Client,
    url: String,
    headers: http::HeaderMap,
    /// The process's resource, encoded once (an OTLP `Resource` message's fields).
    resource: Vec<u8>,
    resource_schema: String,
    /// The last body's size, so the next one is allocated once.
    last_size: AtomicUsize,
}

impl HttpProtobuf {
    /// The exporter for `url` (the full `…/v1/traces` address), as the `OTEL_EXPORTER_OTLP_*`
    /// variables configure it (headers, timeout).
    pub(crate) fn new(url: String) -> Result<Self, TelemetryError> {
        if let Some(compression) = env_for("COMPRESSION").filter(|c| c != "none") {
            return Err(TelemetryError::Traces(format!(
                "OTLP compression `{compression}` is not supported: unset \
                 OTEL_EXPORTER_OTLP_COMPRESSION or set it to `none`"
            )));
        }
        let timeout = env_for("TIMEOUT")
            .and_then(|ms| ms.parse().ok())
            .map_or(Duration::from_secs(10), Duration::from_millis);
        let mut headers = http::HeaderMap::new();
        for (name, value) in env_for("HEADERS")
            .as_deref()
            .map(parse_headers)
            .unwrap_or_default()
        {
            headers.insert(name, value);
        }
        // A blocking client is made (and used) off the async workers: it runs its own runtime.
        let client = std::thread::spawn(move || {
            reqwest::blocking::Client::builder()
                .timeout(timeout)
                .build()
        })
        .join()
        .map_err(|_| TelemetryError::Traces("the HTTP client could not be made".into()))?
        .map_err(|e| TelemetryError::Traces(e.to_string()))?;
        Ok(Self {
            client,
            url,
            headers,
            resource: Vec::new(),
            resource_schema: String::new(),
            last_size: AtomicUsize::new(0),
        })
    }
}

impl SpanExporter for HttpProtobuf {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut body = Vec::with_capacity(self.last_size.load(Ordering::Relaxed));
        encode_request(&mut body, &self.resource, &self.resource_schema, &batch);
        drop(batch);
        self.last_size.store(body.len(), Ordering::Relaxed);
        let response = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send()
            .map_err(|e| OTelSdkError::InternalFailure(format!("{}: {e}", self.url)))?;
        let status = response.status();
        // Read (a bounded part of) the answer, so that the connection is kept.
        let mut answer = Vec::new();
        let _ = response.take(MAX_ANSWER).read_to_end(&mut answer);
        if status.is_success() {
            Ok(())
        } else {
            Err(OTelSdkError::InternalFailure(format!(
                "{} answered {status}",
                self.url
            )))
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource.clear();
        let mut w = Writer(&mut self.resource);
        for (key, value) in resource.iter() {
            w.key_value(1, key.as_str(), value);
        }
        self.resource_schema = resource.schema_url().unwrap_or_default().to_string();
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_{name}`, else `OTEL_EXPORTER_OTLP_{name}`, when set and not empty.
pub(crate) fn env_for(name: &str) -> Option<String> {
    let read = |var: String| {
        std::env::var(var)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    read(format!("OTEL_EXPORTER_OTLP_TRACES_{name}"))
        .or_else(|| read(format!("OTEL_EXPORTER_OTLP_{name}")))
}

/// Where spans go over http/protobuf: the operator's `--otlp-endpoint` (its `/v1/traces`), else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT`'s
/// `/v1/traces`, else the local default (as the OTLP exporter specification says).
pub(crate) fn traces_url(flag: Option<&str>) -> String {
    let signal = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty());
    let base = |e: &str| format!("{}/v1/traces", e.trim().trim_end_matches('/'));
    match (flag, signal) {
        (Some(flag), _) => base(flag),
        (None, Some(signal)) => signal.trim().to_string(),
        (None, None) => std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .ok()
            .filter(|e| !e.trim().is_empty())
            .map_or_else(|| base("http://localhost:4318"), |e| base(&e)),
    }
}

/// `OTEL_EXPORTER_OTLP_HEADERS`' `name=value,name=value` (values percent-encoded); a pair that
/// is not a valid header is left out.
fn parse_headers(text: &str) -> Vec<(http::HeaderName, http::HeaderValue)> {
    text.split(',')
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            let value = percent_decode(value.trim());
            Some((
                http::HeaderName::from_bytes(name.trim().as_bytes()).ok()?,
                http::HeaderValue::from_bytes(&value).ok()?,
            ))
            .filter(|(_, v)| !v.is_empty())
        })
        .collect()
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// An `ExportTraceServiceRequest` of `spans` under one resource, grouped by scope.
pub(crate) fn encode_request(
    out: &mut Vec<u8>,
    resource: &[u8],
    resource_schema: &str,
    spans: &[SpanData],
) {
    let mut w = Writer(out);
    // ExportTraceServiceRequest.resource_spans
    w.message(1, |w| {
        // ResourceSpans.resource (attributes already encoded)
        w.message(1, |w| w.0.extend_from_slice(resource));
        let mut scopes: Vec<&InstrumentationScope> = Vec::new();
        for span in spans {
            if !scopes.contains(&&span.instrumentation_scope) {
                scopes.push(&span.instrumentation_scope);
            }
        }
        for scope in scopes {
            // ResourceSpans.scope_spans
            w.message(2, |w| {
                w.message(1, |w| {
                    w.string(1, scope.name());
                    w.string(2, scope.version().unwrap_or_default());
                    for kv in scope.attributes() {
                        w.key_value(3, kv.key.as_str(), &kv.value);
                    }
                });
                for span in spans.iter().filter(|s| &s.instrumentation_scope == scope) {
                    w.message(2, |w| w.span(span));
                }
                w.string(3, scope.schema_url().unwrap_or_default());
            });
        }
        w.string(3, resource_schema);
    });
}

/// Protobuf's wire format, for the fields OTLP spans use. As protobuf 3 does, a field holding
/// its default value is left out (the members of a `oneof` excepted).
struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field << 3 | u32::from(wire_type)));
    }

    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.tag(field, 0);
            self.varint(v);
        }
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.tag(field, 1);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn fixed32(&mut self, field: u32, v: u32) {
        if v != 0 {
            self.tag(field, 5);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        if !b.is_empty() {
            self.tag(field, 2);
            self.varint(b.len() as u64);
            self.0.extend_from_slice(b);
        }
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    /// A nested message: its length is written before it once it is known (one byte kept for
    /// it; a longer one moves the message up).
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Self)) {
        self.tag(field, 2);
        let at = self.0.len();
        self.0.push(0);
        body(self);
        let len = self.0.len() - at - 1;
        if len < 0x80 {
            self.0[at] = len as u8;
        } else {
            let mut prefix = Vec::with_capacity(10);
            Writer(&mut prefix).varint(len as u64);
            self.0.splice(at..=at, prefix);
        }
    }

    fn key_value(&mut self, field: u32, key: &str, value: &Value) {
        self.message(field, |w| {
            w.string(1, key);
            w.message(2, |w| w.any_value(value));
        });
    }

    /// An `AnyValue` (a `oneof`: its member is written even when it holds its default).
    fn any_value(&mut self, value: &Value) {
        match value {
            Value::String(s) => {
                self.tag(1, 2);
                self.varint(s.as_str().len() as u64);
                self.0.extend_from_slice(s.as_str().as_bytes());
            }
            Value::Bool(b) => {
                self.tag(2, 0);
                self.varint(u64::from(*b));
            }
            Value::I64(i) => {
                self.tag(3, 0);
                self.varint(*i as u64);
            }
            Value::F64(f) => {
                self.tag(4, 1);
                self.0.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Value::Array(array) => self.message(5, |w| match array {
                Array::Bool(v) => v.iter().for_each(|b| w.array_item(&Value::Bool(*b))),
                Array::I64(v) => v.iter().for_each(|i| w.array_item(&Value::I64(*i))),
                Array::F64(v) => v.iter().for_each(|f| w.array_item(&Value::F64(*f))),
                Array::String(v) => v.iter().for_each(|s| {
                    w.message(1, |w| {
                        w.tag(1, 2);
                        w.varint(s.as_str().len() as u64);
                        w.0.extend_from_slice(s.as_str().as_bytes());
                    });
                }),
                // A kind of array this version does not know: written empty.
                _ => {}
            }),
            // A kind of value this version does not know: its text.
            other => self.any_value(&Value::String(other.to_string().into())),
        }
    }

    fn array_item(&mut self, value: &Value) {
        self.message(1, |w| w.any_value(value));
    }

    fn ids(&mut self, context: &SpanContext) {
        self.bytes(1, &context.trace_id().to_bytes());
        self.bytes(2, &context.span_id().to_bytes());
        if context.trace_state() != &TraceState::NONE {
            self.string(3, &context.trace_state().header());
        }
    }

    fn span(&mut self, span: &SpanData) {
        self.ids(&span.span_context);
        if span.parent_span_id != SpanId::INVALID {
            self.bytes(4, &span.parent_span_id.to_bytes());
        }
        self.string(5, &span.name);
        self.uint(6, kind(&span.span_kind));
        self.fixed64(7, nanos(span.start_time));
        self.fixed64(8, nanos(span.end_time));
        for kv in &span.attributes {
            self.key_value(9, kv.key.as_str(), &kv.value);
        }
        self.uint(10, u64::from(span.dropped_attributes_count));
        for event in span.events.iter() {
            self.message(11, |w| {
                w.fixed64(1, nanos(event.timestamp));
                w.string(2, &event.name);
                for kv in &event.attributes {
                    w.key_value(3, kv.key.as_str(), &kv.value);
                }
                w.uint(4, u64::from(event.dropped_attributes_count));
            });
        }
        self.uint(12, u64::from(span.events.dropped_count));
        for link in span.links.iter() {
            self.message(13, |w| {
                w.ids(&link.span_context);
                for kv in &link.attributes {
                    w.key_value(4, kv.key.as_str(), &kv.value);
                }
                w.uint(5, u64::from(link.dropped_attributes_count));
                w.fixed32(6, flags(&link.span_context, link.span_context.is_remote()));
            });
        }
        self.uint(14, u64::from(span.links.dropped_count));
        self.message(15, |w| match &span.status {
            Status::Unset => {}
            Status::Ok => w.uint(3, 1),
            Status::Error { description } => {
                w.string(2, description);
                w.uint(3, 2);
            }
        });
        self.fixed32(16, flags(&span.span_context, span.parent_span_is_remote));
    }
}

/// `SpanFlags`: the trace flags, and whether the parent is known to be remote (and is).
fn flags(context: &SpanContext, remote: bool) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    u32::from(context.trace_flags().to_u8()) | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 }
}

fn kind(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::Duration;

    use opentelemetry::trace::{
        Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
    use prost::Message as _;

    use super::*;

    fn context(trace: u128, span: u64, state: &str, remote: bool) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            state.parse::<TraceState>().unwrap_or_default(),
        )
    }

    fn span(n: u64, scope: &InstrumentationScope) -> SpanData {
        let start = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789 + n);
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "agency.hop",
            start + Duration::from_millis(2),
            vec![
                KeyValue::new("agency.hop.from", "user"),
                KeyValue::new("agency.hop.kind", ""),
            ],
            1,
        ));
        events.dropped_count = 2;
        let mut links = SpanLinks::default();
        if n.is_multiple_of(2) {
            links.links.push(Link::new(
                context(7, 8, "k=v", true),
                vec![KeyValue::new("l", 1)],
                0,
            ));
        }
        SpanData {
            span_context: context(
                0xabc + u128::from(n),
                0x10 + n,
                if n == 1 { "a=1,b=2" } else { "" },
                false,
            ),
            parent_span_id: if n == 0 {
                SpanId::INVALID
            } else {
                SpanId::from(n)
            },
            parent_span_is_remote: n == 2,
            span_kind: [SpanKind::Server, SpanKind::Client, SpanKind::Internal][n as usize % 3]
                .clone(),
            name: Cow::Owned(format!("chat m{n} — ü")),
            start_time: start,
            end_time: start + Duration::from_millis(300 + n),
            attributes: vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.usage.input_tokens", 1234_i64),
                KeyValue::new("negative", -5_i64),
                KeyValue::new("zero", 0_i64),
                KeyValue::new("gen_ai.request.temperature", 0.25),
                KeyValue::new("flag", false),
                KeyValue::new("empty", ""),
                KeyValue::new("long", "x".repeat(300)),
                KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    Value::Array(Array::String(vec![StringValue::from("stop")])),
                ),
                KeyValue::new("ints", Value::Array(Array::I64(vec![1, -2, 0]))),
                KeyValue::new("floats", Value::Array(Array::F64(vec![0.5, 0.0]))),
                KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
            ],
            dropped_attributes_count: n as u32,
            events,
            links,
            status: [
                Status::Unset,
                Status::Ok,
                Status::error("model answered 500"),
            ][n as usize % 3]
                .clone(),
            instrumentation_scope: scope.clone(),
        }
    }

    /// What we send decodes (with the generated OTLP types) into exactly what the SDK's own
    /// exporter would have sent.
    #[test]
    fn the_request_is_the_one_the_sdk_would_send() {
        let agency = InstrumentationScope::builder("agency").build();
        let other = InstrumentationScope::builder("other")
            .with_version("1.2")
            .with_schema_url("https://opentelemetry.io/schemas/1.36.0")
            .with_attributes([KeyValue::new("s", "t")])
            .build();
        let spans: Vec<SpanData> = (0..6)
            .map(|n| span(n, if n == 4 { &other } else { &agency }))
            .collect();
        let resource = Resource::builder_empty()
            .with_service_name("agency")
            .with_attribute(KeyValue::new("deployment.environment", "test"))
            .with_schema_url([], "https://opentelemetry.io/schemas/1.36.0")
            .build();

        let mut exporter = HttpProtobuf::new("http://127.0.0.1:9/v1/traces".into()).unwrap();
        exporter.set_resource(&resource);
        let mut ours = Vec::new();
        encode_request(
            &mut ours,
            &exporter.resource,
            &exporter.resource_schema,
            &spans,
        );
        let ours = ExportTraceServiceRequest::decode(ours.as_slice()).unwrap();

        let sdk = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans,
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        // The resource's attributes come from a map: compare them in one order.
        let sorted = |mut r: ExportTraceServiceRequest| {
            for rs in &mut r.resource_spans {
                if let Some(res) = &mut rs.resource {
                    res.attributes.sort_by(|a, b| a.key.cmp(&b.key));
                }
            }
            r
        };
        assert_eq!(sorted(ours), sorted(sdk));
    }

    #[test]
    fn a_long_message_keeps_its_length_prefix_right() {
        // Prefixes of one, two and three bytes.
        for len in [5_usize, 127, 128, 300, 20_000] {
            let mut out = Vec::new();
            Writer(&mut out).message(1, |w| w.string(1, &"y".repeat(len)));
            let mut rest = &out[1..];
            let n = prost::encoding::decode_varint(&mut rest).unwrap();
            assert_eq!(n as usize, rest.len());
            let inner = opentelemetry_proto::tonic::common::v1::KeyValue::decode(rest).unwrap();
            assert_eq!(inner.key.len(), len);
        }
    }

    #[test]
    fn headers_and_addresses_read_as_the_specification_says() {
        let headers = parse_headers("api-key=secret%20one, x-team = blue ,bad header=1,empty=");
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("api-key".to_string(), "secret one".to_string()),
                ("x-team".to_string(), "blue".to_string())
            ]
        );
        assert_eq!(percent_decode("a%2Cb%zz%4"), b"a,b%zz%4");
        assert_eq!(
            traces_url(Some("http://127.0.0.1:6006/")),
            "http://127.0.0.1:6006/v1/traces"
        );
    }
}
