//! Flow runs as OpenTelemetry traces.
//!
//! [`spans`] turns a run's trace events into spans (pure: the same events
//! give the same spans, ids included); [`export`] sends them over OTLP
//! (HTTP/protobuf). [`OtlpConfig::from_env`] reads where to, from
//! `flow run --otlp URL` or the standard variables; without either,
//! nothing is exported. Only [`export`] and [`OtlpConfig::from_env`] do
//! I/O; [`spans`] is pure.

pub mod export;
pub mod metrics;
pub mod spans;

pub use export::{Exporter, Report};
pub use spans::{Mapper, Span};

use std::time::Duration;

/// Where and how spans are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The traces endpoint (`…/v1/traces`).
    pub endpoint: String,
    /// The metrics endpoint (`…/v1/metrics`).
    pub metrics_endpoint: String,
    /// Whether metrics are exported (`OTEL_METRICS_EXPORTER=none`: no).
    pub metrics: bool,
    /// Whether chat spans carry the model's reply
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub capture_content: bool,
    /// `service.name` when `OTEL_SERVICE_NAME` is not set.
    pub service_name: String,
    /// Per request.
    pub timeout: Duration,
}

/// The traces endpoint of an OTLP base URL (`http://host:4318` →
/// `http://host:4318/v1/traces`); a URL that already names it is kept.
pub fn traces_endpoint(base: &str) -> String {
    signal_endpoint(base, "traces")
}

/// A signal's endpoint (`traces`, `metrics`) from a base URL, or from
/// another signal's endpoint.
pub fn signal_endpoint(base: &str, signal: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = ["/v1/traces", "/v1/metrics"].iter().find_map(|s| base.strip_suffix(s)).unwrap_or(base);
    format!("{base}/v1/{signal}")
}

impl OtlpConfig {
    /// The export `--otlp URL` asks for, else the one the standard
    /// variables configure (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, taken as
    /// it is, or `OTEL_EXPORTER_OTLP_ENDPOINT`, to which `/v1/traces` is
    /// added), else none. `OTEL_SDK_DISABLED=true` turns it off;
    /// `OTEL_EXPORTER_OTLP_HEADERS` adds headers; a protocol other than
    /// `http/protobuf` is refused; `OTEL_METRICS_EXPORTER=none` keeps the
    /// metrics (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, else beside the
    /// traces) at home.
    #[allow(clippy::disallowed_methods)] // the standard variables configure it
    pub fn from_env(url: Option<&str>) -> Result<Option<OtlpConfig>, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let base = var("OTEL_EXPORTER_OTLP_ENDPOINT");
        let endpoint = match (url, var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), &base) {
            (Some(url), _, _) => traces_endpoint(url),
            (None, Some(traces), _) => traces,
            (None, None, Some(base)) => traces_endpoint(base),
            (None, None, None) => return Ok(None),
        };
        let metrics_endpoint = match (url, var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"), base) {
            (None, Some(metrics), _) => metrics,
            (None, None, Some(base)) => signal_endpoint(&base, "metrics"),
            _ => signal_endpoint(&endpoint, "metrics"),
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(format!("the OTLP endpoint `{endpoint}` is not an http:// or https:// URL"));
        }
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol.filter(|p| p != "http/protobuf") {
            return Err(format!("OTLP over `{protocol}` is not supported: flow exports http/protobuf (unset OTEL_EXPORTER_OTLP_PROTOCOL)"));
        }
        let timeout =
            var("OTEL_EXPORTER_OTLP_TIMEOUT").and_then(|ms| ms.parse().ok()).map_or(Duration::from_secs(10), Duration::from_millis);
        let metrics = var("OTEL_METRICS_EXPORTER").is_none_or(|e| e != "none");
        let capture_content = var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Ok(Some(OtlpConfig { endpoint, metrics_endpoint, metrics, capture_content, service_name: "flow".into(), timeout }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_name_the_traces_path_once() {
        assert_eq!(traces_endpoint("http://127.0.0.1:6006"), "http://127.0.0.1:6006/v1/traces");
        assert_eq!(traces_endpoint("http://127.0.0.1:6006/"), "http://127.0.0.1:6006/v1/traces");
        assert_eq!(traces_endpoint("http://h/v1/traces"), "http://h/v1/traces");
        assert_eq!(signal_endpoint("http://h/v1/traces", "metrics"), "http://h/v1/metrics");
    }
}
