//! `flow run --otlp` and `flow export` against a receiver written here (a
//! thread that takes OTLP/HTTP protobuf requests and decodes them), and
//! against one that is down. The real receiver (Arize Phoenix) is
//! `tests/otel/run.sh`.

mod common;
use common::*;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, Metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A receiver on a free port: every span and metric it was sent, with the paths asked for.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    metrics: Arc<Mutex<Vec<Metric>>>,
    paths: Arc<Mutex<Vec<String>>>,
}

fn receiver() -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let spans = Arc::new(Mutex::new(Vec::new()));
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let paths = Arc::new(Mutex::new(Vec::new()));
    let (keep, measured, seen) = (spans.clone(), metrics.clone(), paths.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
            seen.lock().unwrap().push(path.clone());
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            if path == "/v1/metrics" {
                let request = ExportMetricsServiceRequest::decode(body.as_slice()).expect("an OTLP metrics request");
                for resource in request.resource_metrics {
                    for scope in resource.scope_metrics {
                        measured.lock().unwrap().extend(scope.metrics);
                    }
                }
            } else {
                let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP traces request");
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        keep.lock().unwrap().extend(scope.spans);
                    }
                }
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    Receiver { url, spans, metrics, paths }
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| a.value.as_ref()?.value.as_ref())
}

/// The decision meeting example (scripted: no model needed).
fn example(_dir: &std::path::Path) -> std::path::PathBuf {
    repo().join("examples/decision_meeting/decision_meeting.flow")
}

#[test]
fn a_run_is_exported_as_it_goes_and_again_with_the_same_ids() {
    let dir = tempfile::tempdir().unwrap();
    let flow_file = example(dir.path());
    let live = receiver();
    let out = flow(&["run", flow_file.to_str().unwrap(), "--run-dir", "run", "--otlp", &live.url], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("flow: exported "), "{}", text(&out));
    let spans = live.spans.lock().unwrap().clone();
    let paths = live.paths.lock().unwrap().clone();
    assert!(paths.iter().all(|p| p == "/v1/traces" || p == "/v1/metrics"), "{paths:?}");
    // The metrics: token usage by type, durations, the run by its status.
    let metrics = live.metrics.lock().unwrap().clone();
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    for name in ["gen_ai.client.token.usage", "gen_ai.client.operation.duration", "flow.runs"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let usage = metrics.iter().find(|m| m.name == "gen_ai.client.token.usage").unwrap();
    let Some(Data::Histogram(histogram)) = &usage.data else { panic!("token usage is a histogram: {usage:?}") };
    let types: Vec<String> = histogram
        .data_points
        .iter()
        .flat_map(|p| p.attributes.iter().filter(|a| a.key == "gen_ai.token.type").map(|a| format!("{:?}", a.value)))
        .collect();
    assert!(types.iter().any(|t| t.contains("input")) && types.iter().any(|t| t.contains("output")), "{types:?}");
    let chats = spans.iter().filter(|s| s.name.starts_with("chat ")).count() as u64;
    assert_eq!(histogram.data_points.iter().map(|p| p.count).sum::<u64>(), 2 * chats, "an input and an output point per turn");
    let runs = metrics.iter().find(|m| m.name == "flow.runs").unwrap();
    let Some(Data::Sum(sum)) = &runs.data else { panic!("runs is a sum: {runs:?}") };
    assert_eq!(sum.data_points.len(), 1);
    // One root, the workflow; agents' attempts with their chats beneath.
    let roots: Vec<&Span> = spans.iter().filter(|s| s.parent_span_id.is_empty()).collect();
    assert_eq!(roots.len(), 1, "{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    assert_eq!(roots[0].name, "invoke_workflow decision_meeting");
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert!(!chats.is_empty());
    for chat in &chats {
        let parent = spans.iter().find(|s| s.span_id == chat.parent_span_id).expect("a chat's parent was exported");
        assert!(parent.name.starts_with("invoke_agent "), "{} under {}", chat.name, parent.name);
        assert!(matches!(attr(chat, "gen_ai.usage.input_tokens"), Some(AnyValue::IntValue(_))), "{chat:?}");
        assert!(attr(chat, "gen_ai.output.messages").is_none(), "contents only when asked for");
    }
    assert!(spans.iter().all(|s| s.trace_id == roots[0].trace_id));
    // Sent again afterwards: the same spans, ids included.
    let again = receiver();
    let out = flow(&["export", "run", "--otlp", &again.url], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let key = |s: &Span| (s.span_id.clone(), s.parent_span_id.clone(), s.name.clone());
    let mut first: Vec<_> = spans.iter().map(key).collect();
    let mut second: Vec<_> = again.spans.lock().unwrap().iter().map(key).collect();
    first.sort();
    second.sort();
    assert_eq!(first, second);
}

#[test]
fn a_receiver_that_is_down_is_a_warning_and_the_run_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let flow_file = example(dir.path());
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down = format!("http://127.0.0.1:{port}");
    let out = flow(&["run", flow_file.to_str().unwrap(), "--run-dir", "run", "--otlp", &down], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("warning: OTLP export to {down}/v1/traces failed")), "{}", text(&out));
    let out = flow(&["export", "run", "--otlp", &down], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // The standard variables, and OTEL_SDK_DISABLED over them.
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", down.as_str()), ("OTEL_SDK_DISABLED", "true")];
    let out = flow_env(&["run", flow_file.to_str().unwrap(), "--run-dir", "run2"], dir.path(), &env);
    assert!(out.status.success() && !text(&out).contains("OTLP"), "{}", text(&out));
    let out = flow_env(&["run", flow_file.to_str().unwrap(), "--run-dir", "run3"], dir.path(), &env[..1]);
    assert!(out.status.success() && text(&out).contains("warning: OTLP export to"), "{}", text(&out));
    let out = flow_env(&["run", flow_file.to_str().unwrap(), "--run-dir", "run4", "--otlp", "ftp://x"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn metrics_stay_home_and_contents_come_when_told_to() {
    let dir = tempfile::tempdir().unwrap();
    let live = receiver();
    let out = flow_env(
        &["run", example(dir.path()).to_str().unwrap(), "--run-dir", "run", "--otlp", &live.url],
        dir.path(),
        &[("OTEL_METRICS_EXPORTER", "none"), ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let paths = live.paths.lock().unwrap().clone();
    assert!(!paths.is_empty() && paths.iter().all(|p| p == "/v1/traces"), "{paths:?}");
    // Asked for: each chat carries the reply, as the run's artifact holds it.
    let spans = live.spans.lock().unwrap().clone();
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert!(!chats.is_empty());
    for chat in chats {
        let Some(AnyValue::StringValue(messages)) = attr(chat, "gen_ai.output.messages") else { panic!("no output messages: {chat:?}") };
        let messages: serde_json::Value = serde_json::from_str(messages).unwrap();
        assert_eq!(messages[0]["role"], "assistant");
        assert!(messages[0]["parts"][0]["content"].as_str().is_some_and(|c| c.starts_with('{')), "{messages}");
    }
}
