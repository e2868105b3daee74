//! The run over time: a timeline of attempts, calls and waits for humans,
//! and each budget scope's use with its zones.

use crate::page::esc;
use crate::run::RunView;
use crate::svg::shorten;
use std::collections::BTreeMap;
use std::fmt::Write;

const WIDTH: f64 = 960.0;
const LABEL: f64 = 150.0;
const LANE: f64 = 26.0;

/// A scope's limits and zones, as declared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopeLimits {
    /// `(measure, limit)`: `steps`, `tokens`, `tool_calls`, `cost`, `duration`.
    pub limits: Vec<(&'static str, f64)>,
    /// `(zone, below)`: entered when the remaining share falls below.
    pub zones: Vec<(String, f64)>,
}

/// `ms` for people: `850 ms`, `2.4 s`, `3 min 5 s`.
pub fn human_ms(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// The left and right x of a bar from `start` to `end` on a chart of
/// `span` milliseconds, at least `min` wide (an instant stays visible).
fn bar(start: u64, end: u64, span: u64, min: f64) -> (f64, f64) {
    let x0 = x_of(start, span);
    (x0, x_of(end, span).max(x0 + min))
}

/// The x of time `ms` on a chart of `span` milliseconds.
fn x_of(ms: u64, span: u64) -> f64 {
    LABEL + (WIDTH - LABEL - 20.0) * ms as f64 / span.max(1) as f64
}

fn axis(out: &mut String, span: u64, y: f64) {
    for i in 0..=4 {
        let ms = span * i / 4;
        let x = x_of(ms, span);
        let _ = write!(
            out,
            r#"<line class="tick" x1="{x:.1}" y1="0" x2="{x:.1}" y2="{y:.1}"/><text class="tick-label" x="{x:.1}" y="{:.1}">{}</text>"#,
            y + 14.0,
            human_ms(ms)
        );
    }
}

/// One lane per node that ran (in the order they first started): a bar per
/// attempt (retries and repairs marked), its calls inside, the waits for
/// humans on the subject's lane.
pub fn timeline(run: &RunView) -> String {
    let span = run.duration_ms.max(1);
    let lanes: Vec<(&String, &crate::run::NodeRun)> = run.nodes.iter().filter(|(_, n)| !n.attempts.is_empty() || n.visits > 0).collect();
    let extra: Vec<&crate::run::Wait> = run.waits.iter().filter(|w| !run.nodes.contains_key(&w.subject)).collect();
    let height = (lanes.len() + usize::from(!extra.is_empty())) as f64 * LANE + 24.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0}" width="{WIDTH}" height="{height:.0}">"#
    );
    axis(&mut out, span, height - 20.0);
    for (lane, (name, node)) in lanes.iter().enumerate() {
        let y = lane as f64 * LANE;
        let _ = write!(
            out,
            r#"<g class="lane" data-node="{}"><text class="lane-label" x="{:.1}" y="{:.1}">{}</text>"#,
            esc(name),
            LABEL - 8.0,
            y + 17.0,
            esc(&shorten(name, 20))
        );
        for (start, end) in &node.spans {
            let end = end.unwrap_or(run.duration_ms);
            let (x0, x1) = bar(*start, end, span, 2.0);
            let _ = write!(
                out,
                r#"<rect class="visit" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{} visit: {}</title></rect>"#,
                y + 1.0,
                x1 - x0,
                LANE - 2.0,
                esc(name),
                human_ms(end.saturating_sub(*start))
            );
        }
        for a in &node.attempts {
            let end = a.end_ms.unwrap_or(run.duration_ms);
            let (x0, x1) = bar(a.start_ms, end, span, 3.0);
            let class = format!("attempt st-{} trigger-{}", a.state.as_str(), esc(&a.trigger));
            let _ = write!(
                out,
                r#"<rect class="{class}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="3"><title>{} #{} ({}): {}{}</title></rect>"#,
                y + 4.0,
                x1 - x0,
                LANE - 8.0,
                esc(name),
                a.no,
                esc(&a.trigger),
                human_ms(end.saturating_sub(a.start_ms)),
                a.error.as_deref().map(|e| format!(" — {}", esc(e))).unwrap_or_default()
            );
            for c in &a.calls {
                let (c0, c1) = bar(c.start_ms, c.start_ms + c.duration_ms, span, 2.0);
                let _ = write!(
                    out,
                    r#"<rect class="call call-{} {}" x="{c0:.1}" y="{:.1}" width="{:.1}" height="6"><title>{} {}: {}{}</title></rect>"#,
                    c.kind,
                    if c.ok { "ok" } else { "err" },
                    y + LANE - 11.0,
                    c1 - c0,
                    c.kind,
                    esc(&c.name),
                    human_ms(c.duration_ms),
                    c.tokens.map(|t| format!(", {t} tokens")).unwrap_or_default()
                );
            }
            if a.no > 1 {
                let _ = write!(out, r#"<text class="retry" x="{:.1}" y="{:.1}">#{}</text>"#, x0 + 2.0, y + 3.0, a.no);
            }
        }
        for w in run.waits.iter().filter(|w| w.subject == **name) {
            wait_bar(&mut out, w, y, run.duration_ms, span);
        }
        out.push_str("</g>");
    }
    if !extra.is_empty() {
        let y = lanes.len() as f64 * LANE;
        let _ = write!(out, r#"<g class="lane"><text class="lane-label" x="{:.1}" y="{:.1}">humans</text>"#, LABEL - 8.0, y + 17.0);
        for w in extra {
            wait_bar(&mut out, w, y, run.duration_ms, span);
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    out
}

fn wait_bar(out: &mut String, w: &crate::run::Wait, y: f64, end: u64, span: u64) {
    let until = w.decided_ms.unwrap_or(end);
    let (x0, x1) = bar(w.asked_ms, until, span, 3.0);
    let what = match (&w.decision, &w.by) {
        (Some(d), Some(by)) => format!("{d} by {by}"),
        _ => "still waiting".to_string(),
    };
    let _ = write!(
        out,
        r#"<rect class="wait" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>waiting for a human on {}: {} ({})</title></rect>"#,
        y + 2.0,
        x1 - x0,
        LANE - 4.0,
        esc(&w.subject),
        human_ms(until.saturating_sub(w.asked_ms)),
        esc(&what)
    );
}

/// Each scope's use over time as shares of its limits (a line per limited
/// measure), with its zones' thresholds and the moments it entered them.
pub fn budgets(run: &RunView, limits: &BTreeMap<String, ScopeLimits>) -> String {
    let span = run.duration_ms.max(1);
    let mut out = String::new();
    for (scope, series) in &run.budgets {
        let Some(declared) = limits.get(scope).filter(|l| !l.limits.is_empty()) else { continue };
        let h = 120.0;
        let _ = write!(out, r#"<figure class="budget" data-scope="{}"><figcaption>{}</figcaption>"#, esc(scope), esc(scope));
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {:.0}" width="{WIDTH}" height="{:.0}">"#,
            h + 24.0,
            h + 24.0
        );
        axis(&mut out, span, h);
        let y_of = |share: f64| h - h * share.clamp(0.0, 1.0);
        for (zone, below) in &declared.zones {
            let y = y_of(1.0 - below);
            let _ = write!(
                out,
                r#"<line class="zone zone-{z}" x1="{LABEL}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text class="zone-label zone-{z}" x="{:.1}" y="{:.1}">{z} below {:.0}%</text>"#,
                WIDTH - 20.0,
                LABEL - 6.0,
                y + 4.0,
                below * 100.0,
                z = esc(zone)
            );
        }
        let mut legend = String::new();
        // Duration is the run's elapsed time; other scopes' is not drawn.
        let drawn = declared.limits.iter().filter(|(m, _)| *m != "duration" || scope == "run");
        for (i, (measure, limit)) in drawn.enumerate() {
            let value = |p: &crate::run::BudgetPoint| if *measure == "duration" { p.at_ms as f64 } else { measure_of(&p.used, measure) };
            let mut points = String::new();
            for p in series {
                let _ = write!(points, "{:.1},{:.1} ", x_of(p.at_ms, span), y_of(value(p) / limit));
            }
            let last = series.last().map_or(0.0, value);
            let _ = write!(out, r#"<polyline class="use m{i}" points="{}"/>"#, points.trim_end());
            let (last_text, limit_text) =
                if *measure == "cost" { (crate::money(last), crate::money(*limit)) } else { (number(last), number(*limit)) };
            let _ = write!(legend, r#"<li class="m{i}">{measure}: {last_text} of {limit_text} ({:.0}%)</li>"#, 100.0 * last / limit);
        }
        for z in run.zones.iter().filter(|z| z.scope == *scope) {
            let x = x_of(z.at_ms, span);
            let _ = write!(
                out,
                r#"<circle class="zone-entry zone-{}" cx="{x:.1}" cy="{h:.1}" r="5"><title>entered {} at {}: {}</title></circle>"#,
                esc(&z.zone),
                esc(&z.zone),
                human_ms(z.at_ms),
                esc(&z.actions.join(", "))
            );
        }
        let _ = write!(out, "</svg><ul class=\"use-legend\">{legend}</ul></figure>");
    }
    out
}

fn measure_of(u: &flow_trace::Usage, measure: &str) -> f64 {
    match measure {
        "steps" => u.steps as f64,
        "tokens" => u.tokens as f64,
        "tool_calls" => u.tool_calls as f64,
        "cost" => u.cost,
        _ => u.duration_ms as f64,
    }
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}
