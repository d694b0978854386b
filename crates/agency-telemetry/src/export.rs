//! Export that never slows a turn: spans wait in a bounded queue and leave in batches on the
//! SDK's own thread; a span that finds the queue full, or whose batch the backend refused or
//! never answered, is dropped and counted (`agency.telemetry.spans.dropped`, by reason).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor,
};

use crate::metrics::metrics;

/// Spans waiting for export at most: past it, new ones are dropped.
pub const QUEUE: usize = 4096;

/// The SDK's batch processor behind our own bound, so that every drop is seen and counted
/// (the SDK's own queue is made twice as large, and never fills).
#[derive(Debug)]
pub(crate) struct Bounded {
    inner: BatchSpanProcessor,
    waiting: Arc<AtomicUsize>,
}

impl Bounded {
    pub(crate) fn new<E: SpanExporter + 'static>(exporter: E) -> Self {
        let waiting = Arc::new(AtomicUsize::new(0));
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(QUEUE * 2)
            .with_max_export_batch_size(512)
            .with_scheduled_delay(Duration::from_secs(1))
            .build();
        let exporter = Counted {
            inner: exporter,
            waiting: waiting.clone(),
        };
        Self {
            inner: BatchSpanProcessor::new(exporter, config),
            waiting,
        }
    }
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= QUEUE {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            metrics().spans_dropped("queue_full", 1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter, counting what leaves the queue and what the backend did not take.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    waiting: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        self.waiting.fetch_sub(n, Ordering::Relaxed);
        let result = self.inner.export(batch).await;
        if result.is_err() {
            metrics().spans_dropped("export_failed", n);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
