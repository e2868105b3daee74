//! A budget, read once (reference §5.6): its limits, reserves, zones and
//! fallback, whether it is declared (`budget b { … }`) or written inline.

use super::{actions, duration, fraction, int, money, record, word, Props};
use crate::ir::{Action, Loc, Program, Value};

/// A budget's properties, typed.
/// `Budget::default()` limits nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget<'p> {
    /// The declared budget's name, when the property names one.
    pub name: Option<&'p str>,
    /// Where the declared budget is written, when the property names one.
    pub decl_loc: Option<Loc>,
    pub steps: Option<u64>,
    pub tokens: Option<u64>,
    pub tool_calls: Option<u64>,
    /// Milliseconds.
    pub duration_ms: Option<u64>,
    /// Dollars.
    pub cost: Option<f64>,
    pub reserve: Reserve,
    /// The zones, in declared order (yellow, red, fuse).
    pub zones: Vec<ZoneSpec<'p>>,
    pub on_exhausted: Option<&'p Action>,
}

/// The shares a budget holds back from ordinary work.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reserve {
    pub verification: f64,
    pub orchestration: f64,
    pub reconciliation: f64,
}

impl Reserve {
    /// The shares together.
    pub fn total(&self) -> f64 {
        self.verification + self.orchestration + self.reconciliation
    }
}

/// One budget zone: entered when the remaining share falls below `below`.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneSpec<'p> {
    pub zone: flow_trace::Zone,
    pub below: f64,
    /// The actions taken on entering the zone, in order.
    pub actions: Vec<&'p Action>,
}

/// The measures a budget limits, by their property names.
pub const MEASURES: [&str; 5] = ["steps", "tokens", "tool_calls", "cost", "duration"];

impl<'p> Budget<'p> {
    /// A budget property's value: an inline record, or the budget it names.
    pub fn of(program: &'p Program, value: Option<&'p Value>) -> Option<Budget<'p>> {
        match value? {
            Value::Record(r) => Some(Budget::read(r, None, None)),
            Value::Ref { name, .. } => {
                let decl = program.decls.get(name)?;
                Some(Budget::read(&decl.props, Some(name), Some(decl.loc)))
            }
            _ => None,
        }
    }

    /// `budget` with a `deadline` (milliseconds) as a limit on its
    /// duration — the lower of the two; a deadline alone is a budget of its
    /// own. The one rule for a workflow's and a contract's deadline: the
    /// engine's scope, the static bounds and trace check all read it so.
    pub fn with_deadline(budget: Option<Budget<'p>>, deadline_ms: Option<u64>) -> Option<Budget<'p>> {
        let Some(ms) = deadline_ms else { return budget };
        let mut budget = budget.unwrap_or_default();
        budget.duration_ms = Some(budget.duration_ms.map_or(ms, |d| d.min(ms)));
        Some(budget)
    }

    /// A declared budget (`budget b { … }`).
    pub fn of_decl(decl: &'p crate::ir::Decl) -> Budget<'p> {
        Budget::read(&decl.props, Some(&decl.name), Some(decl.loc))
    }

    fn read(props: &'p crate::ir::NameMap<Value>, name: Option<&'p str>, decl_loc: Option<Loc>) -> Budget<'p> {
        let reserve = record(props.prop("reserve"))
            .map(|r| Reserve {
                verification: fraction(r.get("verification")).unwrap_or(0.0),
                orchestration: fraction(r.get("orchestration")).unwrap_or(0.0),
                reconciliation: fraction(r.get("reconciliation")).unwrap_or(0.0),
            })
            .unwrap_or_default();
        let zones = match props.prop("zones") {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|z| record(Some(z)))
                .map(|z| ZoneSpec {
                    zone: word(z.get("zone")).and_then(flow_trace::Zone::parse).unwrap_or(flow_trace::Zone::Fuse),
                    below: fraction(z.get("below")).unwrap_or(0.0),
                    actions: actions(z.get("action")),
                })
                .collect(),
            _ => Vec::new(),
        };
        Budget {
            name,
            decl_loc,
            steps: int(props.prop("steps")),
            tokens: int(props.prop("tokens")),
            tool_calls: int(props.prop("tool_calls")),
            duration_ms: duration(props.prop("duration")),
            cost: money(props.prop("cost")),
            reserve,
            zones,
            on_exhausted: match props.prop("on_exhausted") {
                Some(Value::Action(a)) => Some(a),
                _ => None,
            },
        }
    }

    /// The limit on one measure (one of [`MEASURES`]), as a number:
    /// milliseconds for `duration`, dollars for `cost`.
    pub fn limit(&self, measure: &str) -> Option<f64> {
        match measure {
            "steps" => self.steps.map(|v| v as f64),
            "tokens" => self.tokens.map(|v| v as f64),
            "tool_calls" => self.tool_calls.map(|v| v as f64),
            "duration" => self.duration_ms.map(|v| v as f64),
            "cost" => self.cost,
            _ => None,
        }
    }

    /// Whether the budget limits anything at all.
    pub fn limits_anything(&self) -> bool {
        MEASURES.iter().any(|m| self.limit(m).is_some())
    }
}
