//! Declared events (reference §6.8): `record NAME { field: expr, … }` in a
//! node or a gate. Each field is an expression over the workflow's nodes
//! and `input` (in a gate, `outcome` too); the event's type is the record of
//! the fields' types. Names are unique in the workflow: the policy atom
//! `recorded(NAME)` and trace check find a record by its name.

use crate::check::Checker;
use crate::ir;
use crate::spec::Env;
use crate::types::Ty;
use flow_diagnostics::{codes, DiagnosticMut, Label, Span};
use flow_syntax::ast::{self, Entry};
use indexmap::IndexMap;

/// The outcome words a gate's record reads as `outcome`.
pub const GATE_OUTCOMES: &[&str] = &["PASS", "BLOCK", "REQUIRES_DECISION"];

impl Checker<'_> {
    /// The records of one node's or gate's block (`rest`: the entries that
    /// are not properties), checked. A gate's records also read `outcome`.
    pub(crate) fn check_records(&mut self, rest: &[&Entry], gate: bool) -> Vec<ir::Record> {
        let mut records = Vec::new();
        for entry in rest {
            let Entry::Record(record) = entry else { continue };
            let mut scope = self.env_scope(Env::Nodes);
            if gate {
                let outcome = Ty::Enum { values: GATE_OUTCOMES.iter().map(|w| w.to_string()).collect() };
                scope.vars.push(("outcome".into(), outcome));
            }
            let mut fields = ir::NameMap::default();
            for field in &record.body.entries {
                match field {
                    Entry::Property(p) if fields.contains_key(&p.key.text) => {
                        self.error(
                            codes::DUPLICATE_PROPERTY,
                            p.key.span,
                            format!("record `{}` has the field `{}` twice", record.name.text, p.key.text),
                        );
                    }
                    Entry::Property(p) => {
                        let typed = self.type_expr(&p.value, &scope);
                        fields.insert(p.key.text.clone(), typed);
                    }
                    other => {
                        self.error(
                            codes::ENTRY_NOT_ALLOWED,
                            other.span(),
                            format!("{} is not allowed in record `{}`", other.describe(), record.name.text),
                        )
                        .with_note("a record holds fields: `name: expression`");
                    }
                }
            }
            records.push(ir::Record { name: record.name.text.clone(), fields, loc: crate::check::loc(self.file, record.name.span) });
        }
        records
    }

    /// The names of the records declared in a workflow's nodes and gates,
    /// each once: a name declared again is an error (E0102) and the symbol
    /// index learns each one (hover, go to definition).
    pub(crate) fn record_names(&mut self, workflow: &str, body: &ast::Block) -> IndexMap<String, Span> {
        let mut names: IndexMap<String, Span> = IndexMap::new();
        for entry in &body.entries {
            let (owner, block) = match entry {
                Entry::Node(n) => (format!("node {}", n.name.text), n.body.as_ref()),
                Entry::Gate(g) => (format!("gate {}", g.name.text), Some(&g.body)),
                _ => continue,
            };
            for record in block.into_iter().flat_map(|b| &b.entries) {
                let Entry::Record(record) = record else { continue };
                let (name, span) = (&record.name.text, record.name.span);
                if let Some(first) = names.get(name) {
                    let (first, file) = (*first, self.file);
                    self.error(
                        codes::DUPLICATE_DECLARATION,
                        span,
                        format!("record `{name}` is declared more than once in workflow `{workflow}`"),
                    )
                    .with_label(Label::secondary(file, first, "first declared here"))
                    .labels[0]
                        .message = "declared again".into();
                    continue;
                }
                names.insert(name.clone(), span);
                if self.index_symbols {
                    let fields: Vec<&str> = record
                        .body
                        .entries
                        .iter()
                        .filter_map(|e| match e {
                            Entry::Property(p) => Some(p.key.text.as_str()),
                            _ => None,
                        })
                        .collect();
                    self.symbols.defs.push(crate::SymbolDef {
                        key: format!("{workflow}::record::{name}"),
                        name: name.clone(),
                        kind: "record".into(),
                        file: self.file,
                        span,
                        container: Some(workflow.to_string()),
                        detail: format!("record {name} {{ {} }} — written by {owner}", fields.join(", ")),
                    });
                }
            }
        }
        names
    }
}
