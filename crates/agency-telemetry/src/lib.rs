//! What the server tells operators about itself: traces (OpenTelemetry, under the GenAI
//! semantic conventions, exported over OTLP when the standard `OTEL_*` variables say where),
//! metrics (one set of OpenTelemetry instruments, read as Prometheus text on the operator's
//! metrics listener and pushed over OTLP when configured) and logs (text, or JSON lines with
//! the trace and span ids).
//!
//! [`init`] sets it all up once per process, before anything records. Nothing here slows or
//! fails a turn: spans ([`Span`], OpenTelemetry's own, carried by its context rather than by
//! `tracing`, which logs use) leave in batches from a bounded queue (see [`export`]), and with
//! tracing off they are not even made.

pub mod export;
mod logs;
pub mod metrics;
mod otlp;
pub mod propagate;
pub mod semconv;
mod trace;

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use metrics::{metrics, metrics_on};
pub use opentelemetry::trace::SpanKind;
pub use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
pub use trace::Span;

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans are made (traces are exported, or JSON logs want trace ids).
pub fn tracing_on() -> bool {
    trace::tracer().is_some()
}

/// Whether message content goes into spans
/// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("AGENCY_LOG_FORMAT is `{0}`: it must be `text` or `json`")]
    LogFormat(String),
    #[error("cannot export traces over OTLP: {0}")]
    Traces(String),
    #[error("cannot export metrics over OTLP: {0}")]
    Metrics(String),
    #[error("cannot serve Prometheus metrics: {0}")]
    Prometheus(String),
    #[error("cannot set up logging: {0}")]
    Logs(String),
}

/// What the operator asked for.
pub struct Settings {
    /// The log filter (`AGENCY_LOG`'s syntax).
    pub log_filter: EnvFilter,
    /// JSON lines rather than text.
    pub json_logs: bool,
    /// Prometheus text wanted (`--metrics-listen`).
    pub prometheus: bool,
    /// Read the `OTEL_*` variables (the server does; one-shot commands do not export).
    pub otlp: bool,
    /// Where to send traces and metrics over OTLP (http/protobuf, to `/v1/traces` and
    /// `/v1/metrics` under it), whatever `OTEL_EXPORTER_OTLP_ENDPOINT` says.
    pub otlp_endpoint: Option<String>,
}

impl Settings {
    /// Logs as `AGENCY_LOG_FORMAT` says (`text`, the default, or `json`), filtered by
    /// `AGENCY_LOG` or else `default_filter`.
    pub fn from_env(default_filter: &str) -> Result<Self, TelemetryError> {
        let log_filter =
            EnvFilter::try_from_env("AGENCY_LOG").unwrap_or_else(|_| default_filter.into());
        let json_logs = match std::env::var("AGENCY_LOG_FORMAT").as_deref() {
            Err(_) | Ok("" | "text") => false,
            Ok("json") => true,
            Ok(other) => return Err(TelemetryError::LogFormat(other.to_string())),
        };
        Ok(Self {
            log_filter,
            json_logs,
            prometheus: false,
            otlp: false,
            otlp_endpoint: None,
        })
    }
}

/// The process's telemetry; [`Telemetry::shutdown`] sends what is still queued.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    prometheus: Option<Prometheus>,
}

/// The metrics in Prometheus' text format, as `GET /metrics` answers.
#[derive(Clone)]
pub struct Prometheus(prometheus::Registry);

impl Prometheus {
    pub fn render(&self) -> String {
        use prometheus::Encoder;
        let mut out = Vec::new();
        // Encoding into memory does not fail; a family it cannot encode is left out.
        let _ = prometheus::TextEncoder::new().encode(&self.0.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

fn env_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
}

/// The service's resource: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` when set, else
/// `service.name=agency`.
fn resource() -> opentelemetry_sdk::Resource {
    let builder = opentelemetry_sdk::Resource::builder();
    let named = env_set("OTEL_SERVICE_NAME")
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    if named {
        builder.build()
    } else {
        builder.with_service_name("agency").build()
    }
}

/// Sets up logs, traces and metrics for the process. Call once, inside the Tokio runtime (the
/// gRPC exporter needs it), before anything records.
pub fn init(settings: Settings) -> Result<Telemetry, TelemetryError> {
    let disabled = env_is("OTEL_SDK_DISABLED", "true");
    let endpoint = settings
        .otlp_endpoint
        .as_deref()
        .map(|e| e.trim_end_matches('/'));
    let export_traces = settings.otlp
        && !disabled
        && !env_is("OTEL_TRACES_EXPORTER", "none")
        && (endpoint.is_some()
            || env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"));
    let export_metrics = settings.otlp
        && !disabled
        && !env_is("OTEL_METRICS_EXPORTER", "none")
        && (endpoint.is_some()
            || env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"));
    CAPTURE_CONTENT.store(
        env_is("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        Ordering::Relaxed,
    );

    // Metrics first: the span export counts its drops in them.
    let mut prometheus = None;
    let meter = if settings.prometheus || export_metrics {
        let mut builder = SdkMeterProvider::builder().with_resource(resource());
        if settings.prometheus {
            let registry = prometheus::Registry::new();
            let reader = opentelemetry_prometheus::exporter()
                .with_registry(registry.clone())
                .without_target_info()
                .scope_info_enabled(false)
                .build()
                .map_err(|e| TelemetryError::Prometheus(e.to_string()))?;
            builder = builder.with_reader(reader);
            prometheus = Some(Prometheus(registry));
        }
        if export_metrics {
            let exporter = match endpoint {
                Some(e) => opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_endpoint(format!("{e}/v1/metrics"))
                    .build(),
                None => opentelemetry_otlp::MetricExporter::builder().build(),
            }
            .map_err(|e| TelemetryError::Metrics(e.to_string()))?;
            builder = builder.with_periodic_exporter(exporter);
        }
        let provider = builder.build();
        opentelemetry::global::set_meter_provider(provider.clone());
        metrics::enable();
        Some(provider)
    } else {
        None
    };

    // Spans are made when they are exported, or when JSON logs want their ids.
    let tracer = if export_traces || settings.json_logs {
        let mut builder = SdkTracerProvider::builder().with_resource(resource());
        if export_traces {
            // http/protobuf (the default, and what `--otlp-endpoint` speaks) is encoded by
            // us; gRPC by the SDK's exporter.
            let protocol = otlp::env_for("PROTOCOL");
            builder = if endpoint.is_some() || protocol.is_none_or(|p| p == "http/protobuf") {
                let exporter = otlp::HttpProtobuf::new(otlp::traces_url(endpoint))?;
                builder.with_span_processor(export::Bounded::new(exporter))
            } else {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .build()
                    .map_err(|e| TelemetryError::Traces(e.to_string()))?;
                builder.with_span_processor(export::Bounded::new(exporter))
            };
        }
        let provider = builder.build();
        trace::install(provider.tracer("agency"));
        Some(provider)
    } else {
        None
    };

    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if settings.json_logs {
        fmt.fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(logs::JsonLines)
            .with_filter(settings.log_filter)
            .boxed()
    } else {
        fmt.with_filter(settings.log_filter).boxed()
    };
    tracing_subscriber::registry()
        .with(fmt)
        .try_init()
        .map_err(|e| TelemetryError::Logs(e.to_string()))?;
    Ok(Telemetry {
        tracer,
        meter,
        prometheus,
    })
}

impl Telemetry {
    /// The Prometheus text, when `--metrics-listen` asked for it.
    pub fn prometheus(&self) -> Option<Prometheus> {
        self.prometheus.clone()
    }

    /// Sends what is queued (spans, the last metrics) and stops the exporters. Blocks: call it
    /// off the async workers (`spawn_blocking`).
    pub fn shutdown(&self) {
        if let Some(tracer) = &self.tracer
            && let Err(e) = tracer.shutdown()
        {
            tracing::warn!(error = %e, "traces: the last export failed");
        }
        if let Some(meter) = &self.meter
            && let Err(e) = meter.shutdown()
        {
            tracing::warn!(error = %e, "metrics: the last export failed");
        }
    }
}
