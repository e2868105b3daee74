//! Fixes beyond "did you mean", attached once every pass has reported:
//! a gate's missing handlers (E0502) and a `loop` node's missing
//! `max_rounds` (E0111) are inserted into the block they belong to. Editors
//! offer them as quick fixes, SARIF as `fixes`. A fix is attached only when
//! the block opens on the line the diagnostic points at, so that an edit
//! never lands in another declaration.

use flow_check::ir::Program;
use flow_diagnostics::{codes, Diagnostic, Edit, Fix, SourceDb, Span};

/// The rounds a fixed `loop` node is given.
const FIXED_ROUNDS: u32 = 3;

pub fn attach(db: &SourceDb, program: &Program, diagnostics: &mut [Diagnostic]) {
    for d in diagnostics.iter_mut().filter(|d| d.fix.is_none()) {
        d.fix = if d.code == codes::UNHANDLED_OUTCOME {
            handlers_fix(db, program, d)
        } else if d.code == codes::MISSING_PROPERTY && d.message.ends_with("lacks the required property `max_rounds`") {
            let primary = d.primary().expect("a located diagnostic");
            insert_in_block(db.text(primary.file), primary.span, &[format!("max_rounds: {FIXED_ROUNDS}")]).map(|(span, text)| Fix {
                title: format!("Add `max_rounds: {FIXED_ROUNDS}`"),
                edits: vec![Edit { file: primary.file, span, text }],
            })
        } else {
            None
        };
    }
}

/// A handler for each exit of the gate that has none.
fn handlers_fix(db: &SourceDb, program: &Program, d: &Diagnostic) -> Option<Fix> {
    let primary = d.primary()?;
    let gate = program
        .workflows
        .values()
        .flat_map(|w| w.gates.values())
        .find(|g| g.loc.file == primary.file.0 && g.loc.start == primary.span.start && g.loc.end == primary.span.end)?;
    let handled: Vec<&str> = gate.handlers.iter().flat_map(|h| h.events.iter().map(|e| e.as_str())).collect();
    let missing: Vec<String> =
        flow_verify::gates::possible_exits(gate, program).into_iter().filter(|exit| !handled.contains(&exit.as_str())).collect();
    if missing.is_empty() {
        return None;
    }
    let lines: Vec<String> = missing.iter().map(|exit| format!("on {exit} -> {}", default_action(exit, &gate.name, &gate.from))).collect();
    let (span, text) = insert_in_block(db.text(primary.file), primary.span, &lines)?;
    let title = match lines.as_slice() {
        [one] => format!("Add `{one}`"),
        _ => format!("Add handlers for {}", missing.join(", ")),
    };
    Some(Fix { title, edits: vec![Edit { file: primary.file, span, text }] })
}

/// What a gate's exit does unless the author says otherwise: a pass goes
/// on, a block or a rejection ends the run with a reason naming the gate,
/// a needed decision is asked for, a revision goes back to `from`.
fn default_action(exit: &str, gate: &str, from: &str) -> String {
    match exit {
        "PASS" | "approve" => "continue".into(),
        "REQUIRES_DECISION" => "decide".into(),
        "BLOCK" => format!("terminate({gate}_blocked)"),
        "reject" => format!("terminate({gate}_rejected)"),
        "revise" => format!("revise({from})"),
        "replan" => "replan".into(),
        other => format!("terminate({gate}_{})", other.to_ascii_lowercase()),
    }
}

/// Where and what to insert so that `entries` end the block that opens on
/// the line of `at`: each on its own line, indented like the block's first
/// entry, in a block written over several lines; after a `;` in a block on
/// one line.
fn insert_in_block(text: &str, at: Span, entries: &[String]) -> Option<(Span, String)> {
    let (open, close) = block_after(text, at.end as usize)?;
    let inside = &text[open + 1..close];
    let last = open + 1 + inside.trim_end().len();
    let text_out = if inside.contains('\n') {
        let indent = first_entry_indent(inside).unwrap_or_else(|| format!("{}  ", line_indent(text, open)));
        entries.iter().map(|e| format!("\n{indent}{e}")).collect::<String>()
    } else if inside.trim().is_empty() {
        return Some((Span { start: open as u32 + 1, end: close as u32 }, format!(" {} ", entries.join("; "))));
    } else {
        entries.iter().map(|e| format!("; {e}")).collect::<String>()
    };
    Some((Span { start: last as u32, end: last as u32 }, text_out))
}

/// The `{` that opens a block on the same line after `from`, and its `}`
/// (strings and comments skipped).
fn block_after(text: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    let mut open = None;
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' if open.is_none() => return None,
            b'"' => i = skip_string(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'{' => {
                open.get_or_insert(i);
                depth += 1;
            }
            b'}' if open.is_some() => {
                depth -= 1;
                if depth == 0 {
                    return Some((open?, i));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the closing quote of the string opening at `start`.
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != b'"' {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i
}

fn first_entry_indent(inside: &str) -> Option<String> {
    inside.lines().skip(1).find(|l| !l.trim().is_empty()).map(|l| l[..l.len() - l.trim_start().len()].to_string())
}

fn line_indent(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let line = &text[start..];
    line[..line.len() - line.trim_start().len()].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(text: &str, name: &str, entries: &[&str]) -> Option<String> {
        let start = text.find(name)? as u32;
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        let (span, new) = insert_in_block(text, Span { start, end: start + name.len() as u32 }, &entries)?;
        let mut out = text.to_string();
        out.replace_range(span.start as usize..span.end as usize, &new);
        Some(out)
    }

    #[test]
    fn entries_go_at_the_end_of_the_block_in_its_layout() {
        let multi = "  gate g: a -> b {\n    evaluate: [predicate(a.ok)] // a \"}\"\n    on PASS -> continue\n  }\n";
        assert_eq!(
            insert(multi, "g:", &["on BLOCK -> terminate(g_blocked)"]).unwrap(),
            "  gate g: a -> b {\n    evaluate: [predicate(a.ok)] // a \"}\"\n    on PASS -> continue\n    on BLOCK -> terminate(g_blocked)\n  }\n"
        );
        let one = "node r: loop [a] { until: a.ok }\nnode x: agent w { }";
        assert_eq!(insert(one, "r:", &["max_rounds: 3"]).unwrap(), "node r: loop [a] { until: a.ok; max_rounds: 3 }\nnode x: agent w { }");
        assert_eq!(insert("node r: loop [a] {}", "r:", &["max_rounds: 3"]).unwrap(), "node r: loop [a] { max_rounds: 3 }");
        // No block on the line: no fix (the next line's block is another's).
        assert_eq!(insert("node r: loop [a]\nnode x: agent w { }", "r:", &["max_rounds: 3"]), None);
        // A `{` inside a string does not open the block.
        assert_eq!(
            insert("gate g: a -> b { reason: \"{x\" }", "g:", &["on PASS -> continue"]).unwrap(),
            "gate g: a -> b { reason: \"{x\"; on PASS -> continue }"
        );
    }
}
