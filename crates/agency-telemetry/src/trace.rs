//! Spans of traces, made with OpenTelemetry's own API and carried by its context, which is
//! attached while the future a span covers is polled ([`Span::run`]). They are not `tracing`
//! spans: as those, every poll of every instrumented future (about 17 a request on the OpenAI
//! endpoint) went through `tracing`'s registry, its per-layer filters and
//! `tracing-opentelemetry`, and tracing cost 1.13x the instructions of a request; carried by
//! the context, 1.07x (`docs/benchmarks.md#telemetry`). `tracing` spans are what logs use.

use std::borrow::Cow;
use std::future::Future;
use std::sync::OnceLock;

use futures::future::Either;
use opentelemetry::trace::{FutureExt as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use crate::semconv;

static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Spans are made from here on (once per process, by [`crate::init`]).
pub(crate) fn install(tracer: SdkTracer) {
    let _ = TRACER.set(tracer);
}

pub(crate) fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// A span of a trace, or none (tracing is off). Clones are the same span; it ends when the
/// last of them is dropped.
#[derive(Clone, Debug, Default)]
pub struct Span(Option<Context>);

impl Span {
    pub fn none() -> Self {
        Self(None)
    }

    /// The span the polled future runs in, if any.
    pub fn current() -> Self {
        if tracer().is_none() {
            return Self::none();
        }
        let cx = Context::current();
        if cx.has_active_span() {
            Self(Some(cx))
        } else {
            Self::none()
        }
    }

    /// A new span under `parent` (a context: the current one, or a caller's). `span` gives its
    /// name and attributes; it is not called when tracing is off.
    pub fn start_in<N>(
        parent: &Context,
        kind: SpanKind,
        span: impl FnOnce() -> (N, Vec<KeyValue>),
    ) -> Self
    where
        N: Into<Cow<'static, str>>,
    {
        let Some(tracer) = tracer() else {
            return Self::none();
        };
        let (name, attributes) = span();
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Self(Some(parent.with_span(span)))
    }

    /// A new span under the current one.
    pub fn start<N>(kind: SpanKind, span: impl FnOnce() -> (N, Vec<KeyValue>)) -> Self
    where
        N: Into<Cow<'static, str>>,
    {
        if tracer().is_none() {
            return Self::none();
        }
        Self::start_in(&Context::current(), kind, span)
    }

    /// A new span under this one (under the current one when this is none).
    pub fn child<N>(&self, kind: SpanKind, span: impl FnOnce() -> (N, Vec<KeyValue>)) -> Self
    where
        N: Into<Cow<'static, str>>,
    {
        match &self.0 {
            Some(cx) => Self::start_in(cx, kind, span),
            None => Self::start(kind, span),
        }
    }

    /// `future`, polled in this span: spans made while it runs are its children, and calls it
    /// makes carry its trace context.
    pub fn run<F: Future>(&self, future: F) -> impl Future<Output = F::Output> + use<F> {
        match &self.0 {
            Some(cx) => Either::Left(future.with_context(cx.clone())),
            None => Either::Right(future),
        }
    }

    /// Adds attributes (`attributes` is not called when this is none).
    pub fn set_attributes<I>(&self, attributes: impl FnOnce() -> I)
    where
        I: IntoIterator<Item = KeyValue>,
    {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes());
        }
    }

    /// An event (a hop, a retry).
    pub fn add_event<I>(&self, name: &'static str, attributes: impl FnOnce() -> I)
    where
        I: IntoIterator<Item = KeyValue>,
    {
        if let Some(cx) = &self.0 {
            cx.span()
                .add_event(name, attributes().into_iter().collect());
        }
    }

    /// Marks the span failed with `error.type` (and the message as the status description).
    pub fn set_error(&self, error_type: &str, message: &str) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new(semconv::ERROR_TYPE, error_type.to_string()));
            span.set_status(Status::error(message.to_string()));
        }
    }

    /// Marks the span failed, without a description.
    pub fn set_failed(&self) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(""));
        }
    }
}
