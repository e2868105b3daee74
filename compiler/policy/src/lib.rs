//! Policies as monitors.
//!
//! A policy (reference §8) is a temporal formula over the *policy trace* of
//! a run: the events an atom can describe, in `seq` order. This crate is
//! the one implementation of its semantics, used by the model checker
//! (`flowc verify`), by `flow trace check`, and by the online monitors of
//! `flow run`:
//!
//! - [`Obs`] is what one trace event says, as far as atoms can tell;
//!   [`Obs::of`] reads it off a [`flow_trace::Body`]. Events no atom can
//!   describe are not steps of the policy trace.
//! - [`Atom`] is a compiled atom; [`Atom::holds`] decides it on an [`Obs`].
//! - [`Automaton`] compiles a formula by *progression*: its states are
//!   residual formulas (hash-consed, with `and`/`or` flattened, sorted and
//!   deduplicated, so there are finitely many), a step rewrites the residual
//!   by the atoms that hold at the event, and [`Automaton::accepts_end`]
//!   says whether the finite trace may stop here. Steps are cached by
//!   (state, atom mask), so a monitor is a lazily built deterministic
//!   automaton: after warm-up a step is one hash lookup.
//!
//! Semantics (finite traces, strong obligations): an `eventually`, an
//! `until`'s right side or a `within` still open when the trace ends is
//! violated; `always`, `never` and `never … before` only look at positions
//! that exist. A formula whose outermost operator is `=>` is read as
//! `always (p => q)`.

use flow_check::ir::Formula;
use flow_trace::Body;
use rustc_hash::FxHashMap;
use std::fmt;

/// What one trace event says, as far as atoms can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Obs<'a> {
    Started(&'a str),
    Completed(&'a str),
    Failed(&'a str),
    Called {
        tool: &'a str,
        by: Option<&'a str>,
    },
    Refused {
        tool: &'a str,
        by: Option<&'a str>,
    },
    HandedOff {
        from: &'a str,
        to: &'a str,
    },
    Outcome {
        gate: &'a str,
        outcome: &'a str,
    },
    /// A decision applied to a gate, a human node, an escalation or a
    /// confirmation (`subject`), by a principal.
    Decided {
        subject: &'a str,
        decision: &'a str,
        by: &'a str,
    },
    Zone(&'a str),
    Terminated(&'a str),
    /// A declared record written (`record NAME { … }`, by name).
    Recorded(&'a str),
}

impl<'a> Obs<'a> {
    /// The step as the model checker and the witness search compare
    /// steps: the observation itself, except that a confirmation's subject
    /// keeps only its tool (`confirm.TOOL`; attempt ids differ per run).
    pub fn step_key(&self) -> String {
        match self {
            Obs::Decided { subject, decision, by } if subject.starts_with("confirm.") => {
                let tool = subject["confirm.".len()..].split('.').next().unwrap_or_default();
                format!("{:?}", Obs::Decided { subject: &format!("confirm.{tool}"), decision, by })
            }
            other => format!("{other:?}"),
        }
    }

    /// The observation of an event, or `None` when no atom can describe it
    /// (then the event is not a step of the policy trace).
    pub fn of(body: &'a Body) -> Option<Obs<'a>> {
        Some(match body {
            Body::NodeStarted { node, .. } => Obs::Started(node),
            Body::NodeCompleted { node, .. } => Obs::Completed(node),
            Body::NodeFailed { node, .. } => Obs::Failed(node),
            Body::ToolCallStarted { tool, agent, .. } => Obs::Called { tool, by: agent.as_deref() },
            Body::ToolCallRefused { tool, agent, .. } => Obs::Refused { tool, by: agent.as_deref() },
            Body::Handoff { from, to, .. } => Obs::HandedOff { from, to },
            Body::GateRecorded { gate, outcome, .. } => Obs::Outcome { gate, outcome: outcome.as_str() },
            Body::DecisionApplied { subject, decision, by, .. } => Obs::Decided { subject, decision: decision.as_str(), by },
            Body::BudgetZoneChanged { to, .. } => Obs::Zone(to.as_str()),
            Body::RunTerminated { reason, .. } => Obs::Terminated(reason),
            Body::Recorded { name, .. } => Obs::Recorded(name),
            _ => return None,
        })
    }
}

/// A compiled atom (reference §8.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Atom {
    Started(String),
    Completed(String),
    Failed(String),
    Called { tool: String, by: Option<String> },
    Refused { tool: String, by: Option<String> },
    HandedOff { from: String, to: String },
    Outcome { gate: String, outcome: String },
    Decided { gate: String, decision: String },
    Zone(String),
    Terminated(String),
    Approved(String),
    Recorded(String),
}

impl Atom {
    /// The atom of a checked formula atom, or why it is not one.
    pub fn compile(name: &str, args: &[String], by: Option<&str>) -> Result<Atom, String> {
        let arg = |i: usize| args.get(i).cloned().ok_or_else(|| format!("`{name}` needs {} argument(s)", i + 1));
        let by = by.map(str::to_string);
        Ok(match name {
            "started" => Atom::Started(arg(0)?),
            "completed" => Atom::Completed(arg(0)?),
            "failed" => Atom::Failed(arg(0)?),
            "called" => Atom::Called { tool: arg(0)?, by },
            "refused" => Atom::Refused { tool: arg(0)?, by },
            "handed_off" => Atom::HandedOff { from: arg(0)?, to: arg(1)? },
            "outcome" => Atom::Outcome { gate: arg(0)?, outcome: arg(1)? },
            "decided" => Atom::Decided { gate: arg(0)?, decision: arg(1)? },
            "zone" => Atom::Zone(arg(0)?),
            "terminated" => Atom::Terminated(arg(0)?),
            "approved" => Atom::Approved(arg(0)?),
            "recorded" => Atom::Recorded(arg(0)?),
            other => return Err(format!("unknown atom `{other}`")),
        })
    }

    /// Whether the atom holds at an event with this observation.
    pub fn holds(&self, obs: &Obs) -> bool {
        fn by_ok(want: &Option<String>, got: Option<&str>) -> bool {
            want.as_deref().is_none_or(|w| got == Some(w))
        }
        match (self, obs) {
            (Atom::Started(n), Obs::Started(m)) | (Atom::Completed(n), Obs::Completed(m)) | (Atom::Failed(n), Obs::Failed(m)) => n == m,
            (Atom::Called { tool, by }, Obs::Called { tool: t, by: b }) | (Atom::Refused { tool, by }, Obs::Refused { tool: t, by: b }) => {
                tool == t && by_ok(by, *b)
            }
            (Atom::HandedOff { from, to }, Obs::HandedOff { from: f, to: t }) => from == f && to == t,
            (Atom::Outcome { gate, outcome }, Obs::Outcome { gate: g, outcome: o }) => gate == g && outcome == o,
            (Atom::Decided { gate, decision }, Obs::Decided { subject, decision: d, .. }) => gate == subject && decision == d,
            (Atom::Approved(p), Obs::Decided { decision, by, .. }) => *decision == "approve" && p == by,
            (Atom::Zone(z), Obs::Zone(y)) => z == y,
            (Atom::Terminated(r), Obs::Terminated(s)) | (Atom::Recorded(r), Obs::Recorded(s)) => r == s,
            _ => false,
        }
    }

    /// The tool an atom names (for `called` and `refused`).
    pub fn tool(&self) -> Option<&str> {
        match self {
            Atom::Called { tool, .. } | Atom::Refused { tool, .. } => Some(tool),
            _ => None,
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Started(n) => write!(f, "started({n})"),
            Atom::Completed(n) => write!(f, "completed({n})"),
            Atom::Failed(n) => write!(f, "failed({n})"),
            Atom::Called { tool, by: None } => write!(f, "called({tool})"),
            Atom::Called { tool, by: Some(a) } => write!(f, "called({tool}, by: {a})"),
            Atom::Refused { tool, by: None } => write!(f, "refused({tool})"),
            Atom::Refused { tool, by: Some(a) } => write!(f, "refused({tool}, by: {a})"),
            Atom::HandedOff { from, to } => write!(f, "handed_off({from}, {to})"),
            Atom::Outcome { gate, outcome } => write!(f, "outcome({gate}, {outcome})"),
            Atom::Decided { gate, decision } => write!(f, "decided({gate}, {decision})"),
            Atom::Zone(z) => write!(f, "zone({z})"),
            Atom::Terminated(r) => write!(f, "terminated({r})"),
            Atom::Approved(p) => write!(f, "approved({p})"),
            Atom::Recorded(r) => write!(f, "recorded({r})"),
        }
    }
}

/// A residual formula's id in an automaton (a state).
pub type State = u32;

/// Which atoms hold at one event: bit `i` is atom `i`.
pub type Mask = u64;

/// The most atoms one policy may have (one bit each in a [`Mask`]).
pub const MAX_ATOMS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum F {
    True,
    False,
    Atom(u32),
    Not(State),
    And(Box<[State]>),
    Or(Box<[State]>),
    Always(State),
    Eventually(State),
    Until(State, State),
    /// Weak until: `p W q` (`never p before q` is `(not p) W q`).
    WeakUntil(State, State),
    Within(u64, State),
}

const TRUE: State = 0;
const FALSE: State = 1;

/// A policy compiled by progression: states are residual formulas.
#[derive(Debug, Clone)]
pub struct Automaton {
    atoms: Vec<Atom>,
    nodes: Vec<F>,
    index: FxHashMap<F, State>,
    init: State,
    steps: FxHashMap<(State, Mask), State>,
    /// The last step taken, checked before the map: runs of events no atom
    /// describes repeat the same (state, 0) step.
    last: (State, Mask, State),
    ends: FxHashMap<State, bool>,
}

impl Automaton {
    /// Compiles a checked formula (with the top-level `=>` reading).
    pub fn new(formula: &Formula) -> Result<Automaton, String> {
        let mut a = Automaton {
            atoms: Vec::new(),
            nodes: Vec::new(),
            index: FxHashMap::default(),
            init: TRUE,
            steps: FxHashMap::default(),
            last: (FALSE, 0, FALSE),
            ends: FxHashMap::default(),
        };
        a.intern(F::True);
        a.intern(F::False);
        let top = match formula {
            Formula::Implies { lhs, rhs } => {
                let l = a.lower(lhs)?;
                let r = a.lower(rhs)?;
                let nl = a.not(l);
                let body = a.or(vec![nl, r]);
                a.intern(F::Always(body))
            }
            other => a.lower(other)?,
        };
        a.init = top;
        Ok(a)
    }

    fn lower(&mut self, f: &Formula) -> Result<State, String> {
        flow_syntax::stack::guarded(|| self.lower_level(f))
    }

    fn lower_level(&mut self, f: &Formula) -> Result<State, String> {
        Ok(match f {
            Formula::Bool { value } => {
                if *value {
                    TRUE
                } else {
                    FALSE
                }
            }
            Formula::Atom { name, args, by, .. } => {
                let atom = Atom::compile(name, args, by.as_deref())?;
                let i = match self.atoms.iter().position(|a| *a == atom) {
                    Some(i) => i,
                    None => {
                        if self.atoms.len() == MAX_ATOMS {
                            return Err(format!("a policy may use at most {MAX_ATOMS} distinct atoms"));
                        }
                        self.atoms.push(atom);
                        self.atoms.len() - 1
                    }
                };
                self.intern(F::Atom(i as u32))
            }
            Formula::Not { body } => {
                let b = self.lower(body)?;
                self.not(b)
            }
            Formula::Never { body, before: None } => {
                let b = self.lower(body)?;
                let nb = self.not(b);
                self.intern(F::Always(nb))
            }
            Formula::Never { body, before: Some(q) } => {
                let b = self.lower(body)?;
                let q = self.lower(q)?;
                let nb = self.not(b);
                self.intern(F::WeakUntil(nb, q))
            }
            Formula::Always { body } => {
                let b = self.lower(body)?;
                self.intern(F::Always(b))
            }
            Formula::Eventually { body } => {
                let b = self.lower(body)?;
                self.intern(F::Eventually(b))
            }
            Formula::Within { steps, body } => {
                let b = self.lower(body)?;
                self.intern(F::Within(*steps, b))
            }
            Formula::Until { lhs, rhs } => {
                let l = self.lower(lhs)?;
                let r = self.lower(rhs)?;
                self.intern(F::Until(l, r))
            }
            Formula::And { lhs, rhs } => {
                let l = self.lower(lhs)?;
                let r = self.lower(rhs)?;
                self.and(vec![l, r])
            }
            Formula::Or { lhs, rhs } => {
                let l = self.lower(lhs)?;
                let r = self.lower(rhs)?;
                self.or(vec![l, r])
            }
            Formula::Implies { lhs, rhs } => {
                let l = self.lower(lhs)?;
                let r = self.lower(rhs)?;
                let nl = self.not(l);
                self.or(vec![nl, r])
            }
        })
    }

    fn intern(&mut self, f: F) -> State {
        if let Some(&id) = self.index.get(&f) {
            return id;
        }
        let id = self.nodes.len() as State;
        self.nodes.push(f.clone());
        self.index.insert(f, id);
        id
    }

    fn not(&mut self, x: State) -> State {
        match &self.nodes[x as usize] {
            F::True => FALSE,
            F::False => TRUE,
            F::Not(y) => *y,
            _ => self.intern(F::Not(x)),
        }
    }

    fn and(&mut self, items: Vec<State>) -> State {
        self.junction(items, true)
    }

    fn or(&mut self, items: Vec<State>) -> State {
        self.junction(items, false)
    }

    /// `and` (conjunction) or `or`, flattened, sorted and deduplicated, with
    /// units dropped, zeros absorbing, and `x` next to `not x` collapsing.
    fn junction(&mut self, items: Vec<State>, conj: bool) -> State {
        let (unit, zero) = if conj { (TRUE, FALSE) } else { (FALSE, TRUE) };
        let mut flat: Vec<State> = Vec::with_capacity(items.len());
        for x in items {
            match &self.nodes[x as usize] {
                F::And(ys) if conj => flat.extend_from_slice(ys),
                F::Or(ys) if !conj => flat.extend_from_slice(ys),
                _ => flat.push(x),
            }
        }
        flat.retain(|&x| x != unit);
        if flat.contains(&zero) {
            return zero;
        }
        flat.sort_unstable();
        flat.dedup();
        for &x in &flat {
            if let F::Not(y) = self.nodes[x as usize] {
                if flat.binary_search(&y).is_ok() {
                    return zero;
                }
            }
        }
        match flat.len() {
            0 => unit,
            1 => flat[0],
            _ => self.intern(if conj { F::And(flat.into()) } else { F::Or(flat.into()) }),
        }
    }

    /// The initial state.
    pub fn init(&self) -> State {
        self.init
    }

    /// The atoms, in bit order.
    pub fn atoms(&self) -> &[Atom] {
        &self.atoms
    }

    /// Which atoms hold at an event.
    pub fn mask(&self, obs: &Obs) -> Mask {
        let mut m = 0;
        for (i, atom) in self.atoms.iter().enumerate() {
            if atom.holds(obs) {
                m |= 1 << i;
            }
        }
        m
    }

    /// The state after one event of the policy trace.
    pub fn step(&mut self, s: State, mask: Mask) -> State {
        if s <= FALSE {
            return s;
        }
        if self.last.0 == s && self.last.1 == mask {
            return self.last.2;
        }
        let t = match self.steps.get(&(s, mask)) {
            Some(&t) => t,
            None => {
                let t = self.progress(s, mask);
                self.steps.insert((s, mask), t);
                t
            }
        };
        self.last = (s, mask, t);
        t
    }

    fn progress(&mut self, s: State, m: Mask) -> State {
        match self.nodes[s as usize].clone() {
            F::True => TRUE,
            F::False => FALSE,
            F::Atom(i) => {
                if m & (1 << i) != 0 {
                    TRUE
                } else {
                    FALSE
                }
            }
            F::Not(x) => {
                let p = self.progress(x, m);
                self.not(p)
            }
            F::And(xs) => {
                let mut out = Vec::with_capacity(xs.len());
                for &x in xs.iter() {
                    let p = self.progress(x, m);
                    if p == FALSE {
                        return FALSE;
                    }
                    out.push(p);
                }
                self.and(out)
            }
            F::Or(xs) => {
                let mut out = Vec::with_capacity(xs.len());
                for &x in xs.iter() {
                    let p = self.progress(x, m);
                    if p == TRUE {
                        return TRUE;
                    }
                    out.push(p);
                }
                self.or(out)
            }
            F::Always(x) => {
                let p = self.progress(x, m);
                self.and(vec![p, s])
            }
            F::Eventually(x) => {
                let p = self.progress(x, m);
                self.or(vec![p, s])
            }
            F::Until(p, q) | F::WeakUntil(p, q) => {
                let pq = self.progress(q, m);
                if pq == TRUE {
                    return TRUE;
                }
                let pp = self.progress(p, m);
                let keep = self.and(vec![pp, s]);
                self.or(vec![pq, keep])
            }
            F::Within(n, x) => {
                let p = self.progress(x, m);
                if p == TRUE {
                    return TRUE;
                }
                let rest = if n == 0 { FALSE } else { self.intern(F::Within(n - 1, x)) };
                self.or(vec![p, rest])
            }
        }
    }

    /// Whether a finite trace may end in this state (the residual holds of
    /// the empty rest of the trace).
    pub fn accepts_end(&mut self, s: State) -> bool {
        if let Some(&b) = self.ends.get(&s) {
            return b;
        }
        let b = match self.nodes[s as usize].clone() {
            F::True => true,
            F::False | F::Atom(_) | F::Eventually(_) | F::Until(..) | F::Within(..) => false,
            F::Always(_) | F::WeakUntil(..) => true,
            F::Not(x) => !self.accepts_end(x),
            F::And(xs) => xs.iter().all(|&x| self.accepts_end(x)),
            F::Or(xs) => xs.iter().any(|&x| self.accepts_end(x)),
        };
        self.ends.insert(s, b);
        b
    }

    /// Whether the state is violated whatever follows.
    pub fn is_false(s: State) -> bool {
        s == FALSE
    }

    /// Whether the state holds whatever follows.
    pub fn is_true(s: State) -> bool {
        s == TRUE
    }

    /// How many residual formulas exist so far (monitor states and their
    /// subformulas).
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// The residual formula of a state, for messages: what is still owed.
    /// The policy itself, when it is one of the conjuncts still to hold
    /// (an `always` re-armed at every step), is left out: the message names
    /// the open obligation.
    pub fn residual(&self, s: State) -> String {
        let mut out = String::new();
        match &self.nodes[s as usize] {
            F::And(xs) if xs.contains(&self.init) && xs.len() > 1 => {
                let rest: Vec<State> = xs.iter().copied().filter(|&x| x != self.init).collect();
                for (i, x) in rest.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" and ");
                    }
                    self.render(*x, &mut out);
                }
            }
            _ => self.render(s, &mut out),
        }
        out
    }

    fn render(&self, s: State, out: &mut String) {
        let wrap = |me: &Automaton, x: State, out: &mut String| {
            let simple = matches!(me.nodes[x as usize], F::True | F::False | F::Atom(_));
            if !simple {
                out.push('(');
            }
            me.render(x, out);
            if !simple {
                out.push(')');
            }
        };
        match &self.nodes[s as usize] {
            F::True => out.push_str("true"),
            F::False => out.push_str("false"),
            F::Atom(i) => out.push_str(&self.atoms[*i as usize].to_string()),
            F::Not(x) => {
                out.push_str("not ");
                wrap(self, *x, out);
            }
            F::And(xs) | F::Or(xs) => {
                let sep = if matches!(self.nodes[s as usize], F::And(_)) { " and " } else { " or " };
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    wrap(self, *x, out);
                }
            }
            F::Always(x) => {
                out.push_str("always ");
                wrap(self, *x, out);
            }
            F::Eventually(x) => {
                out.push_str("eventually ");
                wrap(self, *x, out);
            }
            F::Until(p, q) => {
                wrap(self, *p, out);
                out.push_str(" until ");
                wrap(self, *q, out);
            }
            F::WeakUntil(p, q) => {
                out.push_str("never ");
                match &self.nodes[*p as usize] {
                    F::Not(x) => wrap(self, *x, out),
                    _ => {
                        out.push_str("not ");
                        wrap(self, *p, out)
                    }
                }
                out.push_str(" before ");
                wrap(self, *q, out);
            }
            F::Within(n, x) => {
                out.push_str(&format!("within {n} steps "));
                wrap(self, *x, out);
            }
        }
    }
}

/// A policy verdict over one finite trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Holds, whatever the verdict of the rest would have been.
    Holds,
    /// Violated at the event with this `seq` (a safety violation), or at
    /// the end of the trace (`at_end`: an obligation left open).
    Violated { seq: u64, at_end: bool, owed: String },
}

/// Runs a compiled policy over trace events, one at a time.
#[derive(Debug, Clone)]
pub struct Monitor {
    pub automaton: Automaton,
    state: State,
    violated_at: Option<u64>,
    last_seq: u64,
}

impl Monitor {
    pub fn new(automaton: Automaton) -> Monitor {
        let state = automaton.init();
        Monitor { automaton, state, violated_at: None, last_seq: 0 }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// What the state would be after this event, without taking it (for a
    /// monitor that must act *before* an event takes effect).
    pub fn peek(&mut self, body: &Body) -> State {
        match Obs::of(body) {
            Some(obs) => {
                let m = self.automaton.mask(&obs);
                self.automaton.step(self.state, m)
            }
            None => self.state,
        }
    }

    /// Feeds one event. Returns true when this event violated the policy
    /// (the first time only).
    pub fn feed(&mut self, seq: u64, body: &Body) -> bool {
        self.last_seq = seq;
        match Obs::of(body) {
            Some(obs) => self.feed_obs(seq, &obs),
            None => false,
        }
    }

    /// [`Monitor::feed`] for an event already observed (a [`MonitorSet`]
    /// observes each event once for all its monitors).
    pub fn feed_obs(&mut self, seq: u64, obs: &Obs) -> bool {
        self.last_seq = seq;
        let m = self.automaton.mask(obs);
        let before = self.state;
        self.state = self.automaton.step(before, m);
        if Automaton::is_false(self.state) && !Automaton::is_false(before) {
            self.violated_at = Some(seq);
            return true;
        }
        false
    }

    /// The verdict if the trace ended now.
    pub fn verdict(&mut self) -> Verdict {
        if let Some(seq) = self.violated_at {
            return Verdict::Violated { seq, at_end: false, owed: String::new() };
        }
        if self.automaton.accepts_end(self.state) {
            Verdict::Holds
        } else {
            Verdict::Violated { seq: self.last_seq, at_end: true, owed: self.automaton.residual(self.state) }
        }
    }
}

/// Several monitors over the same events: each event is observed once.
#[derive(Debug, Clone, Default)]
pub struct MonitorSet {
    pub monitors: Vec<Monitor>,
    last_seq: u64,
}

impl MonitorSet {
    pub fn new(monitors: Vec<Monitor>) -> MonitorSet {
        MonitorSet { monitors, last_seq: 0 }
    }

    /// Feeds one event to every monitor; returns the indices of the
    /// monitors this event violated (usually none: no allocation then).
    pub fn feed(&mut self, seq: u64, body: &Body, violated: &mut Vec<usize>) {
        self.last_seq = seq;
        let Some(obs) = Obs::of(body) else { return };
        for (i, m) in self.monitors.iter_mut().enumerate() {
            if m.feed_obs(seq, &obs) {
                violated.push(i);
            }
        }
    }

    /// Every monitor's verdict if the trace ended now.
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        let last = self.last_seq;
        self.monitors
            .iter_mut()
            .map(|m| {
                m.last_seq = m.last_seq.max(last);
                m.verdict()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
