//! The server's instruments, made once from the global meter provider (which [`crate::init`]
//! sets before anything records; without it they record nothing, at almost no cost). Call sites
//! name what happened (`metrics().turn(..)`), not instruments and attributes.
//!
//! Label sets are bounded: no conversation, turn, key or request ids; agency, agent, model and
//! tool names are the accounts' own, and the SDK keeps at most 2,000 label sets a metric (more
//! go to one set marked `otel_metric_overflow="true"`), so a hostile account cannot grow memory.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};

use crate::semconv as sc;

/// The GenAI conventions' buckets for token counts.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// The GenAI conventions' buckets for durations of model calls (seconds).
const CALL_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// HTTP's (the HTTP conventions' advice), for requests and commits (seconds).
const HTTP_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
const COMMIT_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
const GROUP_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

pub struct Metrics {
    tokens: Histogram<u64>,
    operation: Histogram<f64>,
    first_token: Histogram<f64>,
    http: Histogram<f64>,
    turns: Counter<u64>,
    hops: Counter<u64>,
    tool: Histogram<f64>,
    retries: Counter<u64>,
    errors: Counter<u64>,
    cost: Counter<f64>,
    sse: UpDownCounter<i64>,
    mqtt: Counter<u64>,
    commit: Histogram<f64>,
    commit_size: Histogram<u64>,
    dropped: Counter<u64>,
}

/// Whether a meter provider records what the instruments are given ([`crate::init`] sets one
/// for Prometheus or OTLP). Without one the instruments are no-ops, and their call sites skip
/// making the labels (strings each): most of what a request paid for metrics that went nowhere.
static ON: AtomicBool = AtomicBool::new(false);

pub(crate) fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether metrics are recorded (a Prometheus listener or an OTLP exporter is set up).
pub fn metrics_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The process's instruments.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> =
        LazyLock::new(|| Metrics::new(&opentelemetry::global::meter("agency")));
    &METRICS
}

/// A model call, as [`Metrics::model_call`] records it.
pub struct ModelCall<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub agency: &'a str,
    pub agent: &'a str,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub seconds: f64,
    /// What went wrong, when it did (`error.type`).
    pub error: Option<&'a str>,
}

impl Metrics {
    fn new(m: &Meter) -> Self {
        Self {
            tokens: m
                .u64_histogram(sc::METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens of each model call, by type (input, output).")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation: m
                .f64_histogram(sc::METRIC_OPERATION_DURATION)
                .with_unit("s")
                .with_description("How long each model call took.")
                .with_boundaries(CALL_BUCKETS.to_vec())
                .build(),
            first_token: m
                .f64_histogram(sc::METRIC_TIME_TO_FIRST_TOKEN)
                .with_unit("s")
                .with_description("From a streamed request to the first token of its answer.")
                .with_boundaries(CALL_BUCKETS.to_vec())
                .build(),
            http: m
                .f64_histogram(sc::METRIC_HTTP_DURATION)
                .with_unit("s")
                .with_description("HTTP requests, by route and status, and how long they took.")
                .with_boundaries(HTTP_BUCKETS.to_vec())
                .build(),
            turns: m
                .u64_counter(sc::METRIC_TURNS)
                .with_description("Turns that ended, by agency and why they stopped.")
                .build(),
            hops: m
                .u64_counter(sc::METRIC_HOPS)
                .with_description("Messages routed within turns, by agency and kind.")
                .build(),
            tool: m
                .f64_histogram(sc::METRIC_TOOL_DURATION)
                .with_unit("s")
                .with_description("Tool calls, by tool and outcome, and how long they took.")
                .with_boundaries(CALL_BUCKETS.to_vec())
                .build(),
            retries: m
                .u64_counter(sc::METRIC_RETRIES)
                .with_description("Provider calls retried, by provider and reason.")
                .build(),
            errors: m
                .u64_counter(sc::METRIC_ERRORS)
                .with_description("Model calls that failed, by provider and error type.")
                .build(),
            cost: m
                .f64_counter(sc::METRIC_COST)
                .with_description("What model calls cost, in dollars, by agency and model.")
                .build(),
            sse: m
                .i64_up_down_counter(sc::METRIC_SSE_STREAMS)
                .with_description("Server-sent event streams open now.")
                .build(),
            mqtt: m
                .u64_counter(sc::METRIC_MQTT_MESSAGES)
                .with_description("MQTT messages received (in) and published (out).")
                .build(),
            commit: m
                .f64_histogram(sc::METRIC_COMMIT_DURATION)
                .with_unit("s")
                .with_description("How long each store commit took.")
                .with_boundaries(COMMIT_BUCKETS.to_vec())
                .build(),
            commit_size: m
                .u64_histogram(sc::METRIC_COMMIT_SIZE)
                .with_unit("{write}")
                .with_description("Writes committed together (group commit).")
                .with_boundaries(GROUP_BUCKETS.to_vec())
                .build(),
            dropped: m
                .u64_counter(sc::METRIC_SPANS_DROPPED)
                .with_unit("{span}")
                .with_description("Spans not exported: the queue was full, or the export failed.")
                .build(),
        }
    }

    pub fn model_call(&self, c: &ModelCall<'_>) {
        if !metrics_on() {
            return;
        }
        let mut labels = vec![
            KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::OP_CHAT),
            KeyValue::new(sc::GEN_AI_PROVIDER_NAME, c.provider.to_string()),
            KeyValue::new(sc::GEN_AI_REQUEST_MODEL, c.model.to_string()),
            KeyValue::new(sc::AGENCY_NAME, c.agency.to_string()),
            KeyValue::new(sc::GEN_AI_AGENT_NAME, c.agent.to_string()),
        ];
        if let Some(error) = c.error {
            labels.push(KeyValue::new(sc::ERROR_TYPE, error.to_string()));
            self.operation.record(c.seconds, &labels);
            self.errors.add(
                1,
                &[
                    KeyValue::new(sc::GEN_AI_PROVIDER_NAME, c.provider.to_string()),
                    KeyValue::new(sc::ERROR_TYPE, error.to_string()),
                ],
            );
            return;
        }
        self.operation.record(c.seconds, &labels);
        labels.push(KeyValue::new(sc::GEN_AI_TOKEN_TYPE, "input"));
        self.tokens.record(c.input_tokens, &labels);
        if let Some(last) = labels.last_mut() {
            *last = KeyValue::new(sc::GEN_AI_TOKEN_TYPE, "output");
        }
        self.tokens.record(c.output_tokens, &labels);
    }

    /// What a model call cost, in dollars.
    pub fn cost(&self, agency: &str, model: &str, dollars: f64) {
        if !metrics_on() {
            return;
        }
        self.cost.add(
            dollars,
            &[
                KeyValue::new(sc::AGENCY_NAME, agency.to_string()),
                KeyValue::new(sc::AGENCY_MODEL, model.to_string()),
            ],
        );
    }

    pub fn turn(&self, agency: &str, stopped_by: &'static str) {
        if !metrics_on() {
            return;
        }
        self.turns.add(
            1,
            &[
                KeyValue::new(sc::AGENCY_NAME, agency.to_string()),
                KeyValue::new(sc::AGENCY_TURN_STOPPED_BY, stopped_by),
            ],
        );
    }

    pub fn hop(&self, agency: &str, kind: &'static str) {
        if !metrics_on() {
            return;
        }
        self.hops.add(
            1,
            &[
                KeyValue::new(sc::AGENCY_NAME, agency.to_string()),
                KeyValue::new(sc::AGENCY_HOP_KIND, kind),
            ],
        );
    }

    pub fn tool_call(&self, tool: &str, ok: bool, seconds: f64) {
        if !metrics_on() {
            return;
        }
        self.tool.record(
            seconds,
            &[
                KeyValue::new(sc::GEN_AI_TOOL_NAME, tool.to_string()),
                KeyValue::new(sc::AGENCY_TOOL_OUTCOME, if ok { "ok" } else { "error" }),
            ],
        );
    }

    pub fn retry(&self, provider: &str, reason: &str) {
        if !metrics_on() {
            return;
        }
        self.retries.add(
            1,
            &[
                KeyValue::new(sc::GEN_AI_PROVIDER_NAME, provider.to_string()),
                KeyValue::new(sc::AGENCY_RETRY_REASON, reason.to_string()),
            ],
        );
    }

    pub fn first_token(&self, agency: &str, seconds: f64) {
        if !metrics_on() {
            return;
        }
        self.first_token.record(
            seconds,
            &[KeyValue::new(sc::AGENCY_NAME, agency.to_string())],
        );
    }

    /// An HTTP request answered; `route` is the matched route's pattern (`/v1/chat/completions`,
    /// `/api/agencies/{agency}`), never the path as sent.
    pub fn http(&self, method: &str, route: &str, status: u16, seconds: f64) {
        if !metrics_on() {
            return;
        }
        self.http.record(
            seconds,
            &[
                KeyValue::new(sc::HTTP_REQUEST_METHOD, method.to_string()),
                KeyValue::new(sc::HTTP_ROUTE, route.to_string()),
                KeyValue::new(sc::HTTP_RESPONSE_STATUS_CODE, i64::from(status)),
            ],
        );
    }

    /// An event stream opened; it counts as open until the guard is dropped.
    pub fn sse_stream(&'static self) -> SseStream {
        self.sse.add(1, &[]);
        SseStream(self)
    }

    /// `inbound`: received from the broker; else published.
    pub fn mqtt(&self, inbound: bool) {
        if !metrics_on() {
            return;
        }
        let direction = if inbound { "in" } else { "out" };
        self.mqtt
            .add(1, &[KeyValue::new(sc::AGENCY_MQTT_DIRECTION, direction)]);
    }

    /// A commit of `writes` writes on `backend` (`sqlite`, `postgres`).
    pub fn commit(&self, backend: &'static str, writes: usize, seconds: f64) {
        if !metrics_on() {
            return;
        }
        let labels = [KeyValue::new(sc::AGENCY_STORE_BACKEND, backend)];
        self.commit.record(seconds, &labels);
        self.commit_size
            .record(u64::try_from(writes).unwrap_or(u64::MAX), &labels);
    }

    pub(crate) fn spans_dropped(&self, reason: &'static str, count: usize) {
        if !metrics_on() {
            return;
        }
        self.dropped.add(
            u64::try_from(count).unwrap_or(u64::MAX),
            &[KeyValue::new(sc::AGENCY_DROP_REASON, reason)],
        );
    }
}

/// An open event stream (see [`Metrics::sse_stream`]).
pub struct SseStream(&'static Metrics);

impl Drop for SseStream {
    fn drop(&mut self) {
        self.0.sse.add(-1, &[]);
    }
}

/// Reports `count()` as the `agency.sessions` gauge (conversations held in memory) at every
/// collection, for as long as the process lives.
pub fn observe_sessions(count: impl Fn() -> u64 + Send + Sync + 'static) {
    // The callback lives as long as the meter provider; the handle is not needed.
    let _gauge = opentelemetry::global::meter("agency")
        .u64_observable_gauge(sc::METRIC_SESSIONS)
        .with_description("Conversations whose sessions are held in memory.")
        .with_callback(move |o| o.observe(count(), &[]))
        .build();
}
