//! Checking workflows, machines and policies.

use crate::check::{Checker, WorkflowCtx};
use crate::ir::{self, Loc, Value};
use crate::spec::{self, AtomArgKind, BlockSpec, Kind, Target, V};
use crate::types::{FieldTy, Ty};
use flow_diagnostics::{closest_name, codes, Diagnostic, DiagnosticMut, FileId, Label, Span};
use flow_syntax::ast::{self, Entry, ExprKind, FormulaKind, NodeTarget};
use indexmap::{IndexMap, IndexSet};

fn loc(file: FileId, span: Span) -> Loc {
    Loc { file: file.0, start: span.start, end: span.end }
}

/// The names a policy's atoms may refer to.
#[derive(Debug, Default)]
pub(crate) struct PolicyScope {
    pub nodes: IndexSet<String>,
    pub gates: IndexSet<String>,
    pub records: IndexSet<String>,
}

impl Checker<'_> {
    /// Runs `f` with diagnostics discarded: for looking ahead at types
    /// that will be checked (and reported) in their own place.
    pub(crate) fn quietly<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let mark = self.diagnostics.len();
        let result = f(self);
        self.diagnostics.truncate(mark);
        result
    }

    /// The type of property `key` of top-level declaration `name`, lowered
    /// quietly (it is reported where it is written).
    pub(crate) fn decl_prop_type(&mut self, name: &str, key: &str) -> Option<Ty> {
        let global = self.globals.get(name)?.clone();
        let ast = std::rc::Rc::clone(&self.files[global.item.0].ast);
        let ast::Item::Decl(decl) = &ast.items[global.item.1] else { return None };
        let value = decl.body.as_ref()?.entries.iter().find_map(|e| match e {
            Entry::Property(p) if p.key.text == key => Some(&p.value),
            _ => None,
        })?;
        let saved = self.file;
        self.file = global.file;
        let ty = self.quietly(|c| c.lower_type(value));
        self.file = saved;
        Some(ty)
    }

    pub(crate) fn block_prop<'b>(block: Option<&'b ast::Block>, key: &str) -> Option<&'b ast::Expr> {
        block?.entries.iter().find_map(|e| match e {
            Entry::Property(p) if p.key.text == key => Some(&p.value),
            _ => None,
        })
    }

    pub(crate) fn check_workflow(&mut self, decl: &ast::Decl) -> Option<ir::Workflow> {
        let body = decl.body.as_ref()?;
        let owner = format!("workflow `{}`", decl.name.text);
        // Pass 1: the nodes and what their names mean in expressions.
        let mut ctx = WorkflowCtx { name: decl.name.text.clone(), ..WorkflowCtx::default() };
        if let Some(input) = Self::block_prop(Some(body), "input") {
            ctx.input = self.quietly(|c| c.lower_type(input));
        } else {
            ctx.input = Ty::Any;
        }
        let mut names: IndexMap<String, Span> = IndexMap::new();
        for entry in &body.entries {
            let (name, span) = match entry {
                Entry::Node(n) => (&n.name.text, n.name.span),
                Entry::Gate(g) => (&g.name.text, g.name.span),
                _ => continue,
            };
            if let Some(first) = names.get(name) {
                let first = *first;
                let file = self.file;
                self.error(codes::DUPLICATE_DECLARATION, span, format!("`{name}` is declared more than once in {owner}"))
                    .with_label(Label::secondary(file, first, "first declared here"))
                    .labels[0]
                    .message = "declared again".into();
                continue;
            }
            names.insert(name.clone(), span);
            let (kind, detail) = match entry {
                Entry::Node(node) => {
                    let output = self.node_output(node);
                    let detail = if self.index_symbols {
                        let target = match &node.target {
                            NodeTarget::Name(t) => t.text.clone(),
                            NodeTarget::List(items, _) => {
                                format!("[{}]", items.iter().map(|i| i.text.as_str()).collect::<Vec<_>>().join(", "))
                            }
                            NodeTarget::None => String::new(),
                        };
                        let target = if target.is_empty() { target } else { format!(" {target}") };
                        format!("node {name}: {}{target} — output {output}", node.kind.text)
                    } else {
                        String::new()
                    };
                    ctx.nodes.insert(name.clone(), (span, output, node.kind.text.clone()));
                    ("node", detail)
                }
                Entry::Gate(gate) => ("gate", format!("gate {name}: {} -> {}", gate.from.text, gate.to.text)),
                _ => continue,
            };
            if !self.index_symbols {
                continue;
            }
            self.symbols.defs.push(crate::SymbolDef {
                key: format!("{}::{name}", decl.name.text),
                name: name.clone(),
                kind: kind.to_string(),
                file: self.file,
                span,
                container: Some(decl.name.text.clone()),
                detail,
            });
        }
        self.runtime_names(body, &mut ctx);
        // Map nodes produce a list of their target's outputs.
        let map_targets: Vec<(String, String)> = body
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::Node(n) if n.kind.text == "map" => match &n.target {
                    NodeTarget::Name(t) => Some((n.name.text.clone(), t.text.clone())),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        for (map, target) in map_targets {
            if let Some(item) = ctx.nodes.get(&target).map(|n| n.1.clone()) {
                if let Some(entry) = ctx.nodes.get_mut(&map) {
                    if entry.1 == Ty::Any {
                        entry.1 = Ty::list(item);
                    }
                }
            }
        }
        self.workflow = Some(ctx);

        let (props, rest) = self.check_block(body, &spec::WORKFLOW.block, decl.name.span, &owner, &Default::default());
        let mut workflow = ir::Workflow {
            name: decl.name.text.clone(),
            props,
            nodes: ir::NameMap::default(),
            edges: Vec::new(),
            gates: ir::NameMap::default(),
            transfers: Vec::new(),
            handlers: Vec::new(),
            policies: Vec::new(),
            loc: loc(self.file, decl.name.span),
        };
        let mut policies = Vec::new();
        let mut replan_scopes = Vec::new();
        for entry in rest {
            match entry {
                Entry::Node(node) => {
                    if workflow.nodes.contains_key(&node.name.text) || workflow.gates.contains_key(&node.name.text) {
                        continue;
                    }
                    let ir = self.check_node(node);
                    workflow.nodes.insert(ir.name.clone(), ir);
                }
                Entry::Edge(edge) => self.check_edge(edge, &mut workflow.edges),
                Entry::Gate(gate) => {
                    if workflow.gates.contains_key(&gate.name.text) || names.get(&gate.name.text) != Some(&gate.name.span) {
                        continue;
                    }
                    let ir = self.check_gate(gate);
                    if let Some(scope) = Self::block_prop(Some(&gate.body), "replan_scope") {
                        replan_scopes.push((ir.name.clone(), scope.span));
                    }
                    workflow.gates.insert(ir.name.clone(), ir);
                }
                Entry::Transfer(transfer) => {
                    if let Some(ir) = self.check_transfer(transfer) {
                        workflow.transfers.push(ir);
                    }
                }
                Entry::Handler(handler) => {
                    if let Some(ir) = self.check_handler(handler, spec::WORKFLOW_EVENTS, &owner) {
                        self.refuse_dead_letter_action(&ir, handler.span);
                        workflow.handlers.push(ir);
                    }
                }
                Entry::Policy(policy) => policies.push(policy.clone()),
                Entry::Property(_) | Entry::Record(_) => {}
            }
        }
        self.refuse_split_scopes(&workflow, &replan_scopes);
        let records = self.record_names(&decl.name.text, body).into_keys().collect();
        let scope =
            PolicyScope { nodes: workflow.nodes.keys().cloned().collect(), gates: workflow.gates.keys().cloned().collect(), records };
        for policy in &policies {
            if let Some(p) = self.check_policy(policy, &scope) {
                workflow.policies.push(p);
            }
        }
        if let Some(ctx) = self.workflow.take() {
            self.workflows_seen.insert(ctx.name.clone(), ctx);
        }
        Some(workflow)
    }

    /// What a node's name means in expressions: its output type.
    fn node_output(&mut self, node: &ast::NodeStmt) -> Ty {
        if let Some(output) = Self::block_prop(node.body.as_ref(), "output") {
            return self.quietly(|c| c.lower_type(output));
        }
        let target = match &node.target {
            NodeTarget::Name(name) => Some(name.text.as_str()),
            NodeTarget::List(..) | NodeTarget::None => None,
        };
        match (node.kind.text.as_str(), target) {
            ("tool", Some(tool)) => self.decl_prop_type(tool, "output").unwrap_or(Ty::Any),
            ("flow", Some(flow)) => self.decl_prop_type(flow, "output").unwrap_or(Ty::Any),
            ("compute", Some(function)) => self.decl_prop_type(function, "output").unwrap_or(Ty::Any),
            ("human", _) => {
                let mut fields = IndexMap::new();
                fields.insert(
                    "decision".to_string(),
                    FieldTy { ty: Ty::Enum { values: spec::DECISIONS.iter().map(|d| d.to_string()).collect() }, optional: false },
                );
                fields.insert("comment".to_string(), FieldTy { ty: Ty::String, optional: true });
                Ty::Record { fields }
            }
            ("loop", _) => {
                let mut fields = IndexMap::new();
                fields.insert("rounds".to_string(), FieldTy { ty: Ty::Int, optional: false });
                fields.insert("converged".to_string(), FieldTy { ty: Ty::Bool, optional: false });
                Ty::Record { fields }
            }
            ("end", _) => Ty::Null,
            ("join", _) if Self::votes(node) => tally_type(),
            _ => Ty::Any,
        }
    }

    /// Whether a join's rule is a vote (`majority(key)`, `quorum(n, key)`,
    /// `weighted(key, {…})`).
    fn votes(node: &ast::NodeStmt) -> bool {
        let Some(rule) = Self::block_prop(node.body.as_ref(), "rule") else { return false };
        match &rule.kind {
            ExprKind::Call { callee, args } => match (&callee.kind, args.len()) {
                (ExprKind::Name(n), 1) => n == "majority",
                (ExprKind::Name(n), 2) => n == "quorum" || n == "weighted",
                _ => false,
            },
            _ => false,
        }
    }

    /// A vote's key must be a field of every branch's output, and a vote
    /// merges nothing, so `conflicts: fail` has nothing to act on.
    fn check_vote(&mut self, node: &ast::NodeStmt, key: &str, branches: &[String]) {
        let Some(rule) = Self::block_prop(node.body.as_ref(), "rule") else { return };
        for branch in branches {
            let ty = self.workflow.as_ref().and_then(|w| w.nodes.get(branch)).map(|n| self.expand(&n.1));
            if let Some(Ty::Record { fields }) = ty {
                if !fields.contains_key(key) {
                    self.error(
                        codes::UNKNOWN_FIELD,
                        rule.span,
                        format!("the output of branch `{branch}` has no field `{key}` to vote with"),
                    )
                    .with_primary_message("counted on every branch")
                    .with_note(format!("`{branch}`'s fields: {}", fields.keys().cloned().collect::<Vec<_>>().join(", ")));
                }
            }
        }
        if let Some(conflicts) =
            Self::block_prop(node.body.as_ref(), "conflicts").filter(|c| matches!(&c.kind, ExprKind::Name(n) if n == "fail"))
        {
            self.error(codes::NOT_SUPPORTED, conflicts.span, "`conflicts: fail` with a vote is not supported")
                .with_primary_message("a vote merges nothing")
                .with_help("remove `conflicts`; a split vote has no result (`decided` is false)");
        }
    }

    fn check_node(&mut self, node: &ast::NodeStmt) -> ir::Node {
        let owner = format!("node `{}`", node.name.text);
        let output = self.workflow.as_ref().and_then(|w| w.nodes.get(&node.name.text)).map(|n| n.1.clone()).unwrap_or(Ty::Any);
        let Some(spec) = spec::node_spec(&node.kind.text) else {
            let kinds: Vec<&str> = spec::NODE_KINDS.iter().map(|k| k.kind).collect();
            let mut d =
                Diagnostic::new(codes::UNKNOWN_VARIANT, self.file, node.kind.span, format!("unknown node kind `{}`", node.kind.text))
                    .with_primary_message("not a node kind")
                    .with_note(format!("node kinds: {}", kinds.join(", ")));
            if let Some(s) = closest_name(&node.kind.text, kinds.iter().copied()) {
                d = d.with_suggestion(s);
            }
            self.diagnostics.push(d);
            let props = ir::NameMap::default();
            return ir::Node::new(&node.name.text, ir::NodeKind::Invalid, Vec::new(), &props, output, loc(self.file, node.name.span));
        };
        let target = self.check_target(node, spec.target);
        self.refuse_unsupported(node, spec.kind);
        self.tool_input = None;
        if spec.kind == "tool" {
            if let Some(tool) = target.first() {
                self.tool_input = self.decl_prop_type(tool, "input");
            }
        }
        let props_spec = std::rc::Rc::clone(
            self.node_props.entry(spec.kind).or_insert_with(|| spec::NODE_COMMON.iter().chain(spec.props).cloned().collect()),
        );
        // Every node that completes with an output may write records.
        // A parallel node completes as its branches start, with no output.
        let records = !matches!(spec.kind, "end" | "parallel" | "flow");
        let entries: &[spec::EntryKind] = match (spec.events.is_empty(), records) {
            (true, false) => &[],
            (true, true) => &[spec::EntryKind::Record],
            (false, false) => &[spec::EntryKind::Handler],
            (false, true) => &[spec::EntryKind::Handler, spec::EntryKind::Record],
        };
        let block_spec = BlockSpec { props: &props_spec, entries, events: spec.events };
        let empty = ast::Block { entries: Vec::new(), span: node.name.span };
        let body = node.body.as_ref().unwrap_or(&empty);
        // A compute node's `let` names are in scope wherever the block
        // uses them: the `let` is checked first. A node that applies a
        // declared computation gives its `args` as a tool node does.
        let reordered = (spec.kind == "compute").then(|| crate::check::lets_first(body));
        let body = reordered.as_ref().unwrap_or(body);
        if spec.kind == "compute" {
            if let Some(function) = target.first() {
                self.tool_input = self.decl_prop_type(function, "input");
            }
        }
        let (props, rest) = self.check_block(body, &block_spec, node.name.span, &owner, &Default::default());
        if spec.kind == "compute" {
            self.extra_vars.clear();
            // An undefined computation was reported: the node still names one.
            let named = match &node.target {
                NodeTarget::Name(name) => Some(&name.text),
                _ => None,
            };
            self.check_compute_form(node, named, body);
            if target.is_empty() {
                self.check_computed_value(&props, &output, body);
            }
        }
        self.tool_input = None;
        let mut handlers = Vec::new();
        for entry in &rest {
            if let Entry::Handler(handler) = entry {
                if let Some(ir) = self.check_handler(handler, spec.events, &owner) {
                    handlers.push(ir);
                }
            }
        }
        if let Some(ir::Value::JoinRule { key: Some(key), .. }) = props.get("rule") {
            self.check_vote(node, &key.clone(), &target);
        }
        let records = self.check_records(&rest, false);
        let kind = ir::NodeKind::parse(spec.kind).unwrap_or(ir::NodeKind::Invalid);
        ir::Node { handlers, records, ..ir::Node::new(&node.name.text, kind, target, &props, output, loc(self.file, node.name.span)) }
    }

    fn check_target(&mut self, node: &ast::NodeStmt, target: Target) -> Vec<String> {
        match (target, &node.target) {
            (Target::Decl(kind), NodeTarget::Name(name)) => {
                if self.resolve(&name.text, name.span, &[kind]).is_some() {
                    vec![name.text.clone()]
                } else {
                    Vec::new()
                }
            }
            (Target::Node, NodeTarget::Name(name)) => {
                if self.node_exists(&name.text, name.span) {
                    vec![name.text.clone()]
                } else {
                    Vec::new()
                }
            }
            (Target::Reason, NodeTarget::Name(name)) => vec![name.text.clone()],
            (Target::Nodes, NodeTarget::List(names, span)) => {
                if names.is_empty() {
                    self.error(codes::INVALID_VALUE, *span, format!("`{}` needs at least one node", node.kind.text));
                }
                names.iter().filter(|n| self.node_exists(&n.text, n.span)).map(|n| n.text.clone()).collect()
            }
            (Target::Nodes, NodeTarget::Name(name)) => {
                self.error(codes::INVALID_VALUE, name.span, format!("`{}` takes a list of nodes `[a, b]`", node.kind.text));
                Vec::new()
            }
            (Target::None | Target::DeclOrNone(_), NodeTarget::None) => Vec::new(),
            (Target::DeclOrNone(kind), NodeTarget::Name(name)) => {
                if self.resolve(&name.text, name.span, &[kind]).is_some() {
                    vec![name.text.clone()]
                } else {
                    Vec::new()
                }
            }
            (Target::None, NodeTarget::Name(name)) => {
                self.error(codes::INVALID_VALUE, name.span, format!("`{}` takes no target", node.kind.text))
                    .with_primary_message("not expected here")
                    .with_help(format!("write `node {}: {} {{ … }}`", node.name.text, node.kind.text));
                Vec::new()
            }
            (_, NodeTarget::List(_, span)) => {
                let expected = match target {
                    Target::Decl(kind) => format!("{} name", kind.article()),
                    Target::Node => "a node name".into(),
                    Target::None => "no target".into(),
                    Target::DeclOrNone(kind) => format!("{} name or no target", kind.article()),
                    _ => "a name".into(),
                };
                self.error(codes::INVALID_VALUE, *span, format!("`{}` takes {expected}, not a list", node.kind.text));
                Vec::new()
            }
            (_, NodeTarget::None) => {
                let expected = match target {
                    Target::Decl(kind) => format!("{} name", kind.article()),
                    Target::Nodes => "a list of nodes `[a, b]`".into(),
                    Target::Node => "a node name".into(),
                    _ => "a name (the reason)".into(),
                };
                self.error(codes::INVALID_VALUE, node.kind.span, format!("`{}` takes {expected} after the kind", node.kind.text))
                    .with_primary_message("the target is missing");
                Vec::new()
            }
        }
    }

    pub(crate) fn node_exists(&mut self, name: &str, span: Span) -> bool {
        let Some(workflow) = &self.workflow else { return false };
        if workflow.nodes.contains_key(name) {
            if self.index_symbols {
                let key = format!("{}::{name}", workflow.name);
                self.reference(key, span);
            }
            return true;
        }
        let count = workflow.nodes.len();
        let suggestion = self.closest_node(name);
        self.undefined_with(name, span, "node", suggestion, count == 0);
        false
    }

    /// The node of the current workflow nearest to `name`, from an index
    /// built once per workflow (`NameIndex`), not a scan per miss.
    pub(crate) fn closest_node(&mut self, name: &str) -> Option<String> {
        let workflow = self.workflow.as_ref()?;
        let count = workflow.nodes.len();
        let fresh = matches!(&self.node_suggestions, Some((w, c, _)) if *w == workflow.name && *c == count);
        if !fresh {
            let index = flow_diagnostics::suggest::NameIndex::new(workflow.nodes.keys().cloned());
            self.node_suggestions = Some((workflow.name.clone(), count, index));
        }
        self.node_suggestions.as_ref().and_then(|(_, _, index)| index.closest(name)).map(str::to_string)
    }

    fn check_edge(&mut self, edge: &ast::EdgeStmt, out: &mut Vec<ir::Edge>) {
        // Every hop is checked (no short circuit), so each unknown one is reported.
        let unknown = edge.path.iter().filter(|hop| !self.node_exists(&hop.text, hop.span)).count();
        let all_known = unknown == 0;
        let guard = match &edge.guard {
            None => ir::Guard::Always,
            Some(ast::EdgeGuard::Else(_)) => ir::Guard::Else,
            Some(ast::EdgeGuard::When(condition)) => match self.check_value(&V::Pred(spec::Env::Nodes), condition, &Default::default()) {
                Value::Expr(e) => ir::Guard::When(e),
                _ => ir::Guard::Always,
            },
        };
        if !all_known {
            return;
        }
        let hops = edge.path.len() - 1;
        for (i, pair) in edge.path.windows(2).enumerate() {
            // A guard applies to the last hop of a chain.
            let hop_guard = if i + 1 == hops { guard.clone() } else { ir::Guard::Always };
            out.push(ir::Edge {
                from: pair[0].text.clone(),
                to: pair[1].text.clone(),
                guard: hop_guard,
                loc: loc(self.file, pair[0].span.to(pair[1].span)),
            });
        }
    }

    fn check_gate(&mut self, gate: &ast::GateStmt) -> ir::Gate {
        let owner = format!("gate `{}`", gate.name.text);
        self.node_exists(&gate.from.text, gate.from.span);
        self.node_exists(&gate.to.text, gate.to.span);
        let (props, rest) = self.check_block(&gate.body, &spec::GATE_BLOCK, gate.name.span, &owner, &Default::default());
        self.check_trigger_events(gate);
        let mut handlers = Vec::new();
        for entry in &rest {
            if let Entry::Handler(handler) = entry {
                if let Some(ir) = self.check_handler(handler, spec::GATE_EVENTS, &owner) {
                    handlers.push(ir);
                }
            }
        }
        let records = self.check_records(&rest, true);
        ir::Gate {
            name: gate.name.text.clone(),
            from: gate.from.text.clone(),
            to: gate.to.text.clone(),
            props,
            handlers,
            records,
            loc: loc(self.file, gate.name.span),
        }
    }

    /// Node forms the runtime does not run yet are refused (E0116) rather
    /// than accepted: a `flow` node (a sub-flow) would fail every run that
    /// reaches it, and a human node's answer is `{ decision, comment }`,
    /// whatever `output` it declares.
    /// A compute node either says everything itself (`output` and `value`,
    /// perhaps `let`) or applies a declared computation to its `args`.
    fn check_compute_form(&mut self, node: &ast::NodeStmt, function: Option<&String>, body: &ast::Block) {
        let given = |key: &str| Self::block_prop(Some(body), key);
        match function {
            Some(function) => {
                for key in ["output", "let", "value"] {
                    if let Some(value) = given(key) {
                        self.error(codes::INVALID_VALUE, value.span, format!("`{key}` belongs to the computation `{function}`"))
                            .with_primary_message("not on a node that applies a computation")
                            .with_help(format!("give `{function}` its input in `args`, or drop the target and write `{key}` here"));
                    }
                }
                let wants_input = self.decl_prop_type(function, "input").is_some_and(|t| t != Ty::Any);
                if wants_input && given("args").is_none() {
                    self.error(codes::MISSING_PROPERTY, node.name.span, format!("node `{}` gives `{function}` no `args`", node.name.text))
                        .with_help("add `args: { field: expr, … }`, the computation's input");
                }
            }
            None => {
                if let Some(args) = given("args") {
                    self.error(codes::INVALID_VALUE, args.span, "`args` needs a computation to apply")
                        .with_primary_message("no target")
                        .with_help(format!("write `node {}: compute NAME {{ args: … }}`", node.name.text));
                }
                for key in ["output", "value"] {
                    if given(key).is_none() {
                        self.error(codes::MISSING_PROPERTY, node.name.span, format!("compute node `{}` has no `{key}`", node.name.text))
                            .with_help("a compute node without a target gives its `output` type and its `value`");
                    }
                }
            }
        }
    }

    /// A computation's `value` must be of its `output` type.
    pub(crate) fn check_computed_value(&mut self, props: &ir::NameMap<ir::Value>, output: &Ty, body: &ast::Block) {
        let Some(ir::Value::Expr(value)) = props.get("value") else { return };
        if self.assignable(&value.ty, output) {
            return;
        }
        let Some(at) = Self::block_prop(Some(body), "value") else { return };
        let output = self.expand(output);
        let why = self.first_difference(&value.ty, &output, "");
        self.error(codes::TYPE_MISMATCH, at.span, format!("the computed value should be {output}, but this is {}", value.ty))
            .with_primary_message(format!("this is {}", value.ty))
            .with_note(why);
    }

    /// Where a value of type `have` first departs from `want`: a field
    /// missing or of another type (its path), else the two types.
    fn first_difference(&self, have: &Ty, want: &Ty, path: &str) -> String {
        if let (Ty::Record { fields: have }, Ty::Record { fields: want }) = (self.expand(have), self.expand(want)) {
            for (name, field) in &want {
                let at = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                match have.get(name) {
                    None if !field.optional => return format!("field `{at}` is missing"),
                    Some(h) if !self.assignable(&h.ty, &field.ty) => return self.first_difference(&h.ty, &field.ty, &at),
                    _ => {}
                }
            }
        }
        let at = if path.is_empty() { "the value".to_string() } else { format!("field `{path}`") };
        format!("{at} should be {}, but is {}", self.expand(want), self.expand(have))
    }

    fn refuse_unsupported(&mut self, node: &ast::NodeStmt, kind: &str) {
        if kind == "flow" {
            self.error(codes::NOT_SUPPORTED, node.kind.span, "`flow` nodes (sub-flows) are not supported yet")
                .with_primary_message("no run can run this node")
                .with_help("inline the other workflow's nodes here for now");
        }
        if kind == "parallel" {
            self.refuse_capped_fanout(node);
        }
        self.refuse_board_access(node, kind);
        if kind == "compute" {
            // A computed value is made at once, spends nothing and is the
            // same every time: these would be accepted and do nothing.
            for key in ["retry", "timeout", "budget", "task", "input"] {
                if let Some(value) = Self::block_prop(node.body.as_ref(), key) {
                    self.error(codes::NOT_SUPPORTED, value.span, format!("`{key}` on a compute node is not supported"))
                        .with_primary_message("a computed value is made at once, spends nothing and is the same every time")
                        .with_help(format!("remove `{key}`"));
                }
            }
        }
        if kind == "human" {
            if let Some(output) = Self::block_prop(node.body.as_ref(), "output") {
                self.error(codes::NOT_SUPPORTED, output.span, "`output` on a human node is not supported yet")
                    .with_primary_message("a human node's output is `{ decision, comment }`")
                    .with_help("remove `output`; read `NODE.decision` and `NODE.comment`");
            }
        }
    }

    /// Blackboards are appended to by the nodes that produce an output of
    /// their own (agent, tool and human nodes) and read by agent nodes
    /// (the entries go into the agent's context): `writes` and `reads`
    /// elsewhere would be accepted and do nothing, so they are refused.
    fn refuse_board_access(&mut self, node: &ast::NodeStmt, kind: &str) {
        let body = node.body.as_ref();
        if let Some(writes) = Self::block_prop(body, "writes").filter(|_| !matches!(kind, "agent" | "tool" | "human")) {
            self.error(codes::NOT_SUPPORTED, writes.span, format!("`writes` on a `{kind}` node is not supported yet"))
                .with_primary_message("nothing would be appended")
                .with_note("agent, tool and human nodes append their output to the blackboards they write");
        }
        if let Some(reads) = Self::block_prop(body, "reads").filter(|_| kind != "agent") {
            self.error(codes::NOT_SUPPORTED, reads.span, format!("`reads` on a `{kind}` node is not supported yet"))
                .with_primary_message("nothing would be read")
                .with_note("agent nodes read the blackboards they list: the entries go into the agent's context");
        }
    }

    /// A `parallel` node starts every branch at once (only the workflow's
    /// `concurrency` holds dispatch back): a `max_concurrency` below the
    /// number of branches would be accepted and broken, so it is refused
    /// (E0116); one at or above it holds.
    fn refuse_capped_fanout(&mut self, node: &ast::NodeStmt) {
        let ast::NodeTarget::List(branches, _) = &node.target else { return };
        let Some(cap) = Self::block_prop(node.body.as_ref(), "max_concurrency") else { return };
        let ast::ExprKind::Number { value, unit } = &cap.kind else { return };
        if unit.is_empty() && *value < branches.len() as f64 {
            self.error(codes::NOT_SUPPORTED, cap.span, "a `max_concurrency` below the number of branches is not supported yet")
                .with_primary_message(format!("{} branches, all started at once", branches.len()))
                .with_note("a parallel node starts every branch when it runs; the workflow's `concurrency` caps dispatch across the run")
                .with_help(format!(
                    "write `max_concurrency: {}` or more, or bound the run with the workflow's `concurrency`",
                    branches.len()
                ));
        }
    }

    /// A `dead_letter` handler acts for a sender that completed and whose
    /// message was refused: it ends the run or moves control elsewhere.
    /// An action that would act on the sender as if it were still running
    /// (`retry`, `skip`, `continue`, …) or wait on a human (`escalate`,
    /// `decide`) has no meaning there yet (E0116).
    fn refuse_dead_letter_action(&mut self, handler: &ir::Handler, span: Span) {
        let name = handler.action.name.as_str();
        if handler.events.contains(&ir::HandlerEvent::DeadLetter) && !spec::DEAD_LETTER_ACTIONS.contains(&name) {
            self.error(codes::NOT_SUPPORTED, span, format!("`{name}` on `dead_letter` is not supported yet"))
                .with_primary_message("the sender completed; its message was refused")
                .with_note(format!("a dead letter's handler may {}", spec::DEAD_LETTER_ACTIONS.join(", ")))
                .with_help("end the run (`terminate(reason)`), or move on (`goto(node)`, `revise(node)`)");
        }
    }

    /// A replan re-runs its scope from the scope's entry (the node that
    /// leads to every other, `rerun::scope_entry`) and then what depends on
    /// it: a scope in parts that do not lead to one another would have to
    /// start twice at once, which the runtime does not do yet (E0116).
    fn refuse_split_scopes(&mut self, workflow: &ir::Workflow, scopes: &[(String, Span)]) {
        for (gate, span) in scopes {
            let scope = workflow.gates.get(gate).map(|g| g.replan_scope()).unwrap_or_default();
            if scope.len() < 2 || scope.iter().any(|n| !workflow.nodes.contains_key(n)) {
                continue;
            }
            if crate::rerun::scope_entry(workflow, &scope).is_none() {
                self.error(
                    codes::NOT_SUPPORTED,
                    *span,
                    format!("gate `{gate}`'s replan scope has no node that leads to the rest: not supported yet"),
                )
                .with_primary_message("no node of the scope reaches all the others")
                .with_note("a replan re-runs its scope from the node that leads to every other node of the scope, then what depends on it")
                .with_help(
                    "list only nodes that one of them leads to (a sub-graph with one entry), or replan from a node they share upstream",
                );
            }
        }
    }

    /// A gate's `trigger.on` lists events the runtime triggers gates on:
    /// today only `node_completed` (its `from` node completed). Any other
    /// event would be accepted and never happen, so it is refused (E0116).
    fn check_trigger_events(&mut self, gate: &ast::GateStmt) {
        let Some(ast::Expr { kind: ast::ExprKind::Object(fields), .. }) = Self::block_prop(Some(&gate.body), "trigger") else { return };
        let Some(on) = fields.iter().find(|f| f.name.text == "on") else { return };
        let ast::ExprKind::List(items) = &on.value.kind else { return };
        if items.is_empty() {
            self.error(
                codes::INVALID_VALUE,
                on.value.span,
                format!("gate `{}`'s trigger lists no event: it could never run", gate.name.text),
            );
        }
        for item in items {
            let ast::ExprKind::String(event) = &item.kind else { continue };
            if !spec::GATE_TRIGGER_EVENTS.contains(&event.as_str()) {
                self.error(codes::NOT_SUPPORTED, item.span, format!("`{event}` as a gate trigger event is not supported yet"))
                    .with_primary_message("no such boundary event is raised")
                    .with_note(format!(
                        "a gate is triggered when its `from` node completes: trigger events are {}",
                        spec::GATE_TRIGGER_EVENTS.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
                    ))
                    .with_help("write `on: [\"node_completed\"]`");
            }
        }
    }

    fn check_transfer(&mut self, transfer: &ast::TransferStmt) -> Option<ir::Transfer> {
        let from_ok = self.node_exists(&transfer.from.text, transfer.from.span);
        let to_ok = self.node_exists(&transfer.to.text, transfer.to.span);
        let (kind, spec) = match transfer.kind {
            ast::TransferKind::Handoff => ("handoff", &spec::HANDOFF_BLOCK),
            ast::TransferKind::Delegate => ("delegate", &spec::DELEGATE_BLOCK),
        };
        let owner = format!("{kind} `{} -> {}`", transfer.from.text, transfer.to.text);
        let payload = Self::block_prop(transfer.body.as_ref(), "payload").map(|p| self.quietly(|c| c.lower_type(p))).unwrap_or(Ty::Any);
        if let Some(workflow) = self.workflow.as_mut() {
            workflow.payload = Some(payload);
        }
        let span = transfer.from.span.to(transfer.to.span);
        let empty = ast::Block { entries: Vec::new(), span };
        let body = transfer.body.as_ref().unwrap_or(&empty);
        let (props, _) = self.check_block(body, spec, span, &owner, &Default::default());
        if let Some(workflow) = self.workflow.as_mut() {
            workflow.payload = None;
        }
        let kind = match transfer.kind {
            ast::TransferKind::Handoff => ir::TransferKind::Handoff,
            ast::TransferKind::Delegate => ir::TransferKind::Delegate,
        };
        (from_ok && to_ok).then(|| ir::Transfer::new(kind, &transfer.from.text, &transfer.to.text, &props, loc(self.file, span)))
    }

    fn check_handler(&mut self, handler: &ast::Handler, events: &[&str], owner: &str) -> Option<ir::Handler> {
        let mut ok = true;
        for event in &handler.events {
            if !events.contains(&event.text.as_str()) {
                ok = false;
                let mut d = Diagnostic::new(codes::INVALID_VALUE, self.file, event.span, format!("{owner} has no event `{}`", event.text))
                    .with_primary_message("unknown event")
                    .with_note(format!("events here: {}", events.join(", ")));
                if let Some(s) = closest_name(&event.text, events.iter().copied()) {
                    d = d.with_suggestion(s);
                }
                self.diagnostics.push(d);
            }
        }
        let action = self.check_value(&V::Action, &handler.action, &Default::default());
        match (ok, action) {
            (true, Value::Action(action)) => Some(ir::Handler {
                events: handler.events.iter().filter_map(|e| ir::HandlerEvent::parse(&e.text)).collect(),
                action,
                loc: loc(self.file, handler.span),
            }),
            _ => None,
        }
    }

    pub(crate) fn check_machine(&mut self, decl: &ast::Decl) {
        let owner = format!("machine `{}`", decl.name.text);
        let Some(body) = decl.body.as_ref() else { return };
        let mut states: IndexSet<String> = IndexSet::new();
        let mut transitions = Vec::new();
        let (props, rest) = self.check_block(body, &spec::MACHINE.block, decl.name.span, &owner, &Default::default());
        for entry in rest {
            if let Entry::Edge(edge) = entry {
                for hop in &edge.path {
                    states.insert(hop.text.clone());
                }
                for pair in edge.path.windows(2) {
                    transitions.push((pair[0].text.clone(), pair[1].text.clone()));
                }
                if let Some(guard) = &edge.guard {
                    let span = match guard {
                        ast::EdgeGuard::When(e) => e.span,
                        ast::EdgeGuard::Else(s) => *s,
                    };
                    self.error(codes::ENTRY_NOT_ALLOWED, span, "transitions of a machine take no guard")
                        .with_note("a machine lists the legal transitions; which one happens is decided by the workflow");
                }
            }
        }
        // `initial` and `terminal` name states the transitions declare.
        let mut state_refs: Vec<(String, Span)> = Vec::new();
        for entry in &body.entries {
            if let Entry::Property(p) = entry {
                match (p.key.text.as_str(), &p.value.kind) {
                    ("initial", ExprKind::Name(n)) => state_refs.push((n.clone(), p.value.span)),
                    ("terminal", ExprKind::List(items)) => state_refs.extend(items.iter().filter_map(|i| match &i.kind {
                        ExprKind::Name(n) => Some((n.clone(), i.span)),
                        _ => None,
                    })),
                    _ => {}
                }
            }
        }
        for (state, span) in state_refs {
            if !states.contains(&state) {
                self.undefined(&state, span, "state", states.iter().map(String::as_str));
            }
        }
        let word = |v: Option<&Value>| match v {
            Some(Value::Word(w)) => w.clone(),
            _ => String::new(),
        };
        let terminal = match props.get("terminal") {
            Some(Value::List(items)) => items.iter().map(|i| word(Some(i))).collect(),
            _ => Vec::new(),
        };
        self.machines.insert(
            decl.name.text.clone(),
            ir::Machine {
                name: decl.name.text.clone(),
                initial: word(props.get("initial")),
                terminal,
                states: states.into_iter().collect(),
                transitions,
                loc: loc(self.file, decl.name.span),
            },
        );
    }

    pub(crate) fn check_policy(&mut self, policy: &ast::Policy, scope: &PolicyScope) -> Option<ir::Policy> {
        let formula = self.lower_formula(&policy.formula, scope);
        let empty = ast::Block { entries: Vec::new(), span: policy.name.span };
        let body = policy.body.as_ref().unwrap_or(&empty);
        let (props, _) =
            self.check_block(body, &spec::POLICY_BLOCK, policy.name.span, &format!("policy `{}`", policy.name.text), &Default::default());
        Some(ir::Policy { name: policy.name.text.clone(), formula: formula?, props, loc: loc(self.file, policy.name.span) })
    }

    fn lower_formula(&mut self, formula: &ast::Formula, scope: &PolicyScope) -> Option<ir::Formula> {
        flow_syntax::stack::guarded(|| self.lower_formula_level(formula, scope))
    }

    fn lower_formula_level(&mut self, formula: &ast::Formula, scope: &PolicyScope) -> Option<ir::Formula> {
        let mut lower = |f: &ast::Formula| self.lower_formula(f, scope).map(Box::new);
        Some(match &formula.kind {
            FormulaKind::Error => return None,
            FormulaKind::Bool(value) => ir::Formula::Bool { value: *value },
            FormulaKind::Not(body) => ir::Formula::Not { body: lower(body)? },
            FormulaKind::Always(body) => ir::Formula::Always { body: lower(body)? },
            FormulaKind::Eventually(body) => ir::Formula::Eventually { body: lower(body)? },
            FormulaKind::Never { body, before } => {
                let body = lower(body);
                let before = match before {
                    Some(b) => Some(lower(b)?),
                    None => None,
                };
                ir::Formula::Never { body: body?, before }
            }
            FormulaKind::Until(a, b) => {
                let (a, b) = (lower(a), lower(b));
                ir::Formula::Until { lhs: a?, rhs: b? }
            }
            FormulaKind::And(a, b) => {
                let (a, b) = (lower(a), lower(b));
                ir::Formula::And { lhs: a?, rhs: b? }
            }
            FormulaKind::Or(a, b) => {
                let (a, b) = (lower(a), lower(b));
                ir::Formula::Or { lhs: a?, rhs: b? }
            }
            FormulaKind::Implies(a, b) => {
                let (a, b) = (lower(a), lower(b));
                ir::Formula::Implies { lhs: a?, rhs: b? }
            }
            FormulaKind::Within { steps, steps_span, body } => {
                let body = lower(body);
                let Some(steps) = steps.filter(|s| *s > 0) else {
                    self.error(codes::INVALID_VALUE, *steps_span, "`within` needs a positive whole number of steps");
                    return None;
                };
                ir::Formula::Within { steps, body: body? }
            }
            FormulaKind::Atom(atom) => return self.lower_atom(atom, scope),
        })
    }

    fn lower_atom(&mut self, atom: &ast::Atom, scope: &PolicyScope) -> Option<ir::Formula> {
        let name = &atom.name.text;
        let Some((_, params, _)) = spec::ATOMS.iter().find(|(n, _, _)| n == name) else {
            let names: Vec<&str> = spec::ATOMS.iter().map(|(n, _, _)| *n).collect();
            let mut d = Diagnostic::new(codes::INVALID_VALUE, self.file, atom.name.span, format!("unknown policy atom `{name}`"))
                .with_primary_message("not an atom")
                .with_note(format!("atoms: {}", names.join(", ")));
            if let Some(s) = closest_name(name, names.iter().copied()) {
                d = d.with_suggestion(s);
            }
            self.diagnostics.push(d);
            return None;
        };
        let positional: Vec<&ast::AtomArg> = atom.args.iter().filter(|a| a.name.is_none()).collect();
        let mut by = None;
        let mut ok = true;
        for arg in atom.args.iter().filter(|a| a.name.is_some()) {
            let arg_name = arg.name.as_ref().expect("filtered");
            if arg_name.text != "by" || !matches!(name.as_str(), "called" | "refused") {
                self.error(codes::WRONG_ARGUMENTS, arg_name.span, format!("`{name}` takes no argument named `{}`", arg_name.text))
                    .with_note("only `called` and `refused` take a named argument: `by: agent`");
                ok = false;
                continue;
            }
            match &arg.value {
                ast::AtomValue::Name(agent) => {
                    if self.resolve(agent, arg.span, &[Kind::Agent]).is_some() {
                        by = Some(agent.clone());
                    } else {
                        ok = false;
                    }
                }
                _ => {
                    self.error(codes::WRONG_ARGUMENTS, arg.span, "`by:` takes an agent name");
                    ok = false;
                }
            }
        }
        if positional.len() != params.len() {
            self.error(
                codes::WRONG_ARGUMENTS,
                atom.span,
                format!("`{name}` takes {} argument{}, {} given", params.len(), if params.len() == 1 { "" } else { "s" }, positional.len()),
            );
            return None;
        }
        let mut args = Vec::new();
        for (arg, kind) in positional.iter().zip(params.iter()) {
            let value = match &arg.value {
                ast::AtomValue::Name(n) | ast::AtomValue::String(n) => n.clone(),
                ast::AtomValue::Number(n) => n.clone(),
            };
            let valid = match kind {
                AtomArgKind::Node => self.name_in(&value, arg.span, "node", &scope.nodes),
                AtomArgKind::Gate => self.name_in(&value, arg.span, "gate", &scope.gates),
                AtomArgKind::Record => self.name_in(&value, arg.span, "record", &scope.records),
                AtomArgKind::Tool => self.resolve(&value, arg.span, &[Kind::Tool]).is_some(),
                AtomArgKind::Agent => self.resolve(&value, arg.span, &[Kind::Agent]).is_some(),
                AtomArgKind::Principal => self.resolve(&value, arg.span, &[Kind::Principal]).is_some(),
                AtomArgKind::Outcome => self.word_in(&value, arg.span, spec::OUTCOMES),
                AtomArgKind::Decision => self.word_in(&value, arg.span, spec::DECISIONS),
                AtomArgKind::Zone => self.word_in(&value, arg.span, &flow_trace::Zone::ALL.iter().map(|z| z.as_str()).collect::<Vec<_>>()),
                AtomArgKind::Reason => true,
            };
            ok &= valid;
            args.push(value);
        }
        ok.then(|| ir::Formula::Atom { name: name.clone(), args, by, loc: loc(self.file, atom.span) })
    }

    fn name_in(&mut self, name: &str, span: Span, what: &str, names: &IndexSet<String>) -> bool {
        if names.contains(name) {
            if !self.index_symbols {
                return true;
            }
            let key = self.symbols.defs.iter().find(|d| d.kind == what && d.name == name).map(|d| d.key.clone());
            if let Some(key) = key {
                self.reference(key, span);
            }
            return true;
        }
        self.undefined(name, span, what, names.iter().map(String::as_str));
        false
    }

    fn word_in(&mut self, word: &str, span: Span, words: &[&str]) -> bool {
        if words.contains(&word) {
            return true;
        }
        let mut d = Diagnostic::new(codes::INVALID_VALUE, self.file, span, format!("`{word}` is not one of {}", words.join(", ")))
            .with_primary_message("not an accepted value");
        if let Some(s) = closest_name(word, words.iter().copied()) {
            d = d.with_suggestion(s);
        }
        self.diagnostics.push(d);
        false
    }
}

/// The output of a join that votes: whether a value won, the value, every
/// value's weight and voters, and the branches that gave no vote.
pub(crate) fn tally_type() -> Ty {
    let field = |ty: Ty| FieldTy { ty, optional: false };
    let mut vote = IndexMap::new();
    vote.insert("value".to_string(), field(Ty::Any));
    vote.insert("weight".to_string(), field(Ty::Float));
    vote.insert("branches".to_string(), field(Ty::list(Ty::String)));
    let mut fields = IndexMap::new();
    fields.insert("decided".to_string(), field(Ty::Bool));
    fields.insert("result".to_string(), field(Ty::Any));
    fields.insert("votes".to_string(), field(Ty::list(Ty::Record { fields: vote })));
    fields.insert("missing".to_string(), field(Ty::list(Ty::String)));
    Ty::Record { fields }
}
