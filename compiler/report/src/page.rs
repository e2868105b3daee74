//! The page: one HTML file with its styles, script and data inlined — no
//! network, nothing to fetch.

use std::fmt::Write;

const STYLE: &str = include_str!("../assets/report.css");
const SCRIPT: &str = include_str!("../assets/report.js");

/// `text` safe inside HTML text and double-quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// JSON safe inside a `<script>` element: no `</script>` or `<!--` can
/// close or open anything.
pub fn script_json(value: &serde_json::Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// A whole page: `title`, the sections' HTML, and the data the script reads.
pub fn page(title: &str, sections: &str, data: &serde_json::Value) -> String {
    let mut out = String::with_capacity(sections.len() + STYLE.len() + SCRIPT.len() + 4096);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // Nothing from elsewhere: the policy says so to the browser too.
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n");
    let _ = writeln!(out, "<title>{}</title>", esc(title));
    let _ = writeln!(out, "<style>\n{STYLE}</style>\n</head>");
    // The error trap comes first, so it sees the main script's errors too.
    out.push_str("<body data-errors=\"\">\n<script>window.addEventListener('error', function (e) { document.body.dataset.errors += (e.message || 'error') + '\\n'; });</script>\n");
    out.push_str(sections);
    let _ = writeln!(out, "\n<script type=\"application/json\" id=\"flow-data\">{}</script>", script_json(data));
    let _ = writeln!(out, "<script>\n{SCRIPT}</script>\n</body>\n</html>");
    out
}
