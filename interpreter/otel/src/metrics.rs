//! A run's metrics, recorded from its events and exported over OTLP when
//! the run stops (cumulative, one export per `flow` process):
//!
//! - `gen_ai.client.token.usage` (histogram, `{token}`): per model turn,
//!   its input and its output tokens (`gen_ai.token.type`), by operation,
//!   provider and model;
//! - `gen_ai.client.operation.duration` (histogram, `s`): model turns
//!   (`chat`) and tool calls (`execute_tool`);
//! - `flow.runs` (runs ended, by workflow and status), `flow.gate.outcomes`
//!   (by gate and outcome), `flow.budget.zone_entries` (by scope and zone)
//!   and `flow.retries` (attempts after the first, by node).

use crate::OtlpConfig;
use flow_trace::{Body, Event};
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter as _;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality};
use opentelemetry_sdk::Resource;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The provider's reader, kept to collect from it when the run stops.
#[derive(Debug, Clone)]
struct Reader(Arc<ManualReader>);

impl MetricReader for Reader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// The instruments of one run.
#[derive(Debug)]
pub struct Metrics {
    _provider: SdkMeterProvider,
    reader: Reader,
    exporter: opentelemetry_otlp::MetricExporter,
    endpoint: String,
    token_usage: Histogram<u64>,
    duration: Histogram<f64>,
    runs: Counter<u64>,
    gates: Counter<u64>,
    zones: Counter<u64>,
    retries: Counter<u64>,
    workflow: Mutex<String>,
}

impl Metrics {
    pub fn new(config: &OtlpConfig, client: reqwest::Client, resource: Resource) -> Result<Metrics, String> {
        use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(crate::export::Client(client))
            .with_endpoint(config.metrics_endpoint.clone())
            .with_timeout(config.timeout)
            .build()
            .map_err(|e| format!("cannot export metrics to {}: {e}", config.metrics_endpoint))?;
        let reader = Reader(Arc::new(ManualReader::builder().build()));
        let provider = SdkMeterProvider::builder().with_reader(reader.clone()).with_resource(resource).build();
        let meter = provider.meter("flow");
        Ok(Metrics {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used per model turn")
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of model turns and tool calls")
                .build(),
            runs: meter.u64_counter("flow.runs").with_description("Runs ended, by status").build(),
            gates: meter.u64_counter("flow.gate.outcomes").with_description("Gate outcomes").build(),
            zones: meter.u64_counter("flow.budget.zone_entries").with_description("Budget zones entered").build(),
            retries: meter.u64_counter("flow.retries").with_description("Attempts after the first").build(),
            _provider: provider,
            reader,
            exporter,
            endpoint: config.metrics_endpoint.clone(),
            workflow: Mutex::new(String::new()),
        })
    }

    /// Records what `event` measures.
    pub fn record(&self, event: &Event) {
        let kv = |k: &'static str, v: &str| KeyValue::new(k, v.to_string());
        match &event.body {
            Body::RunStarted { workflow, .. } => *self.workflow.lock().unwrap_or_else(|p| p.into_inner()) = workflow.clone(),
            Body::RunTerminated { status, .. } => {
                let workflow = self.workflow.lock().unwrap_or_else(|p| p.into_inner()).clone();
                self.runs.add(1, &[kv("flow.workflow", &workflow), kv("flow.status", &status.to_string())]);
            }
            Body::AgentTurn { provider, model, usage, input_tokens, output_tokens, .. } => {
                let model = model.as_deref().unwrap_or(provider);
                let base = [kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", provider), kv("gen_ai.request.model", model)];
                for (kind, tokens) in [("input", input_tokens), ("output", output_tokens)] {
                    if let Some(tokens) = tokens {
                        let mut attrs = base.to_vec();
                        attrs.push(kv("gen_ai.token.type", kind));
                        self.token_usage.record(*tokens, &attrs);
                    }
                }
                self.duration.record(usage.duration_ms as f64 / 1000.0, &base);
            }
            Body::ToolCallCompleted { tool, duration_ms, .. } => {
                self.duration
                    .record(*duration_ms as f64 / 1000.0, &[kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", tool)]);
            }
            Body::GateRecorded { gate, outcome, .. } => {
                self.gates.add(1, &[kv("flow.gate", gate), kv("flow.gate.outcome", &outcome.to_string())])
            }
            Body::BudgetZoneChanged { scope, to, .. } => {
                self.zones.add(1, &[kv("flow.budget.scope", scope), kv("flow.budget.zone", &to.to_string())])
            }
            Body::AttemptStarted { node, attempt_no, .. } if *attempt_no > 1 => self.retries.add(1, &[kv("flow.node", node)]),
            _ => {}
        }
    }

    /// Sends what was recorded so far.
    pub async fn export(&self) -> Result<(), String> {
        let mut collected = ResourceMetrics::default();
        self.reader.collect(&mut collected).map_err(|e| format!("cannot collect the metrics: {e}"))?;
        self.exporter.export(&collected).await.map_err(|e| format!("OTLP export of metrics to {} failed: {e}", self.endpoint))
    }
}
