//! The property ledger (reference §13) against the spec tables.
//!
//! Every property the checker accepts (`flow_check::spec`: declarations
//! and their variants, nested records, node kinds, gates, transfers,
//! policies) has exactly one row, with a status from a closed set; every
//! test a row names exists (its file holds that function, or is that UI
//! test); an `enforced`, `refused` or `warned` row names one. A property
//! the spec marks not enforced (`spec::Support::NotEnforced`: W0117) is
//! `warned`, one it refuses (`Support::Refused`: E0116) is `refused`, and
//! no row is `ignored`: nothing is accepted, ignored and silent. The
//! `untested` rows may only become fewer: the limit below is lowered as
//! they are mended, never raised.

// A test reads the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_check::spec::{self, Support, P, V};
use flow_tests::repo_root;
use std::collections::BTreeMap;

/// The most `untested` rows allowed (lower it when a test lands).
const MAX_UNTESTED: usize = 3;
const STATUSES: &[&str] = &["enforced", "untested", "static", "refused", "warned"];

/// One property of the spec: where it is, what the runtime does with it
/// (its own support, else the nearest enclosing property's), and whether
/// that support is its own.
type Prop = ((String, String), Support, bool);

/// `(block, property)` for every property of `props` under `block`, nested
/// records included (`block.prop`, `block.prop[]` for a list of records).
fn walk(block: &str, props: &[P], out: &mut Vec<Prop>) {
    walk_in(block, props, Support::Runs, out)
}

fn walk_in(block: &str, props: &[P], outer: Support, out: &mut Vec<Prop>) {
    for p in props {
        let own = p.support != Support::Runs;
        let support = if own { p.support } else { outer };
        out.push(((block.to_string(), p.name.to_string()), support, own || outer == Support::Runs));
        nested(&format!("{block}.{}", p.name), &p.value, support, out);
    }
}

fn nested(block: &str, value: &V, support: Support, out: &mut Vec<Prop>) {
    let walk = |b: &str, fields: &[P], out: &mut Vec<Prop>| walk_in(b, fields, support, out);
    match value {
        V::Record(fields) => walk(block, fields, out),
        V::List(V::Record(fields)) => walk(&format!("{block}[]"), fields, out),
        V::OneOf(options) => options.iter().for_each(|o| nested(block, o, support, out)),
        _ => {}
    }
}

fn spec_properties() -> Vec<Prop> {
    let mut out = Vec::new();
    for decl in spec::ALL_DECLS {
        let kind = decl.kind.as_str();
        walk(kind, decl.block.props, &mut out);
        for (variant, props) in decl.variants {
            walk(&format!("{kind}:{variant}"), props, &mut out);
        }
    }
    walk("gate", spec::GATE_BLOCK.props, &mut out);
    walk("handoff", spec::HANDOFF_BLOCK.props, &mut out);
    walk("delegate", spec::DELEGATE_BLOCK.props, &mut out);
    walk("policy", spec::POLICY_BLOCK.props, &mut out);
    walk("node", spec::NODE_COMMON, &mut out);
    for kind in spec::NODE_KINDS {
        walk(&format!("node:{}", kind.kind), kind.props, &mut out);
    }
    out
}

struct Row {
    status: String,
    test: String,
}

/// The ledger's rows, by `(block, property)`.
fn ledger() -> BTreeMap<(String, String), Row> {
    let reference = std::fs::read_to_string(repo_root().join("docs/reference.md")).expect("docs/reference.md");
    let section = reference.split("## 13 Property ledger").nth(1).expect("the reference has a §13 Property ledger");
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(|c| c.trim().trim_matches('`')).collect();
        assert!(cells.len() >= 5, "a ledger row needs block, property, status, reader and test: {line}");
        let key = (cells[0].to_string(), cells[1].to_string());
        let row = Row { status: cells[2].to_string(), test: cells[4].to_string() };
        assert!(rows.insert(key.clone(), row).is_none(), "two ledger rows for {key:?}");
    }
    rows
}

/// Whether the test a row names exists: a UI test file, or `file::…::fn`
/// with `fn name(` in that file.
fn test_exists(test: &str) -> bool {
    let root = repo_root();
    if test.ends_with(".flow") {
        return root.join(test).is_file();
    }
    let Some((file, rest)) = test.split_once(".rs::") else { return false };
    let name = rest.rsplit("::").next().unwrap_or(rest);
    std::fs::read_to_string(root.join(format!("{file}.rs"))).is_ok_and(|text| text.contains(&format!("fn {name}(")))
}

#[test]
fn every_property_has_one_ledger_row_and_its_test_exists() {
    let rows = ledger();
    let properties = spec_properties();
    let mut failures = Vec::new();
    for (key, support, own) in &properties {
        let Some(row) = rows.get(key) else {
            failures.push(format!("`{}` `{}` has no ledger row", key.0, key.1));
            continue;
        };
        // The spec's support and the ledger agree (a row may also be
        // `refused` for values a workflow check refuses: E0116 there; a
        // field of a warned record may act on its own).
        let agrees = (!own && row.status != "warned" && row.status != "refused")
            || match support {
                Support::NotEnforced(_) => row.status == "warned",
                Support::Refused(_) => row.status == "refused",
                Support::Runs => row.status != "warned",
            };
        if !agrees {
            failures.push(format!("`{}` `{}` is `{}` in the ledger but {support:?} in the spec", key.0, key.1, row.status));
        }
    }
    for (key, row) in &rows {
        if !properties.iter().any(|(k, _, _)| k == key) {
            failures.push(format!("the ledger row `{}` `{}` is no property of the spec", key.0, key.1));
        }
        if !STATUSES.contains(&row.status.as_str()) {
            failures.push(format!("`{}` `{}`: unknown status `{}` (one of {STATUSES:?})", key.0, key.1, row.status));
        }
        if matches!(row.status.as_str(), "enforced" | "refused" | "warned") && row.test.is_empty() {
            failures.push(format!("`{}` `{}` is {} but names no test", key.0, key.1, row.status));
        }
        if !row.test.is_empty() && !test_exists(&row.test) {
            failures.push(format!("`{}` `{}` names the test `{}`, which does not exist", key.0, key.1, row.test));
        }
    }
    assert!(failures.is_empty(), "{} ledger problem(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn declared_and_not_shown_to_act_only_shrinks() {
    let rows = ledger();
    let of = |status: &str| rows.iter().filter(|(_, r)| r.status == status).map(|(k, _)| format!("{}.{}", k.0, k.1)).collect::<Vec<_>>();
    let (untested, warned) = (of("untested"), of("warned"));
    eprintln!("ledger: {} untested, {} warned (W0117): {}", untested.len(), warned.len(), warned.join(", "));
    assert!(
        untested.len() <= MAX_UNTESTED,
        "{} untested rows, more than the {MAX_UNTESTED} allowed: a new property needs a test",
        untested.len()
    );
}
