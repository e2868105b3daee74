//! Inlay hints: what the compiler worked out and the text does not say —
//! the output type of a node whose kind infers it (a tool's, a join's, a
//! loop's…), and the worst case of each budget next to its limit.

use crate::analysis::Analysis;
use flow_verify::budgets::{show, BudgetBound, Status};
use lsp_types::{InlayHint, InlayHintKind, InlayHintLabel, Position, Range};
use std::collections::BTreeMap;

impl Analysis {
    /// The hints whose place is within `range` of this document.
    pub fn inlay_hints(&self, range: Range) -> Vec<InlayHint> {
        let mut hints = self.inferred_outputs();
        hints.extend(self.budget_bounds());
        hints.retain(|h| h.position >= range.start && h.position <= range.end);
        hints.sort_by_key(|h| (h.position.line, h.position.character));
        hints
    }

    /// `: Type` after the name of every node of this document whose output
    /// type is not written (all but agent and end nodes).
    fn inferred_outputs(&self) -> Vec<InlayHint> {
        let program = &self.checked.program;
        let symbols = &self.checked.symbols;
        let mut hints = Vec::new();
        for def in symbols.defs.iter().filter(|d| d.kind == "node" && d.file == self.root) {
            let Some(node) = def.container.as_ref().and_then(|w| program.workflows.get(w)).and_then(|w| w.nodes.get(&def.name)) else {
                continue;
            };
            if matches!(node.kind(), flow_trace::NodeKind::Agent | flow_trace::NodeKind::End) {
                continue;
            }
            let position = self.range_here(def.span.end, def.span.end).start;
            hints.push(hint(position, format!(": {}", node.output), InlayHintKind::TYPE, None));
        }
        hints
    }

    /// The static worst case of each budget of this document, at the end of
    /// the line where the budget is written: `worst case: 2/10 steps,
    /// 16000/1000 tokens (exceeds)`, the whole description as the tooltip.
    fn budget_bounds(&self) -> Vec<InlayHint> {
        let mut by_line: BTreeMap<u32, Vec<&BudgetBound>> = BTreeMap::new();
        for bound in self.budgets.iter().filter(|b| b.loc.file == self.root.0) {
            let line = self.range_here(bound.loc.start, bound.loc.start).start.line;
            by_line.entry(line).or_default().push(bound);
        }
        let text = self.source();
        by_line
            .into_iter()
            .filter_map(|(line, bounds)| {
                let parts: Vec<String> = bounds.iter().map(|b| describe(b)).collect();
                let line_text = text.lines().nth(line as usize)?;
                let position = Position { line, character: line_text.encode_utf16().count() as u32 };
                let tooltip = bounds.iter().map(|b| flow_verify::budgets::describe(b)).collect::<Vec<_>>().join("\n");
                Some(hint(position, format!("worst case: {}", parts.join(", ")), InlayHintKind::PARAMETER, Some(tooltip)))
            })
            .collect()
    }
}

/// `2/10 steps`, `16000/1000 tokens (exceeds)`, `$0.64/$1.00 cost`.
fn describe(b: &BudgetBound) -> String {
    let counted = !matches!(b.measure, "cost" | "duration");
    let amount = |v: f64| if counted { format!("{v:.0}") } else { show(b.measure, v) };
    let worst = b.worst_case.map_or("unbounded".to_string(), amount);
    let status = match b.status {
        Status::Fits => String::new(),
        other => format!(" ({})", other.as_str()),
    };
    format!("{worst}/{} {}{status}", amount(b.available), b.measure.replace('_', " "))
}

fn hint(position: Position, label: String, kind: InlayHintKind, tooltip: Option<String>) -> InlayHint {
    InlayHint {
        position,
        label: InlayHintLabel::String(label),
        kind: Some(kind),
        text_edits: None,
        tooltip: tooltip.map(lsp_types::InlayHintTooltip::String),
        padding_left: Some(true),
        padding_right: None,
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn inferred_outputs_and_budget_bounds_are_hinted() {
        let text = "provider p: scripted { max_tokens: 1k, max_input_tokens: 1k }\nagent a { provider: p }\ntool t: builtin { description: \"Looks up\", input: { q: string }, output: { hits: int } }\nbudget small { steps: 10, tokens: 1k }\nworkflow w {\n  start: n\n  budget: small\n  node n: agent a { output: string }\n  node look: tool t { args: { q: n } }\n  node done: end ok\n  n -> look\n  look -> done\n}\n";
        let uri = lsp_types::Uri::from_str("file:///hints.flow").expect("a URI");
        let analysis = Analysis::new(&uri, text);
        let all = Range { start: Position { line: 0, character: 0 }, end: Position { line: 99, character: 0 } };
        let hints = analysis.inlay_hints(all);
        let shown: Vec<(u32, String)> = hints
            .iter()
            .map(|h| match &h.label {
                InlayHintLabel::String(s) => (h.position.line, s.clone()),
                _ => (h.position.line, String::new()),
            })
            .collect();
        // The tool node's output is the tool's; the agent node's is written.
        assert!(shown.contains(&(8, ": { hits: int }".to_string())), "{shown:?}");
        assert!(!shown.iter().any(|(line, _)| *line == 7), "no hint on the agent node: {shown:?}");
        // The run's budget: its worst case beside its limits, where it is used.
        let budget = shown.iter().find(|(_, s)| s.starts_with("worst case:")).expect("a budget hint");
        assert_eq!(budget.1, "worst case: 2/10 steps, 16000/1000 tokens (exceeds)");
        assert_eq!(budget.0, 3, "at the line where the budget is declared");
        // Outside the asked range: nothing.
        let first_line = Range { start: Position { line: 0, character: 0 }, end: Position { line: 0, character: 5 } };
        assert!(analysis.inlay_hints(first_line).is_empty());
    }
}
