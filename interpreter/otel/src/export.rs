//! Spans sent over OTLP (HTTP/protobuf) with the `opentelemetry-otlp`
//! exporter, through the runtime's HTTP client. Sending never blocks a
//! run: spans wait in a bounded queue for a background task, a full queue
//! drops them (counted), and a receiver that fails is reported once.

use crate::metrics::Metrics;
use crate::spans::{Attr, Kind, Span};
use crate::OtlpConfig;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Spans that may wait to be sent; past it they are dropped.
pub const QUEUE: usize = 4096;

/// Spans sent in one request at most.
const BATCH: usize = 512;

/// opentelemetry-http's client over the runtime's reqwest.
#[derive(Debug, Clone)]
pub(crate) struct Client(pub(crate) reqwest::Client);

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let mut send = self.0.request(parts.method, parts.uri.to_string()).body(body);
        for (name, value) in &parts.headers {
            send = send.header(name.as_str(), value.as_bytes());
        }
        let response = send.send().await?;
        let mut out = http::Response::builder().status(response.status().as_u16());
        for (name, value) in response.headers() {
            out = out.header(name.as_str(), value.as_bytes());
        }
        let body = response.bytes().await?;
        Ok(out.body(body)?)
    }
}

/// What an export did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub exported: u64,
    /// Spans dropped: the queue was full, or the receiver failed.
    pub dropped: u64,
    /// The first failure, if any.
    pub error: Option<String>,
    /// Why the metrics were not sent (a receiver may take traces only).
    pub metrics_error: Option<String>,
}

/// A running export: spans go in with [`Exporter::send`], [`Exporter::finish`] waits for them.
pub struct Exporter {
    queue: mpsc::Sender<Span>,
    dropped: Arc<AtomicU64>,
    task: JoinHandle<Report>,
    metrics: Option<Metrics>,
    warn: Warn,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("dropped", &self.dropped).field("metrics", &self.metrics).finish()
    }
}

/// Says once that the receiver failed.
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

impl Exporter {
    /// Starts exporting to `config`'s endpoint on the current tokio runtime.
    #[allow(clippy::disallowed_methods)] // `OTEL_SERVICE_NAME` wins over the default name
    pub fn start(config: &OtlpConfig, warn: Warn) -> Result<Exporter, String> {
        use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
        let client = reqwest::Client::builder().timeout(config.timeout).build().map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Client(client.clone()))
            .with_endpoint(config.endpoint.clone())
            .with_timeout(config.timeout)
            .build()
            .map_err(|e| format!("cannot export to {}: {e}", config.endpoint))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(config.service_name.clone());
        }
        let resource = resource.build();
        exporter.set_resource(&resource);
        let metrics = if config.metrics { Some(Metrics::new(config, client, resource)?) } else { None };
        let (queue, mut inbox) = mpsc::channel::<Span>(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let endpoint = config.endpoint.clone();
        let counted = dropped.clone();
        let warned = warn.clone();
        let task = tokio::spawn(async move {
            let mut report = Report::default();
            let mut batch = Vec::new();
            while let Some(span) = inbox.recv().await {
                batch.push(span);
                while batch.len() < BATCH {
                    match inbox.try_recv() {
                        Ok(span) => batch.push(span),
                        Err(_) => break,
                    }
                }
                let n = batch.len() as u64;
                let data: Vec<SpanData> = batch.drain(..).map(span_data).collect();
                match exporter.export(data).await {
                    Ok(()) => report.exported += n,
                    Err(e) => {
                        counted.fetch_add(n, Ordering::Relaxed);
                        if report.error.is_none() {
                            let message = format!("OTLP export to {endpoint} failed: {e}; its spans are dropped");
                            warned(&message);
                            report.error = Some(message);
                        }
                    }
                }
            }
            report
        });
        Ok(Exporter { queue, dropped, task, metrics, warn })
    }

    /// Queues spans; never waits (a full queue drops them).
    pub fn send(&self, spans: Vec<Span>) {
        for span in spans {
            if self.queue.try_send(span).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Queues spans, waiting for room (a finished run sent afterwards).
    pub async fn send_waiting(&self, spans: Vec<Span>) {
        for span in spans {
            if self.queue.send(span).await.is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Records the metrics `event` measures.
    pub fn record(&self, event: &flow_trace::Event) {
        if let Some(metrics) = &self.metrics {
            metrics.record(event);
        }
    }

    /// Sends the metrics and what spans are queued, waiting at most `wait`.
    pub async fn finish(self, wait: Duration) -> Report {
        let Exporter { queue, dropped, task, metrics, warn } = self;
        let metrics_error = match &metrics {
            None => None,
            Some(metrics) => match tokio::time::timeout(wait, metrics.export()).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(format!("the metrics were not sent within {} s", wait.as_secs())),
            },
        };
        drop(queue);
        let mut report = match tokio::time::timeout(wait, task).await {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => Report { error: Some(format!("the OTLP export task failed: {e}")), ..Report::default() },
            Err(_) => Report { error: Some(format!("the OTLP export did not finish within {} s", wait.as_secs())), ..Report::default() },
        };
        report.dropped += dropped.load(Ordering::Relaxed);
        if let Some(e) = &metrics_error {
            warn(e);
        }
        report.metrics_error = metrics_error;
        report
    }
}

fn time(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn key_value(key: &'static str, value: Attr) -> KeyValue {
    match value {
        Attr::Str(s) => KeyValue::new(key, s),
        Attr::Int(n) => KeyValue::new(key, n),
        Attr::Float(n) => KeyValue::new(key, n),
        Attr::Bool(b) => KeyValue::new(key, b),
        Attr::Strs(list) => KeyValue::new(
            key,
            opentelemetry::Value::Array(list.into_iter().map(Into::into).collect::<Vec<opentelemetry::StringValue>>().into()),
        ),
    }
}

/// A span as the SDK exports it.
pub fn span_data(span: Span) -> SpanData {
    let context = SpanContext::new(
        TraceId::from_bytes(span.trace_id),
        SpanId::from_bytes(span.id),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let mut events = SpanEvents::default();
    events.events = span
        .events
        .into_iter()
        .map(|e| {
            opentelemetry::trace::Event::new(e.name, time(e.time_ms), e.attributes.into_iter().map(|(k, v)| key_value(k, v)).collect(), 0)
        })
        .collect();
    SpanData {
        span_context: context,
        parent_span_id: span.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: false,
        span_kind: match span.kind {
            Kind::Internal => SpanKind::Internal,
            Kind::Client => SpanKind::Client,
        },
        name: span.name.into(),
        start_time: time(span.start_ms),
        end_time: time(span.end_ms.max(span.start_ms)),
        attributes: span.attributes.into_iter().map(|(k, v)| key_value(k, v)).collect(),
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: match span.error {
            Some(message) => Status::error(message),
            None => Status::Ok,
        },
        instrumentation_scope: InstrumentationScope::builder("flow").with_version(env!("CARGO_PKG_VERSION")).build(),
    }
}
