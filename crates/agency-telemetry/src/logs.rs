//! JSON log lines: one object a line, with the event's fields, the fields of the spans it is
//! in (the request's id, its conversation), and the trace and span ids of the span it is in,
//! so a log collector can join a line to its trace.

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

pub(crate) struct JsonLines;

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = Map::new();
        let mut time = String::new();
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut time))?;
        line.insert("timestamp".into(), time.into());
        let meta = event.metadata();
        line.insert("level".into(), meta.level().as_str().into());
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        line.insert("fields".into(), fields.into());
        line.insert("target".into(), meta.target().into());
        let mut spans = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let mut fields = span
                    .extensions()
                    .get::<FormattedFields<N>>()
                    .and_then(|f| serde_json::from_str::<Map<String, Value>>(f).ok())
                    .unwrap_or_default();
                fields.insert("name".into(), span.name().into());
                spans.push(Value::Object(fields));
            }
        }
        if let Some(current) = spans.last() {
            line.insert("span".into(), current.clone());
            line.insert("spans".into(), spans.into());
        }
        // The ids of the trace span the event is in (the future being polled).
        let cx = opentelemetry::Context::current();
        let span = cx.span();
        let sc = span.span_context();
        if sc.is_valid() {
            line.insert("trace_id".into(), sc.trace_id().to_string().into());
            line.insert("span_id".into(), sc.span_id().to_string().into());
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}
