//! The checking pass: load imports, collect declarations, check every
//! block against its spec, type expressions, and lower to IR.

use crate::ir::{self, Loc, Value};
use crate::spec::{self, BlockSpec, EntryKind, Env, Kind, P, V};
use crate::types::{primitive, FieldTy, Ty, PRIMITIVES};
use crate::{schema, stdlib, Checked, Loader};
use flow_diagnostics::{closest_name, codes, sort_diagnostics, Code, Diagnostic, DiagnosticMut, FileId, Label, SourceDb, Span};
use flow_syntax::ast::{self, Entry, Expr, ExprKind};
use indexmap::{IndexMap, IndexSet};
use std::collections::HashMap;

/// A top-level declaration, wherever it was written.
#[derive(Debug, Clone)]
pub(crate) struct Global {
    pub kind: Kind,
    pub file: FileId,
    pub name_span: Span,
    /// Index of the file in `Checker::files` and of the item in it.
    pub item: (usize, usize),
    pub imported: bool,
}

pub(crate) struct ParsedFile {
    pub id: FileId,
    /// Shared, so checking can hold an item while calling `&mut self`.
    pub ast: std::rc::Rc<ast::SourceFile>,
    pub imported: bool,
}

/// What names an expression may use. Names resolve through a chain —
/// quantifier variables, the declaration's variables (`extra_vars`), then
/// the environment (`payload`, the workflow's nodes and `input`) — without
/// copying the workflow into a map per expression.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    pub env: Option<Env>,
    /// Variables bound by quantifiers, innermost last.
    pub vars: Vec<(String, Ty)>,
}

/// The workflow being checked, if any: its nodes and their outputs.
#[derive(Debug, Clone)]
pub(crate) struct WorkflowCtx {
    pub name: String,
    pub nodes: IndexMap<String, (Span, Ty, String)>,
    pub input: Ty,
    /// The payload type of the handoff being checked.
    pub payload: Option<Ty>,
    /// The types of `calls` and `facts` (reference §4.5); `None` where
    /// they are not in scope (a projection).
    pub calls: Option<Ty>,
    pub facts: Option<Ty>,
}

impl Default for WorkflowCtx {
    fn default() -> WorkflowCtx {
        WorkflowCtx { name: String::new(), nodes: IndexMap::new(), input: Ty::Any, payload: None, calls: None, facts: None }
    }
}

pub(crate) struct Checker<'a> {
    pub db: &'a mut SourceDb,
    loader: &'a dyn Loader,
    pub diagnostics: Vec<Diagnostic>,
    pub files: Vec<ParsedFile>,
    pub globals: IndexMap<String, Global>,
    /// Names of globals referred to from somewhere.
    pub used: IndexSet<String>,
    pub types: IndexMap<String, Ty>,
    /// JSON Schema files by loaded name: the type they lower to (a
    /// [`Ty::Named`] of their entry in `schema_types`).
    schema_cache: HashMap<String, Ty>,
    /// The types of JSON Schema files, by their type name
    /// (`schema("path")` as written): the structural type, the schema as
    /// written, and where the file is. They join `types` (so they expand
    /// like declared types) and reach the IR with their schema.
    schema_types: IndexMap<String, (serde_json::Value, Loc)>,
    /// The file of the block being checked.
    pub file: FileId,
    pub workflow: Option<WorkflowCtx>,
    /// Every workflow checked so far, by name (a projection's scope).
    pub workflows_seen: IndexMap<String, WorkflowCtx>,
    pub machines: ir::NameMap<ir::Machine>,
    /// The input type of the tool whose node is being checked (for `args`).
    pub tool_input: Option<Ty>,
    /// Variables of the declaration being checked: `output` in a contract,
    /// `input` in an evaluator, `task` in an agent's routes.
    pub extra_vars: IndexMap<String, Ty>,
    pub symbols: crate::Symbols,
    /// The properties each node kind accepts (the common ones, then its
    /// own), built once per kind rather than once per node.
    pub node_props: HashMap<&'static str, std::rc::Rc<[crate::spec::P]>>,
    /// Whether to record [`crate::Symbols`] (editors need them; `flowc`
    /// and `flow` do not, and skip the cost).
    pub index_symbols: bool,
    /// Undefined global names already reported (kind and name), with the
    /// index of their report: later uses join it instead of repeating it.
    reported_undefined: HashMap<(String, String), usize>,
    /// "Did you mean" for node names: the workflow, its node count when
    /// built, and the index (built once per workflow, not once per miss).
    pub node_suggestions: Option<(String, usize, flow_diagnostics::suggest::NameIndex)>,
    /// "Did you mean" for globals, per set of kinds looked for: the
    /// number of globals when built, how many are of the kinds, and the
    /// index of their names.
    pub global_suggestions: HashMap<Vec<Kind>, (usize, usize, flow_diagnostics::suggest::NameIndex)>,
}

/// The most "also used here" labels an undefined name's report collects.
const MAX_ALSO_USED: usize = 10;

pub(crate) fn loc(file: FileId, span: Span) -> Loc {
    Loc { file: file.0, start: span.start, end: span.end }
}

impl<'a> Checker<'a> {
    pub fn new(db: &'a mut SourceDb, loader: &'a dyn Loader) -> Checker<'a> {
        Checker {
            db,
            loader,
            diagnostics: Vec::new(),
            files: Vec::new(),
            globals: IndexMap::new(),
            used: IndexSet::new(),
            types: IndexMap::new(),
            schema_cache: HashMap::new(),
            schema_types: IndexMap::new(),
            file: FileId(0),
            workflow: None,
            workflows_seen: IndexMap::new(),
            machines: ir::NameMap::default(),
            tool_input: None,
            node_props: HashMap::new(),
            index_symbols: false,
            reported_undefined: HashMap::new(),
            node_suggestions: None,
            global_suggestions: HashMap::new(),
            extra_vars: IndexMap::new(),
            symbols: crate::Symbols::default(),
        }
    }

    pub fn error(&mut self, code: Code, span: Span, message: impl Into<String>) -> &mut Diagnostic {
        self.diagnostics.push(Diagnostic::new(code, self.file, span, message));
        self.diagnostics.last_mut().expect("just pushed")
    }

    pub fn run(mut self, root: FileId) -> Checked {
        self.load_files(root);
        self.collect_globals();
        self.lower_types();
        let mut program = ir::Program::default();
        for (name, ty) in &self.types {
            // Schema files' types are added at the end (more are found later).
            let Some(global) = self.globals.get(name) else { continue };
            program.types.insert(
                name.clone(),
                ir::TypeDef { name: name.clone(), ty: ty.clone(), loc: loc(global.file, global.name_span), schema: None },
            );
        }
        // Machines first (workflows refer to their states), then the other
        // declarations, then top-level policies (they name nodes and gates
        // of every workflow).
        for pass in 0..3 {
            for file_index in 0..self.files.len() {
                let ast = std::rc::Rc::clone(&self.files[file_index].ast);
                for item in &ast.items {
                    self.file = self.files[file_index].id;
                    let imported = self.files[file_index].imported;
                    let item_pass = match item {
                        ast::Item::Decl(d) if d.keyword == ast::DeclKeyword::Machine => 0,
                        // Projections read a workflow's nodes: after every workflow.
                        ast::Item::Policy(_) | ast::Item::Decl(ast::Decl { keyword: ast::DeclKeyword::Projection, .. }) => 2,
                        _ => 1,
                    };
                    if pass != item_pass {
                        continue;
                    }
                    if let ast::Item::Policy(policy) = &item {
                        if self.globals.get(&policy.name.text).is_some_and(|g| g.name_span != policy.name.span || g.file != self.file) {
                            continue;
                        }
                        let scope = crate::workflow::PolicyScope {
                            nodes: program.workflows.values().flat_map(|w| w.nodes.keys().cloned()).collect(),
                            gates: program.workflows.values().flat_map(|w| w.gates.keys().cloned()).collect(),
                            records: program.workflows.values().flat_map(|w| w.record_names()).collect(),
                        };
                        if let Some(p) = self.check_policy(policy, &scope) {
                            program.policies.push(p);
                        }
                        continue;
                    }
                    self.check_item(item, imported, &mut program);
                }
            }
        }
        program.machines = std::mem::take(&mut self.machines);
        for (name, (schema, at)) in std::mem::take(&mut self.schema_types) {
            let ty = self.types.get(&name).cloned().unwrap_or(Ty::Any);
            program.types.insert(name.clone(), ir::TypeDef { name, ty, loc: at, schema: Some(schema) });
        }
        self.report_unused();
        let mut diagnostics = self.diagnostics;
        sort_diagnostics(&mut diagnostics);
        let mut symbols = self.symbols;
        // Source order (mostly the order they were found in: cheap to sort),
        // without the duplicates that looking ahead at types records.
        symbols
            .refs
            .sort_by(|a, b| (a.file, a.span.start, a.span.end).cmp(&(b.file, b.span.start, b.span.end)).then_with(|| a.key.cmp(&b.key)));
        symbols.refs.dedup();
        Checked { program, diagnostics, symbols }
    }

    // ------------------------------------------------------------ loading

    fn load_files(&mut self, root: FileId) {
        let mut queue = vec![(root, false)];
        let mut seen: IndexSet<String> = IndexSet::new();
        seen.insert(self.db.name(root).to_string());
        while let Some((id, imported)) = queue.pop() {
            let parsed = flow_syntax::parse(id, self.db.text(id));
            self.diagnostics.extend(parsed.diagnostics);
            let mut imports = Vec::new();
            for item in &parsed.file.items {
                if let ast::Item::Import(import) = item {
                    imports.push(import.clone());
                }
            }
            self.files.push(ParsedFile { id, ast: std::rc::Rc::new(parsed.file), imported });
            for import in imports {
                self.file = id;
                let loaded = match &import.target {
                    ast::ImportTarget::Module(path) => {
                        let name: Vec<&str> = path.iter().map(|i| i.text.as_str()).collect();
                        let name = name.join(".");
                        match stdlib::module(&name) {
                            Some(source) => Some((format!("<{name}>"), source.to_string())),
                            None => {
                                let known: Vec<&str> = stdlib::MODULES.iter().map(|(n, _)| *n).collect();
                                let suggestion = closest_name(&name, known.iter().copied());
                                let diagnostic = self
                                    .error(codes::MODULE_NOT_FOUND, import.span, format!("no stdlib module `{name}`"))
                                    .with_note(format!("stdlib modules: {}", known.join(", ")));
                                if let Some(s) = suggestion {
                                    // The label covers the whole import: a hint, not a replacement.
                                    diagnostic.with_help(format!("did you mean `{s}`?"));
                                }
                                None
                            }
                        }
                    }
                    ast::ImportTarget::Path(path) => {
                        let from = self.db.name(id).to_string();
                        match self.loader.load(&from, &path.value) {
                            Ok(loaded) => Some(loaded),
                            Err(why) => {
                                self.error(codes::MODULE_NOT_FOUND, path.span, format!("cannot import `{}`: {why}", path.value));
                                None
                            }
                        }
                    }
                };
                if let Some((name, text)) = loaded {
                    if seen.insert(name.clone()) {
                        let file = self.db.add(name, text);
                        queue.push((file, true));
                    }
                }
            }
        }
        // Check in a stable order: the root first, then modules as loaded.
    }

    fn collect_globals(&mut self) {
        for file_index in 0..self.files.len() {
            let file = self.files[file_index].id;
            let imported = self.files[file_index].imported;
            for item_index in 0..self.files[file_index].ast.items.len() {
                let (kind, name) = match &self.files[file_index].ast.items[item_index] {
                    ast::Item::Import(_) => continue,
                    ast::Item::Type(t) => (Kind::Type, t.name.clone()),
                    ast::Item::Policy(p) => (Kind::Policy, p.name.clone()),
                    ast::Item::Decl(d) => (decl_kind(d.keyword), d.name.clone()),
                };
                if let Some(previous) = self.globals.get(&name.text) {
                    let previous = previous.clone();
                    self.file = file;
                    let diagnostic = Diagnostic::new(
                        codes::DUPLICATE_DECLARATION,
                        file,
                        name.span,
                        format!("`{}` is declared more than once", name.text),
                    )
                    .with_primary_message(format!("{} `{}` declared again here", kind.article(), name.text))
                    .with_label(Label::secondary(
                        previous.file,
                        previous.name_span,
                        format!("first declared here as {}", previous.kind.article()),
                    ));
                    self.diagnostics.push(diagnostic);
                    continue;
                }
                self.globals
                    .insert(name.text.clone(), Global { kind, file, name_span: name.span, item: (file_index, item_index), imported });
                if !self.index_symbols {
                    continue;
                }
                let detail = declaration_line(self.db.text(file), name.span);
                self.symbols.defs.push(crate::SymbolDef {
                    key: name.text.clone(),
                    name: name.text.clone(),
                    kind: kind.as_str().to_string(),
                    file,
                    span: name.span,
                    container: None,
                    detail,
                });
            }
        }
    }

    fn report_unused(&mut self) {
        let unused: Vec<(String, Global)> = self
            .globals
            .iter()
            .filter(|(name, g)| {
                !g.imported && !matches!(g.kind, Kind::Workflow | Kind::Policy | Kind::Projection) && !self.used.contains(*name)
            })
            .map(|(n, g)| (n.clone(), g.clone()))
            .collect();
        for (name, global) in unused {
            self.file = global.file;
            let article = global.kind.article();
            self.error(codes::UNUSED_DECLARATION, global.name_span, format!("{article} `{name}` is declared but never used")).labels[0]
                .message = "never used".into();
        }
    }

    // ------------------------------------------------------------ lookup

    /// Records a use of the symbol `key` at `span` in the current file.
    pub fn reference(&mut self, key: impl Into<String>, span: Span) {
        if !self.index_symbols {
            return;
        }
        self.symbols.refs.push(crate::SymbolRef { key: key.into(), file: self.file, span });
    }

    /// Resolves a name to a global of one of `kinds`, reporting undefined
    /// (with did-you-mean) or wrong-kind errors.
    pub fn resolve(&mut self, name: &str, span: Span, kinds: &[Kind]) -> Option<Kind> {
        if self.globals.contains_key(name) {
            self.reference(name, span);
        }
        match self.globals.get(name) {
            Some(global) if kinds.contains(&global.kind) => {
                self.used.insert(name.to_string());
                Some(global.kind)
            }
            Some(global) => {
                let global = global.clone();
                self.used.insert(name.to_string());
                let expected = kinds.iter().map(|k| k.article()).collect::<Vec<_>>().join(" or ");
                let diagnostic = Diagnostic::new(
                    codes::WRONG_KIND,
                    self.file,
                    span,
                    format!("`{name}` is {}, but {expected} is expected here", global.kind.article()),
                )
                .with_primary_message(format!("expected {expected}"))
                .with_label(Label::secondary(
                    global.file,
                    global.name_span,
                    format!("`{name}` is declared here as {}", global.kind.article()),
                ));
                self.diagnostics.push(diagnostic);
                None
            }
            None => {
                let what = kinds.first().map(|k| k.as_str()).unwrap_or("name");
                let (suggestion, none_declared) = self.closest_global(name, kinds);
                self.undefined_with(name, span, what, suggestion, none_declared);
                None
            }
        }
    }

    /// The global of one of `kinds` nearest to `name`, from an index built
    /// once per set of kinds (not a scan per miss), and whether no global of
    /// those kinds exists.
    fn closest_global(&mut self, name: &str, kinds: &[Kind]) -> (Option<String>, bool) {
        let count = self.globals.len();
        let fresh = self.global_suggestions.get(kinds).is_some_and(|(c, _, _)| *c == count);
        if !fresh {
            let names: Vec<String> = self.globals.iter().filter(|(_, g)| kinds.contains(&g.kind)).map(|(n, _)| n.clone()).collect();
            let of_kinds = names.len();
            self.global_suggestions.insert(kinds.to_vec(), (count, of_kinds, flow_diagnostics::suggest::NameIndex::new(names)));
        }
        match self.global_suggestions.get(kinds) {
            Some((_, of_kinds, index)) => (index.closest(name).map(str::to_string), *of_kinds == 0),
            None => (None, true),
        }
    }

    pub fn undefined<'n>(&mut self, name: &str, span: Span, what: &str, candidates: impl IntoIterator<Item = &'n str>) {
        let candidates: Vec<&str> = candidates.into_iter().collect();
        let suggestion = closest_name(name, candidates.iter().copied()).map(str::to_string);
        self.undefined_with(name, span, what, suggestion, candidates.is_empty());
    }

    /// Reports an undefined name whose "did you mean" is already found;
    /// `none_declared`: nothing of its kind is declared.
    pub fn undefined_with(&mut self, name: &str, span: Span, what: &str, suggestion: Option<String>, none_declared: bool) {
        let message = format!("undefined {what} `{name}`");
        // A global (a type, an agent, …) undefined in several places is
        // reported once, its other uses as labels: no cascade of repeats.
        // Nodes and states belong to one workflow or machine: each counts.
        let key = (what.to_string(), name.to_string());
        let global = !matches!(what, "node" | "state");
        if let Some(&i) = self.reported_undefined.get(&key).filter(|_| global) {
            // `quietly` may have discarded the first report: check it is there.
            if let Some(first) = self.diagnostics.get_mut(i).filter(|d| d.message == message) {
                // The same use met again (a type looked at twice) adds nothing.
                if first.labels.iter().any(|l| l.file == self.file && l.span == span) {
                    return;
                }
                let also = first.labels.iter().filter(|l| !l.primary).count();
                if also < MAX_ALSO_USED {
                    first.labels.push(Label::secondary(self.file, span, "also used here"));
                } else if also == MAX_ALSO_USED {
                    first.labels.push(Label::secondary(self.file, span, "and used in more places"));
                }
                return;
            }
        }
        if global {
            self.reported_undefined.insert(key, self.diagnostics.len());
        }
        let mut diagnostic =
            Diagnostic::new(codes::UNDEFINED_NAME, self.file, span, message).with_primary_message(format!("no {what} named `{name}`"));
        if let Some(suggestion) = suggestion {
            // The typo meant this declaration: do not also call it unused.
            diagnostic = diagnostic.with_suggestion(&suggestion);
            self.used.insert(suggestion);
        } else if none_declared {
            diagnostic = diagnostic.with_note(format!("no {what} is declared"));
        }
        self.diagnostics.push(diagnostic);
    }

    // ------------------------------------------------------------ types

    fn lower_types(&mut self) {
        let type_globals: Vec<(String, Global)> =
            self.globals.iter().filter(|(_, g)| g.kind == Kind::Type).map(|(n, g)| (n.clone(), g.clone())).collect();
        for (name, global) in &type_globals {
            let ast = std::rc::Rc::clone(&self.files[global.item.0].ast);
            let ast::Item::Type(decl) = &ast.items[global.item.1] else { continue };
            self.file = global.file;
            let ty = self.lower_type(&decl.value);
            self.types.insert(name.clone(), ty);
        }
        // Alias cycles: a type that is, through names and `?` only, itself.
        let mut reported: IndexSet<String> = IndexSet::new();
        for (name, global) in &type_globals {
            let mut chain = vec![name.clone()];
            let mut current = name.clone();
            while let Some(Ty::Named { name: next }) = self.types.get(&current).map(|t| t.non_null().clone()) {
                if next == *name {
                    if chain.iter().all(|n| !reported.contains(n)) {
                        self.file = global.file;
                        let path = chain.iter().chain(std::iter::once(name)).cloned().collect::<Vec<_>>().join(" = ");
                        self.error(codes::RECURSIVE_TYPE, global.name_span, format!("type `{name}` is defined as itself: {path}")).labels
                            [0]
                        .message = "recursive alias".into();
                        reported.extend(chain.iter().cloned());
                    }
                    break;
                }
                if chain.contains(&next) || chain.len() > 64 {
                    break;
                }
                chain.push(next.clone());
                current = next;
            }
        }
    }

    /// Lowers a type expression.
    pub fn lower_type(&mut self, expr: &Expr) -> Ty {
        flow_syntax::stack::guarded(|| self.lower_type_level(expr))
    }

    fn lower_type_level(&mut self, expr: &Expr) -> Ty {
        match &expr.kind {
            ExprKind::Name(name) => {
                if let Some(ty) = primitive(name) {
                    return ty;
                }
                match self.globals.get(name.as_str()) {
                    Some(g) if g.kind == Kind::Type => {
                        self.used.insert(name.clone());
                        self.reference(name.clone(), expr.span);
                        Ty::Named { name: name.clone() }
                    }
                    Some(_) => {
                        self.resolve(name, expr.span, &[Kind::Type]);
                        Ty::Any
                    }
                    None => {
                        let mut candidates: Vec<String> =
                            self.globals.iter().filter(|(_, g)| g.kind == Kind::Type).map(|(n, _)| n.clone()).collect();
                        candidates.extend(PRIMITIVES.iter().map(|p| p.to_string()));
                        self.undefined(name, expr.span, "type", candidates.iter().map(String::as_str));
                        Ty::Any
                    }
                }
            }
            ExprKind::Null => Ty::Null,
            // `any` is a reserved word (a quantifier), and also the top type.
            ExprKind::QuantifierWord(ast::Quantifier::Any) => Ty::Any,
            ExprKind::List(items) if items.len() == 1 => Ty::list(self.lower_type(&items[0])),
            ExprKind::Object(fields) => {
                let mut out = IndexMap::new();
                for field in fields {
                    let ty = self.lower_type(&field.value);
                    if out.contains_key(&field.name.text) {
                        self.error(codes::DUPLICATE_PROPERTY, field.name.span, format!("field `{}` is given twice", field.name.text));
                    }
                    out.insert(field.name.text.clone(), FieldTy { ty, optional: field.optional });
                }
                Ty::Record { fields: out }
            }
            ExprKind::Nullable(inner) => Ty::nullable(self.lower_type(inner)),
            ExprKind::String(s) => Ty::Enum { values: vec![s.clone()] },
            ExprKind::Binary { op: ast::BinaryOp::Union, lhs, rhs } => {
                let (l, r) = (self.lower_type(lhs), self.lower_type(rhs));
                match (l, r) {
                    (Ty::Enum { values: mut a }, Ty::Enum { values: b }) => {
                        for v in b {
                            if !a.contains(&v) {
                                a.push(v);
                            }
                        }
                        Ty::Enum { values: a }
                    }
                    (Ty::Any, _) | (_, Ty::Any) => Ty::Any,
                    (l, Ty::Null) => Ty::nullable(l),
                    (Ty::Null, r) => Ty::nullable(r),
                    _ => {
                        self.error(codes::NOT_A_TYPE, expr.span, "`|` joins string literals into an enum type (and `null`)")
                            .with_help("write an enum such as `\"pass\" | \"fail\"`, or use `T?` for a nullable type");
                        Ty::Any
                    }
                }
            }
            ExprKind::Call { callee, args } if matches!(&callee.kind, ExprKind::Name(n) if n == "schema") => match args.as_slice() {
                [ast::Argument { name: None, value: Expr { kind: ExprKind::String(path), span }, .. }] => self.load_schema(path, *span),
                _ => {
                    self.error(codes::WRONG_ARGUMENTS, expr.span, "`schema` takes one argument: the path of a JSON Schema file")
                        .with_help("write `schema(\"schemas/name.json\")`");
                    Ty::Any
                }
            },
            ExprKind::Error => Ty::Any,
            _ => {
                self.error(codes::NOT_A_TYPE, expr.span, "this expression is not a type")
                    .with_help("types are `string`, `int`, `float`, `bool`, `duration`, `money`, `percent`, `any`, type names, `[T]`, `T?`, `{ f: T }`, `\"a\" | \"b\"` and `schema(\"file.json\")`");
                Ty::Any
            }
        }
    }

    fn load_schema(&mut self, path: &str, span: Span) -> Ty {
        let from = self.db.name(self.file).to_string();
        let (name, text) = match self.loader.load(&from, path) {
            Ok(loaded) => loaded,
            Err(why) => {
                self.error(codes::SCHEMA_UNREADABLE, span, format!("cannot read JSON Schema `{path}`: {why}")).labels[0].message =
                    "unreadable schema file".into();
                return Ty::Any;
            }
        };
        if let Some(ty) = self.schema_cache.get(&name) {
            return ty.clone();
        }
        let schema_file = match self.db.find(&name) {
            Some(id) => id,
            None => self.db.add(name.clone(), text.clone()),
        };
        let ty = match serde_json::from_str::<serde_json::Value>(&text) {
            Err(error) => {
                let offset = schema::offset_of(&text, error.line(), error.column());
                let end = (offset + 1).min(text.len());
                let diagnostic = Diagnostic::new(
                    codes::SCHEMA_INVALID_JSON,
                    schema_file,
                    Span::new(offset, end.max(offset)),
                    format!("`{path}` is not valid JSON: {error}"),
                )
                .with_primary_message("invalid JSON here")
                .with_label(Label::secondary(self.file, span, "schema referenced here"));
                self.diagnostics.push(diagnostic);
                Ty::Any
            }
            Ok(value) => match validate_schema(&value) {
                Err((pointer, message)) => {
                    let (start, end) = schema::locate(&text, &pointer);
                    let diagnostic = Diagnostic::new(
                        codes::SCHEMA_INVALID,
                        schema_file,
                        Span::new(start, end),
                        format!("`{path}` is not a valid JSON Schema: {message}"),
                    )
                    .with_primary_message(if pointer.is_empty() { "invalid schema".to_string() } else { format!("at {pointer}") })
                    .with_label(Label::secondary(self.file, span, "schema referenced here"));
                    self.diagnostics.push(diagnostic);
                    Ty::Any
                }
                Ok(()) => {
                    // The file's type is a named type: statically its
                    // structural subset, at run time the schema itself.
                    let structural = schema::to_ty(&value);
                    let mut type_name = format!("schema({path:?})");
                    let mut n = 1;
                    while self.types.contains_key(&type_name) || self.globals.contains_key(&type_name) {
                        n += 1;
                        type_name = format!("schema({path:?})#{n}");
                    }
                    self.types.insert(type_name.clone(), structural);
                    let at = Loc { file: schema_file.0, start: 0, end: text.len() as u32 };
                    self.schema_types.insert(type_name.clone(), (value, at));
                    Ty::Named { name: type_name }
                }
            },
        };
        self.schema_cache.insert(name, ty.clone());
        ty
    }

    /// Named-type expansion by reference: follows names (not `T?` of a
    /// name, which needs a new type — use [`Checker::expand`] for that).
    pub fn expand_ref<'t>(&'t self, ty: &'t Ty) -> &'t Ty {
        let mut current = ty;
        for _ in 0..16 {
            match current {
                Ty::Named { name } => match self.types.get(name) {
                    Some(next) => current = next,
                    None => return &Ty::Any,
                },
                _ => return current,
            }
        }
        &Ty::Any
    }

    /// One level of named-type expansion.
    pub fn expand(&self, ty: &Ty) -> Ty {
        let mut current = ty.clone();
        for _ in 0..16 {
            match current {
                Ty::Named { ref name } => match self.types.get(name) {
                    Some(next) => current = next.clone(),
                    None => return Ty::Any,
                },
                Ty::Nullable { ref inner } if matches!(**inner, Ty::Named { .. }) => {
                    current = Ty::nullable(self.expand(inner));
                }
                _ => return current,
            }
        }
        Ty::Any
    }

    // ------------------------------------------------------------ items

    fn check_item(&mut self, item: &ast::Item, imported: bool, program: &mut ir::Program) {
        match item {
            ast::Item::Import(_) | ast::Item::Type(_) | ast::Item::Policy(_) => {}
            ast::Item::Decl(decl) => {
                if self.globals.get(&decl.name.text).is_some_and(|g| g.name_span != decl.name.span || g.file != self.file) {
                    return; // a duplicate, already reported
                }
                match decl.keyword {
                    ast::DeclKeyword::Workflow => {
                        if let Some(workflow) = self.check_workflow(decl) {
                            program.workflows.insert(workflow.name.clone(), workflow);
                        }
                    }
                    ast::DeclKeyword::Machine => self.check_machine(decl),
                    keyword => {
                        let spec = spec::ALL_DECLS.iter().find(|s| s.kind == decl_kind(keyword)).expect("every keyword has a spec");
                        let ir = self.check_decl(decl, spec, imported);
                        program.decls.insert(ir.name.clone(), ir);
                    }
                }
            }
        }
    }

    fn check_decl(&mut self, decl: &ast::Decl, spec: &spec::DeclSpec, imported: bool) -> ir::Decl {
        let variant_names: Vec<&str> = spec.variants.iter().map(|(n, _)| *n).collect();
        let variant = match &decl.variant {
            Some(v) if spec.variants.is_empty() => {
                self.error(codes::UNKNOWN_VARIANT, v.span, format!("{} declarations take no `: kind`", decl.keyword.as_str()));
                None
            }
            Some(v) if !variant_names.contains(&v.text.as_str()) => {
                let help = closest_name(&v.text, variant_names.iter().copied());
                let d = self
                    .error(codes::UNKNOWN_VARIANT, v.span, format!("unknown {} kind `{}`", decl.keyword.as_str(), v.text))
                    .with_note(format!("{} kinds: {}", decl.keyword.as_str(), variant_names.join(", ")));
                if let Some(h) = help {
                    d.with_suggestion(h);
                }
                None
            }
            Some(v) => Some(v.text.clone()),
            None if !spec.variants.is_empty() && spec.default_variant.is_none() => {
                self.error(
                    codes::UNKNOWN_VARIANT,
                    decl.name.span,
                    format!(
                        "{} `{}` needs a kind: `{} {}: KIND`",
                        decl.keyword.as_str(),
                        decl.name.text,
                        decl.keyword.as_str(),
                        decl.name.text
                    ),
                )
                .with_note(format!("{} kinds: {}", decl.keyword.as_str(), variant_names.join(", ")));
                None
            }
            None => spec.default_variant.map(str::to_string),
        };
        let mut props_spec: Vec<P> = spec.block.props.to_vec();
        match &variant {
            Some(v) => {
                if let Some((_, extra)) = spec.variants.iter().find(|(n, _)| n == v) {
                    props_spec.extend_from_slice(extra);
                }
            }
            // Unknown variant: accept any variant's properties, require none.
            None => {
                for (_, extra) in spec.variants {
                    props_spec.extend(extra.iter().map(|p| P { required: false, ..*p }));
                }
            }
        }
        let empty = ast::Block { entries: Vec::new(), span: decl.name.span };
        let body = decl.body.as_ref().unwrap_or(&empty);
        let block = BlockSpec { props: &props_spec, ..spec.block };
        if spec.kind == Kind::Projection {
            self.workflow = self.projected_workflow(body);
        }
        self.extra_vars = self.decl_vars(spec.kind, body);
        let reordered = matches!(spec.kind, Kind::Compute | Kind::Projection).then(|| lets_first(body));
        let body = reordered.as_ref().unwrap_or(body);
        let (props, _) =
            self.check_block(body, &block, decl.name.span, &format!("{} `{}`", decl.keyword.as_str(), decl.name.text), &Scope::default());
        self.extra_vars.clear();
        if spec.kind == Kind::Projection {
            self.check_projection_value(&props, body);
            self.workflow = None;
        }
        if spec.kind == Kind::Compute {
            let output = props.get("output").and_then(|v| match v {
                Value::Type(t) => Some(t.clone()),
                _ => None,
            });
            if let Some(output) = output {
                self.check_computed_value(&props, &output, body);
            }
        }
        if spec.kind == Kind::Blackboard {
            self.refuse_mutable_board(body);
        }
        if spec.kind == Kind::Tool && variant.as_deref() == Some("mcp") {
            self.check_mcp_tool(body, decl.name.span, &decl.name.text);
        }
        if spec.kind == Kind::Evaluator {
            self.refuse_unbounded_timeout(body, variant.as_deref());
        }
        ir::Decl { kind: spec.kind, name: decl.name.text.clone(), variant, props, loc: loc(self.file, decl.name.span), imported }
    }

    /// An evaluator's `timeout` bounds a probe command only: a `human` or
    /// `llm` evaluator's wait is not bounded by it yet, and `predicate`,
    /// `schema` and `builtin` evaluators are answered at once by the
    /// control plane. Refused (E0116) there rather than accepted and
    /// ignored.
    fn refuse_unbounded_timeout(&mut self, body: &ast::Block, variant: Option<&str>) {
        let Some(timeout) = Self::block_prop(Some(body), "timeout") else { return };
        let (what, help) = match variant {
            Some("command") | None => return,
            Some("human") => ("the judges' decision never times out", "bound the wait with the gate's own `timeout`, or remove this one"),
            Some("llm") => {
                ("the judge's turn is not bounded by it", "bound the judge with its agent's provider `timeout`, or remove this one")
            }
            Some(_) => ("it is evaluated at once by the control plane: there is nothing to time out", "remove it"),
        };
        let kind = variant.unwrap_or_default();
        self.error(codes::NOT_SUPPORTED, timeout.span, format!("`timeout` is not supported yet on `{kind}` evaluators"))
            .with_primary_message(what)
            .with_help(help);
    }

    /// `append_only: false` would promise entries that can change, and no
    /// node changes an entry: refused (E0116) rather than accepted.
    fn refuse_mutable_board(&mut self, body: &ast::Block) {
        if let Some(value) = Self::block_prop(Some(body), "append_only") {
            if matches!(value.kind, ExprKind::Bool(false)) {
                self.error(codes::NOT_SUPPORTED, value.span, "`append_only: false` is not supported yet")
                    .with_primary_message("no node changes an entry")
                    .with_note("a node that `writes` a blackboard appends its output; entries are never changed or removed")
                    .with_help("remove `append_only`, or write `append_only: true`");
            }
        }
    }

    /// An `mcp` tool names one server (`server` or `url`) and does one
    /// thing there (a tool, a `resource` or a `prompt`).
    fn check_mcp_tool(&mut self, body: &ast::Block, name_span: Span, name: &str) {
        let given = |key: &str| Self::block_prop(Some(body), key).map(|value| (key.to_string(), value.span));
        let servers: Vec<(String, Span)> = ["server", "url"].into_iter().filter_map(given).collect();
        match servers.as_slice() {
            [] => {
                self.error(codes::MISSING_PROPERTY, name_span, format!("tool `{name}` lacks a server: give `server` or `url`")).with_help(
                    "`server: [\"program\", \"arg\"]` starts a server over stdio; `url: \"https://…\"` reaches one over Streamable HTTP",
                );
            }
            [_, (_, second)] => {
                self.error(codes::CONFLICTING_PROPERTIES, *second, format!("tool `{name}` gives both `server` and `url`"))
                    .with_primary_message("a second server")
                    .with_help("keep `server` (a command line, over stdio) or `url` (Streamable HTTP), not both");
            }
            _ => {}
        }
        if let (Some((_, span)), Some(_)) = (given("headers"), given("server")) {
            self.error(codes::CONFLICTING_PROPERTIES, span, "`headers` are sent only to a `url` server")
                .with_help("remove `headers`, or reach the server by `url`");
        }
        if let Some(url) = Self::block_prop(Some(body), "url") {
            if let ExprKind::String(text) = &url.kind {
                if !(text.starts_with("http://") || text.starts_with("https://")) {
                    self.error(codes::INVALID_VALUE, url.span, format!("`{text}` is not an http:// or https:// URL"))
                        .with_primary_message("an MCP server's URL");
                }
            }
        }
        let actions: Vec<(String, Span)> = ["remote_name", "resource", "prompt"].into_iter().filter_map(given).collect();
        if let [(first, _), (second, span), ..] = actions.as_slice() {
            self.error(codes::CONFLICTING_PROPERTIES, *span, format!("tool `{name}` gives both `{first}` and `{second}`"))
                .with_primary_message("a second thing to do at the server")
                .with_help("an `mcp` tool calls a tool (`remote_name`), reads a `resource` or gets a `prompt`: keep one");
        }
    }

    /// The variables expressions inside a declaration may use.
    fn decl_vars(&mut self, kind: Kind, body: &ast::Block) -> IndexMap<String, Ty> {
        // Lowered quietly: the property reports its own errors where it is checked.
        let prop_type = |this: &mut Self, key: &str| match Self::block_prop(Some(body), key) {
            Some(value) => this.quietly(|c| c.lower_type(value)),
            None => Ty::Any,
        };
        let mut vars = IndexMap::new();
        match kind {
            Kind::Contract => {
                vars.insert("output".to_string(), prop_type(self, "output"));
            }
            Kind::Evaluator => {
                vars.insert("input".to_string(), prop_type(self, "input"));
                vars.insert("output".to_string(), prop_type(self, "output"));
            }
            Kind::Compute => {
                vars.insert("input".to_string(), prop_type(self, "input"));
            }
            Kind::Projection => vars.extend(self.projection_vars()),
            Kind::Agent => {
                let mut fields = IndexMap::new();
                fields.insert("kind".to_string(), FieldTy { ty: Ty::String, optional: false });
                fields.insert("labels".to_string(), FieldTy { ty: Ty::list(Ty::String), optional: false });
                fields.insert(
                    "risk".to_string(),
                    FieldTy { ty: Ty::Enum { values: spec::RISK.iter().map(|r| r.to_string()).collect() }, optional: false },
                );
                vars.insert("task".to_string(), Ty::Record { fields });
            }
            _ => {}
        }
        vars
    }

    /// Checks a block's entries against `spec`: properties (unknown,
    /// duplicate, missing, values) and which other entries are allowed.
    /// Returns the checked properties and the entries left for the caller.
    pub fn check_block<'b>(
        &mut self,
        block: &'b ast::Block,
        spec: &BlockSpec<'_>,
        owner_span: Span,
        owner: &str,
        scope: &Scope,
    ) -> (ir::NameMap<Value>, Vec<&'b Entry>) {
        let mut props = ir::NameMap::default();
        let mut seen: IndexMap<String, Span> = IndexMap::new();
        let mut rest = Vec::new();
        for entry in &block.entries {
            match entry {
                Entry::Property(property) => {
                    let key = &property.key.text;
                    if let Some(first) = seen.get(key) {
                        let first = *first;
                        let file = self.file;
                        self.error(codes::DUPLICATE_PROPERTY, property.key.span, format!("property `{key}` is given twice"))
                            .with_label(Label::secondary(file, first, "first given here"))
                            .labels[0]
                            .message = "given again".into();
                        continue;
                    }
                    seen.insert(key.clone(), property.key.span);
                    match spec.props.iter().find(|p| p.name == key) {
                        Some(p) => {
                            let value = self.check_value(&p.value, &property.value, scope);
                            props.insert(key.clone(), value);
                            self.support(p, property.key.span);
                        }
                        None => {
                            let names: Vec<&str> = spec.props.iter().map(|p| p.name).collect();
                            let suggestion = closest_name(key, names.iter().copied());
                            let mut d = Diagnostic::new(
                                codes::UNKNOWN_PROPERTY,
                                self.file,
                                property.key.span,
                                format!("{owner} has no property `{key}`"),
                            )
                            .with_primary_message("unknown property");
                            d = match suggestion {
                                Some(s) => d.with_suggestion(s),
                                None if names.is_empty() => d.with_note("this block takes no properties"),
                                None => d.with_note(format!("accepted: {}", flow_diagnostics::short_list(&names))),
                            };
                            self.diagnostics.push(d);
                        }
                    }
                }
                other => {
                    let kind = entry_kind(other);
                    if spec.entries.contains(&kind) {
                        rest.push(other);
                    } else {
                        self.error(codes::ENTRY_NOT_ALLOWED, other.span(), format!("{} is not allowed in {owner}", other.describe()))
                            .with_note(entry_note(kind));
                    }
                }
            }
        }
        // Declared defaults, filled in once: the plan carries resolved values.
        for p in spec.props {
            if let (Some(default), false) = (p.default, seen.contains_key(p.name)) {
                props.insert(p.name.to_string(), default.value());
            }
        }
        for p in spec.props.iter().filter(|p| p.required) {
            if !seen.contains_key(p.name) {
                self.error(codes::MISSING_PROPERTY, owner_span, format!("{owner} lacks the required property `{}`", p.name))
                    .with_help(format!("add `{}: …` ({})", p.name, p.doc.trim_end_matches('.')))
                    .labels[0]
                    .message = format!("`{}` missing", p.name);
            }
        }
        (props, rest)
    }

    /// What the runtime does with a property written here (`spec::Support`):
    /// W0117 when nothing acts on it yet, E0116 when it is refused.
    fn support(&mut self, p: &P, span: Span) {
        match p.support {
            spec::Support::Runs => {}
            spec::Support::NotEnforced(why) => {
                self.error(codes::NOT_ENFORCED, span, format!("`{}` is not enforced at run time yet", p.name))
                    .with_primary_message("accepted, but a run behaves as if it were not written")
                    .with_note(why.to_string())
                    .with_note("reference §13 (the property ledger) lists what each property does at run time".to_string());
            }
            spec::Support::Refused(why) => {
                self.error(codes::NOT_SUPPORTED, span, format!("`{}` is not supported yet", p.name))
                    .with_primary_message("no run could honour it")
                    .with_note(why.to_string());
            }
        }
    }

    // ------------------------------------------------------------ values

    pub fn check_value(&mut self, spec: &V, expr: &Expr, scope: &Scope) -> Value {
        flow_syntax::stack::guarded(|| self.check_value_level(spec, expr, scope))
    }

    fn check_value_level(&mut self, spec: &V, expr: &Expr, scope: &Scope) -> Value {
        if matches!(expr.kind, ExprKind::Error) {
            return Value::Invalid;
        }
        // A number with an unknown unit is reported once, as such.
        if let ExprKind::Number { unit, .. } = &expr.kind {
            if !KNOWN_UNITS.contains(&unit.as_str()) {
                self.number(expr);
                return Value::Invalid;
            }
        }
        match spec {
            V::Str => match &expr.kind {
                ExprKind::String(s) => Value::Str(s.clone()),
                _ => self.invalid(expr, "a string"),
            },
            V::Bool => match &expr.kind {
                ExprKind::Bool(b) => Value::Bool(*b),
                _ => self.invalid(expr, "`true` or `false`"),
            },
            V::Int => match self.number(expr) {
                Some((value, unit)) if matches!(unit.as_str(), "" | "k" | "M") => {
                    let scaled = value * unit_scale(&unit);
                    if scaled.fract() != 0.0 || scaled < 0.0 || scaled > i64::MAX as f64 {
                        self.invalid(expr, "a whole number (`k` and `M` suffixes allowed)")
                    } else {
                        Value::Int(scaled as i64)
                    }
                }
                Some(_) => self.invalid(expr, "a whole number (`k` and `M` suffixes allowed)"),
                None => self.invalid(expr, "a whole number"),
            },
            V::Fraction => match self.number(expr) {
                Some((value, unit)) if unit == "%" && (0.0..=100.0).contains(&value) => Value::Fraction(value / 100.0),
                Some((value, unit)) if unit.is_empty() && (0.0..=1.0).contains(&value) => Value::Fraction(value),
                _ => self.invalid(expr, "a share: a percentage such as `20%` or a number between 0 and 1"),
            },
            V::Percent => match self.number(expr) {
                Some((value, unit)) if unit == "%" => Value::Fraction(value / 100.0),
                _ => self.invalid(expr, "a percentage such as `20%`"),
            },
            V::Duration => match self.number(expr) {
                Some((value, unit)) => match duration_ms(value, &unit) {
                    Some(ms) => Value::Duration(ms),
                    None => self.invalid(expr, "a duration such as `30s`, `5m` or `250ms`"),
                },
                None => self.invalid(expr, "a duration such as `30s`, `5m` or `250ms`"),
            },
            V::Money => match &expr.kind {
                ExprKind::Money(m) => Value::Money(*m),
                _ => self.invalid(expr, "an amount of money such as `$5.00`"),
            },
            V::Rate => match &expr.kind {
                ExprKind::Binary { op: ast::BinaryOp::Div, lhs, rhs } => {
                    let count = self.number(lhs);
                    let period = self.number(rhs);
                    match (count, period) {
                        (Some((c, cu)), Some((p, pu))) if cu.is_empty() && c.fract() == 0.0 && c >= 0.0 => match duration_ms(p, &pu) {
                            Some(ms) if ms > 0 => Value::Rate { count: c as u64, per_ms: ms },
                            _ => self.invalid(expr, "a rate such as `10 / 1m`"),
                        },
                        _ => self.invalid(expr, "a rate such as `10 / 1m`"),
                    }
                }
                _ => self.invalid(expr, "a rate such as `10 / 1m`"),
            },
            V::Type => Value::Type(self.lower_type(expr)),
            V::Ref(kinds) => match &expr.kind {
                ExprKind::Name(name) => match self.resolve(name, expr.span, kinds) {
                    Some(kind) => Value::Ref { kind, name: name.clone() },
                    None => Value::Invalid,
                },
                _ => {
                    let expected = kinds.iter().map(|k| format!("{} name", k.article())).collect::<Vec<_>>().join(" or ");
                    self.invalid(expr, &expected)
                }
            },
            V::Node => match &expr.kind {
                ExprKind::Name(name) => {
                    if self.check_node_ref(name, expr.span) {
                        Value::Node(name.clone())
                    } else {
                        Value::Invalid
                    }
                }
                _ => self.invalid(expr, "a node name"),
            },
            V::State => self.check_state(expr),
            V::StateName => match &expr.kind {
                ExprKind::Name(name) => Value::Word(name.clone()),
                _ => self.invalid(expr, "a state name"),
            },
            V::List(inner) => match &expr.kind {
                ExprKind::List(items) => Value::List(items.iter().map(|item| self.check_value(inner, item, scope)).collect()),
                _ => self.invalid(expr, "a list `[…]`"),
            },
            V::Word(words) => match &expr.kind {
                ExprKind::Name(name) if words.contains(&name.as_str()) => Value::Word(name.clone()),
                ExprKind::Name(name) => {
                    let suggestion = closest_name(name, words.iter().copied());
                    let d = self
                        .error(codes::INVALID_VALUE, expr.span, format!("`{name}` is not one of {}", words.join(", ")))
                        .with_primary_message("not an accepted value");
                    if let Some(s) = suggestion {
                        d.with_suggestion(s);
                    }
                    Value::Invalid
                }
                _ => self.invalid(expr, &format!("one of {}", words.join(", "))),
            },
            V::Record(props) => match &expr.kind {
                ExprKind::Object(fields) => {
                    let block = object_as_block(fields, expr.span);
                    let spec = BlockSpec { props, entries: &[], events: &[] };
                    let (values, _) = self.check_block(&block, &spec, expr.span, "this object", scope);
                    Value::Record(values)
                }
                _ => self.invalid(expr, "an object `{ … }`"),
            },
            V::Map(inner) => match &expr.kind {
                ExprKind::Object(fields) => {
                    Value::Record(fields.iter().map(|f| (f.name.text.clone(), self.check_value(inner, &f.value, scope))).collect())
                }
                _ => self.invalid(expr, "an object `{ … }`"),
            },
            V::Budget => match &expr.kind {
                ExprKind::Name(_) => self.check_value(&V::Ref(&[Kind::Budget]), expr, scope),
                ExprKind::Object(_) => self.check_value(&V::Record(spec::BUDGET_PROPS), expr, scope),
                _ => self.invalid(expr, "a budget name or an inline budget `{ tokens: …, … }`"),
            },
            V::Pred(env) => {
                let scope = self.env_scope(*env);
                let typed = self.type_expr(expr, &scope);
                if !matches!(typed.ty, Ty::Bool | Ty::Any) {
                    self.error(codes::TYPE_MISMATCH, expr.span, format!("a condition must be a bool, but this is {}", typed.ty)).labels
                        [0]
                    .message = format!("this is {}", typed.ty);
                }
                Value::Expr(typed)
            }
            V::Action => self.check_action(expr),
            V::Actions => match &expr.kind {
                ExprKind::List(items) if !items.is_empty() => Value::List(items.iter().map(|item| self.check_zone_action(item)).collect()),
                ExprKind::List(_) => self.invalid(expr, "at least one action"),
                _ => self.check_zone_action(expr),
            },
            V::Expr(env) => {
                let scope = self.env_scope(*env);
                Value::Expr(self.type_expr(expr, &scope))
            }
            V::ListExpr(env) => {
                let scope = self.env_scope(*env);
                let typed = self.type_expr(expr, &scope);
                if !matches!(self.expand(typed.ty.non_null()), Ty::List { .. } | Ty::Any) {
                    self.error(codes::TYPE_MISMATCH, expr.span, format!("expected a list, but this is {}", typed.ty)).labels[0].message =
                        format!("this is {}", typed.ty);
                }
                Value::Expr(typed)
            }
            V::Evaluator => self.check_evaluator(expr),
            V::JoinRule => self.check_join_rule(expr),
            V::Args => self.check_args(expr),
            V::Lets => self.check_lets(expr),
            V::Artifacts => match &expr.kind {
                ExprKind::List(items) => {
                    let scope = self.env_scope(Env::Nodes);
                    Value::List(
                        items
                            .iter()
                            .map(|item| match &item.kind {
                                ExprKind::String(s) => {
                                    self.error(codes::NOT_SUPPORTED, item.span, format!("a named artifact (\"{s}\") is not supported yet"))
                                        .with_primary_message("nothing at run time names artifacts by a string")
                                        .with_help("hand over an expression over the nodes, e.g. `outline.sections`");
                                    Value::Str(s.clone())
                                }
                                _ => Value::Expr(self.type_expr(item, &scope)),
                            })
                            .collect(),
                    )
                }
                _ => self.invalid(expr, "a list of artifact references"),
            },
            V::OneOf(options) => {
                let shape_matches = |v: &V| {
                    matches!(
                        (v, &expr.kind),
                        (V::Word(_), ExprKind::Name(_))
                            | (V::Record(_) | V::Map(_), ExprKind::Object(_))
                            | (V::Str, ExprKind::String(_))
                            | (V::List(_), ExprKind::List(_))
                    )
                };
                match options.iter().find(|o| shape_matches(o)) {
                    Some(option) => self.check_value(option, expr, scope),
                    None => self.invalid(expr, "a word or an object"),
                }
            }
        }
    }

    fn invalid(&mut self, expr: &Expr, expected: &str) -> Value {
        let found = describe_expr(expr);
        self.error(codes::INVALID_VALUE, expr.span, format!("expected {expected}, found {found}")).labels[0].message =
            format!("expected {expected}");
        Value::Invalid
    }

    /// A number literal's value and unit; reports unknown units.
    fn number(&mut self, expr: &Expr) -> Option<(f64, String)> {
        match &expr.kind {
            ExprKind::Number { value, unit } => {
                if !KNOWN_UNITS.contains(&unit.as_str()) {
                    self.error(codes::UNKNOWN_UNIT, expr.span, format!("unknown unit `{unit}`"))
                        .with_note("units: ms, s, m, h, d (durations); k, M (counts); % (percentages)")
                        .labels[0]
                        .message = "unknown unit".into();
                    return None;
                }
                Some((*value, unit.clone()))
            }
            _ => None,
        }
    }

    pub fn env_scope(&self, env: Env) -> Scope {
        Scope { env: Some(env), vars: Vec::new() }
    }

    /// The type of variable `name` in `scope`, if it names one.
    pub fn lookup(&self, scope: &Scope, name: &str) -> Option<Ty> {
        if let Some((_, ty)) = scope.vars.iter().rev().find(|(n, _)| n == name) {
            return Some(ty.clone());
        }
        if let Some(ty) = self.extra_vars.get(name) {
            return Some(ty.clone());
        }
        let env = scope.env?;
        if env == Env::Payload && name == "payload" {
            return Some(self.workflow.as_ref().and_then(|w| w.payload.clone()).unwrap_or(Ty::Any));
        }
        if matches!(env, Env::Nodes | Env::Payload) {
            let workflow = self.workflow.as_ref()?;
            if let Some((_, ty, _)) = workflow.nodes.get(name) {
                return Some(ty.clone());
            }
            if name == "input" {
                return Some(workflow.input.clone());
            }
            match name {
                "calls" if workflow.calls.is_some() => return workflow.calls.clone(),
                "facts" if workflow.facts.is_some() => return workflow.facts.clone(),
                _ => {}
            }
        }
        None
    }

    /// Every name `scope` defines (for "did you mean" and notes; only
    /// computed when a lookup failed).
    /// The names in scope other than the workflow's nodes (variables,
    /// `payload`, `input`), and whether the nodes are in scope too.
    pub fn scope_names(&self, scope: &Scope) -> (Vec<String>, bool) {
        let mut names: Vec<String> = scope.vars.iter().map(|(n, _)| n.clone()).collect();
        names.extend(self.extra_vars.keys().cloned());
        if scope.env == Some(Env::Payload) {
            names.push("payload".into());
        }
        let nodes = matches!(scope.env, Some(Env::Nodes | Env::Payload)) && self.workflow.is_some();
        if nodes {
            names.push("input".into());
            if self.workflow.as_ref().is_some_and(|w| w.calls.is_some()) {
                names.extend(["calls", "facts"].map(String::from));
            }
        }
        (names, nodes)
    }

    fn check_node_ref(&mut self, name: &str, span: Span) -> bool {
        if self.workflow.is_none() {
            self.error(codes::INVALID_VALUE, span, format!("`{name}` would name a node, but there are no nodes here"))
                .with_note("actions that name a node (goto, activate, revise, replan) belong in workflows, their nodes and gates");
            return false;
        }
        self.node_exists(name, span)
    }

    fn check_state(&mut self, expr: &Expr) -> Value {
        let ExprKind::Field { base, name: state } = &expr.kind else {
            return self.invalid(expr, "a task state `Machine.STATE`");
        };
        let ExprKind::Name(machine) = &base.kind else {
            return self.invalid(expr, "a task state `Machine.STATE`");
        };
        if self.resolve(machine, base.span, &[Kind::Machine]).is_none() {
            return Value::Invalid;
        }
        let Some(states) = self.machines.get(machine).map(|m| m.states.clone()) else {
            return Value::Invalid;
        };
        if !states.contains(&state.text) {
            self.undefined(&state.text, state.span, "state", states.iter().map(String::as_str));
            return Value::Invalid;
        }
        Value::State { machine: machine.clone(), state: state.text.clone() }
    }

    /// A budget zone's action: one the runtime and the model checker give
    /// a meaning when a zone is entered (`spec::ZONE_ACTIONS`), else E0116.
    fn check_zone_action(&mut self, expr: &Expr) -> Value {
        let value = self.check_action(expr);
        if let Value::Action(action) = &value {
            if !spec::ZONE_ACTIONS.contains(&action.name.as_str()) {
                self.error(codes::NOT_SUPPORTED, expr.span, format!("`{}` as a budget zone's action is not supported yet", action.name))
                    .with_note(format!("a zone may take: {}", spec::ZONE_ACTIONS.join(", ")))
                    .with_help("end the run with `fallback(reason)`, or route on the budget's `on_exhausted`")
                    .labels[0]
                    .message = "no node or gate for it to act on when a zone is entered".into();
                return Value::Invalid;
            }
        }
        value
    }

    fn check_action(&mut self, expr: &Expr) -> Value {
        let (name, name_span, args): (&str, Span, &[ast::Argument]) = match &expr.kind {
            ExprKind::Name(n) => (n, expr.span, &[]),
            ExprKind::Call { callee, args } => match &callee.kind {
                ExprKind::Name(n) => (n, callee.span, args.as_slice()),
                _ => return self.invalid(expr, "an action such as `continue` or `terminate(reason)`"),
            },
            _ => return self.invalid(expr, "an action such as `continue` or `terminate(reason)`"),
        };
        let Some((_, params, _)) = spec::ACTIONS.iter().find(|(n, _, _)| *n == name) else {
            let names: Vec<&str> = spec::ACTIONS.iter().map(|(n, _, _)| *n).collect();
            let suggestion = closest_name(name, names.iter().copied());
            let d = Diagnostic::new(codes::INVALID_VALUE, self.file, name_span, format!("unknown action `{name}`"))
                .with_primary_message("not an action")
                .with_note(format!("actions: {}", names.join(", ")));
            let d = match suggestion {
                Some(s) => d.with_suggestion(s),
                None => d,
            };
            self.diagnostics.push(d);
            return Value::Invalid;
        };
        if args.len() != params.len() && !(name == "replan" && args.len() <= 1) {
            self.error(
                codes::WRONG_ARGUMENTS,
                expr.span,
                format!(
                    "action `{name}` takes {} argument{}, {} given",
                    params.len(),
                    if params.len() == 1 { "" } else { "s" },
                    args.len()
                ),
            );
            return Value::Invalid;
        }
        let mut out = Vec::new();
        for (arg, param) in args.iter().zip(params.iter()) {
            let ExprKind::Name(arg_name) = &arg.value.kind else {
                self.error(codes::WRONG_ARGUMENTS, arg.value.span, format!("the argument of `{name}` must be a name"));
                return Value::Invalid;
            };
            let ok = match param {
                spec::ActionArg::Reason => true,
                spec::ActionArg::Node => self.check_node_ref(arg_name, arg.value.span),
                spec::ActionArg::Principal => self.resolve(arg_name, arg.value.span, &[Kind::Principal]).is_some(),
                spec::ActionArg::Provider => self.resolve(arg_name, arg.value.span, &[Kind::Provider]).is_some(),
            };
            if !ok {
                return Value::Invalid;
            }
            out.push(arg_name.clone());
        }
        if name == "replan" {
            if let Some(arg) = args.first() {
                if let ExprKind::Name(n) = &arg.value.kind {
                    if self.check_node_ref(n, arg.value.span) {
                        out.push(n.clone());
                    }
                }
            }
        }
        match ir::ActionKind::parse(name) {
            Some(kind) => Value::Action(ir::Action { name: kind, args: out }),
            None => Value::Invalid,
        }
    }

    fn check_evaluator(&mut self, expr: &Expr) -> Value {
        let (name, name_span, args): (&str, Span, &[ast::Argument]) = match &expr.kind {
            ExprKind::Name(n) => (n, expr.span, &[]),
            ExprKind::Call { callee, args } => match &callee.kind {
                ExprKind::Name(n) => (n, callee.span, args.as_slice()),
                _ => return self.invalid(expr, "an evaluator call"),
            },
            _ => return self.invalid(expr, "an evaluator call such as `predicate(…)` or `audio_present(video.scenes)`"),
        };
        let scope = self.env_scope(Env::Nodes);
        let builtin = spec::BUILTIN_EVALUATORS.iter().any(|(n, _)| *n == name) && !self.globals.contains_key(name);
        if builtin {
            let expected = if name == "schema_valid" { 2 } else { 1 };
            if args.len() != expected {
                self.error(
                    codes::WRONG_ARGUMENTS,
                    expr.span,
                    format!("`{name}` takes {expected} argument{}", if expected == 1 { "" } else { "s" }),
                );
                return Value::Invalid;
            }
            let mut typed = vec![self.type_expr(&args[0].value, &scope)];
            if name == "predicate" && !matches!(typed[0].ty, Ty::Bool | Ty::Any) {
                self.error(codes::TYPE_MISMATCH, args[0].value.span, format!("`predicate` needs a bool, but this is {}", typed[0].ty));
            }
            if name == "schema_valid" {
                let ty = self.lower_type(&args[1].value);
                typed.push(ir::TExpr { kind: ir::TExprKind::Literal { value: Box::new(Value::Type(ty.clone())) }, ty });
            }
            return Value::Evaluator { name: name.to_string(), builtin: true, args: typed };
        }
        if self.globals.contains_key(name) || !spec::BUILTIN_EVALUATORS.iter().any(|(n, _)| *n == name) {
            if !self.globals.contains_key(name) {
                let mut candidates: Vec<String> =
                    self.globals.iter().filter(|(_, g)| g.kind == Kind::Evaluator).map(|(n, _)| n.clone()).collect();
                candidates.extend(spec::BUILTIN_EVALUATORS.iter().map(|(n, _)| n.to_string()));
                self.undefined(name, name_span, "evaluator", candidates.iter().map(String::as_str));
                return Value::Invalid;
            }
            if self.resolve(name, name_span, &[Kind::Evaluator]).is_none() {
                return Value::Invalid;
            }
        }
        if args.len() > 1 {
            self.error(codes::WRONG_ARGUMENTS, expr.span, format!("evaluator `{name}` takes one argument: its input"));
            return Value::Invalid;
        }
        let typed: Vec<ir::TExpr> = args.iter().map(|a| self.type_expr(&a.value, &scope)).collect();
        // The argument is the evaluator's input, or a list of inputs: then
        // the evaluator runs once per item and the outcomes combine (BLOCK
        // wins).
        if let (Some(arg), Some(input)) = (typed.first(), self.decl_prop_type(name, "input")) {
            let item = match self.expand(arg.ty.non_null()) {
                Ty::List { item } => Some(*item),
                _ => None,
            };
            let fits = self.assignable(&arg.ty, &input) || item.as_ref().is_some_and(|i| self.assignable(i, &input));
            if !fits {
                self.error(
                    codes::TYPE_MISMATCH,
                    args[0].value.span,
                    format!("evaluator `{name}` takes {input} (or a list of them), but this is {}", arg.ty),
                );
            }
        }
        Value::Evaluator { name: name.to_string(), builtin: false, args: typed }
    }

    fn check_join_rule(&mut self, expr: &Expr) -> Value {
        let rule =
            |rule: &str| Value::JoinRule { rule: rule.to_string(), weights: IndexMap::new(), evaluator: None, key: None, quorum: None };
        let vote = |rule: &str, key: &Expr, quorum: Option<u64>, weights: IndexMap<String, f64>| match &key.kind {
            ExprKind::Name(key) => Value::JoinRule { rule: rule.to_string(), weights, evaluator: None, key: Some(key.clone()), quorum },
            _ => Value::Invalid,
        };
        match &expr.kind {
            ExprKind::QuantifierWord(ast::Quantifier::All) => rule("all"),
            ExprKind::QuantifierWord(ast::Quantifier::Any) => rule("any"),
            ExprKind::Name(n) if n == "majority" || n == "first" => rule(n),
            ExprKind::Call { callee, args } => match (&callee.kind, args.as_slice()) {
                (ExprKind::Name(n), [key]) if n == "majority" => match vote("majority", &key.value, None, IndexMap::new()) {
                    Value::Invalid => self.invalid(&key.value, "the field a vote counts (a name)"),
                    v => v,
                },
                (ExprKind::Name(n), [count, key]) if n == "quorum" => {
                    let quorum = match self.number(&count.value) {
                        Some((q, u)) if u.is_empty() && q >= 1.0 && q.fract() == 0.0 => q as u64,
                        _ => return self.invalid(&count.value, "the votes a value needs (a whole number, at least 1)"),
                    };
                    match vote("quorum", &key.value, Some(quorum), IndexMap::new()) {
                        Value::Invalid => self.invalid(&key.value, "the field a vote counts (a name)"),
                        v => v,
                    }
                }
                (ExprKind::Name(n), [key, arg]) if n == "weighted" => {
                    let Some(weights) = self.join_weights(&arg.value) else { return Value::Invalid };
                    match vote("weighted", &key.value, None, weights) {
                        Value::Invalid => self.invalid(&key.value, "the field a vote counts (a name)"),
                        v => v,
                    }
                }
                // Accepted before and never applied (the join waited for all
                // and merged): refused until they mean something.
                (ExprKind::Name(n), [_]) if n == "weighted" => {
                    self.error(codes::NOT_SUPPORTED, expr.span, "`weighted({…})` without a key is not supported")
                        .with_primary_message("nothing would weigh the branches")
                        .with_help("vote on a field of the branches' outputs: `weighted(key, { node: weight, … })`");
                    Value::Invalid
                }
                (ExprKind::Name(n), [_]) if n == "custom" => {
                    self.error(codes::NOT_SUPPORTED, expr.span, "`custom(evaluator)` join rules are not supported yet")
                        .with_primary_message("no run would apply the evaluator")
                        .with_help("vote with `majority(key)`, `quorum(n, key)` or `weighted(key, {…})`, or merge with `all` and compute over the results with a `compute` node");
                    Value::Invalid
                }
                _ => self.invalid(expr, JOIN_RULES),
            },
            _ => self.invalid(expr, JOIN_RULES),
        }
    }

    /// The weights of `weighted({ node: weight, … })` and of
    /// `weighted(key, { … })`: plain numbers keyed by nodes.
    fn join_weights(&mut self, arg: &Expr) -> Option<IndexMap<String, f64>> {
        let ExprKind::Object(fields) = &arg.kind else {
            self.invalid(arg, "an object of weights `{ node: 2, other: 1 }`");
            return None;
        };
        let mut weights = IndexMap::new();
        for field in fields {
            self.check_node_ref(&field.name.text, field.name.span);
            match self.number(&field.value) {
                Some((w, u)) if u.is_empty() => {
                    weights.insert(field.name.text.clone(), w);
                }
                _ => {
                    self.invalid(&field.value, "a weight (a number)");
                }
            }
        }
        Some(weights)
    }

    /// A tool node's `args`: typed in the workflow, checked against the
    /// tool's input record. The tool's input type is the current scope's
    /// `$tool_input` entry, set by the node check.
    fn check_args(&mut self, expr: &Expr) -> Value {
        let ExprKind::Object(fields) = &expr.kind else {
            return self.invalid(expr, "an object of arguments `{ field: expr }`");
        };
        let scope = self.env_scope(Env::Nodes);
        let input = self.tool_input.clone().map(|t| self.expand(&t));
        let mut out = ir::NameMap::default();
        for field in fields {
            let typed = self.type_expr(&field.value, &scope);
            if let Some(Ty::Record { fields: expected }) = &input {
                match expected.get(&field.name.text) {
                    Some(f) => {
                        let want = self.expand(&f.ty);
                        if !self.assignable(&typed.ty, &want) {
                            self.error(
                                codes::TYPE_MISMATCH,
                                field.value.span,
                                format!("argument `{}` should be {want}, but this is {}", field.name.text, typed.ty),
                            );
                        }
                    }
                    None => {
                        let names: Vec<&str> = expected.keys().map(String::as_str).collect();
                        let suggestion = closest_name(&field.name.text, names.iter().copied());
                        let d = Diagnostic::new(
                            codes::UNKNOWN_FIELD,
                            self.file,
                            field.name.span,
                            format!("the tool's input has no field `{}`", field.name.text),
                        )
                        .with_primary_message("unknown field");
                        let d = match suggestion {
                            Some(s) => d.with_suggestion(s),
                            None => d.with_note(format!("input fields: {}", flow_diagnostics::short_list(&names))),
                        };
                        self.diagnostics.push(d);
                    }
                }
            }
            out.insert(field.name.text.clone(), Value::Expr(typed));
        }
        if let Some(Ty::Record { fields: expected }) = &input {
            for (name, f) in expected {
                if !f.optional && !out.contains_key(name) {
                    self.error(codes::MISSING_PROPERTY, expr.span, format!("the tool's input field `{name}` is not given")).labels[0]
                        .message = format!("`{name}` missing");
                }
            }
        }
        Value::Record(out)
    }

    /// A `compute` node's `let`: each name typed over the nodes and the
    /// names before it, then in scope (as a declaration variable) for the
    /// rest of the node's block. A name may not hide a node or `input`.
    fn check_lets(&mut self, expr: &Expr) -> Value {
        let ExprKind::Object(fields) = &expr.kind else {
            return self.invalid(expr, "named values `{ name: expr, … }`");
        };
        let scope = self.env_scope(Env::Nodes);
        let mut out = ir::NameMap::default();
        // What the declaration gives before any `let` (a projection's `visits`, `steps`, …).
        let given: Vec<String> = self.extra_vars.keys().cloned().collect();
        for field in fields {
            let name = &field.name.text;
            let typed = self.type_expr(&field.value, &scope);
            let hides_node = self.workflow.as_ref().is_some_and(|w| w.nodes.contains_key(name)) || name == "input";
            if hides_node || self.extra_vars.contains_key(name) {
                let what = if hides_node {
                    "a node or the run's input"
                } else if given.contains(name) {
                    "what the run gives (`visits`, `steps`, `gates`, `run`)"
                } else {
                    "an earlier `let` name"
                };
                self.error(codes::INVALID_VALUE, field.name.span, format!("`{name}` would hide {what}"))
                    .with_primary_message("choose another name");
                continue;
            }
            self.extra_vars.insert(name.clone(), typed.ty.clone());
            out.insert(name.clone(), Value::Expr(typed));
        }
        Value::Record(out)
    }

    /// Whether a value of type `from` may be used where `to` is expected.
    pub fn assignable(&self, from: &Ty, to: &Ty) -> bool {
        let (from, to) = (self.expand(from), self.expand(to));
        match (&from, &to) {
            (Ty::Any, _) | (_, Ty::Any) => true,
            (Ty::Null, Ty::Nullable { .. }) => true,
            (Ty::Nullable { inner: a }, Ty::Nullable { inner: b }) => self.assignable(a, b),
            (a, Ty::Nullable { inner }) => self.assignable(a, inner),
            (Ty::Int, Ty::Float) => true,
            (Ty::Enum { .. }, Ty::String) => true,
            (Ty::Enum { values: a }, Ty::Enum { values: b }) => a.iter().all(|v| b.contains(v)),
            (Ty::String, Ty::Enum { .. }) => true, // checked at run time
            (Ty::List { item: a }, Ty::List { item: b }) => self.assignable(a, b),
            (Ty::Record { fields: a }, Ty::Record { fields: b }) => b.iter().all(|(name, field)| match a.get(name) {
                Some(have) => self.assignable(&have.ty, &field.ty),
                None => field.optional,
            }),
            (a, b) => a == b,
        }
    }
}

/// Units a number literal may carry.
const KNOWN_UNITS: &[&str] = &["", "ms", "s", "m", "h", "d", "k", "M", "%"];

fn unit_scale(unit: &str) -> f64 {
    match unit {
        "k" => 1e3,
        "M" => 1e6,
        _ => 1.0,
    }
}

fn duration_ms(value: f64, unit: &str) -> Option<u64> {
    let factor = match unit {
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        "" if value == 0.0 => 0.0,
        _ => return None,
    };
    let ms = value * factor;
    if ms < 0.0 || ms > u64::MAX as f64 {
        None
    } else {
        Some(ms as u64)
    }
}

/// A block with its `let` property first: a computation's `let` names are
/// in scope wherever the block uses them.
pub(crate) fn lets_first(body: &ast::Block) -> ast::Block {
    let mut reordered = body.clone();
    reordered.entries.sort_by_key(|e| !matches!(e, Entry::Property(p) if p.key.text == "let"));
    reordered
}

const JOIN_RULES: &str =
    "a join rule: all, any, majority, first, weighted({…}), custom(evaluator), majority(key), quorum(n, key) or weighted(key, {…})";

pub(crate) fn decl_kind(keyword: ast::DeclKeyword) -> Kind {
    match keyword {
        ast::DeclKeyword::Principal => Kind::Principal,
        ast::DeclKeyword::Provider => Kind::Provider,
        ast::DeclKeyword::Agent => Kind::Agent,
        ast::DeclKeyword::Tool => Kind::Tool,
        ast::DeclKeyword::Evaluator => Kind::Evaluator,
        ast::DeclKeyword::Budget => Kind::Budget,
        ast::DeclKeyword::Contract => Kind::Contract,
        ast::DeclKeyword::Blackboard => Kind::Blackboard,
        ast::DeclKeyword::Compute => Kind::Compute,
        ast::DeclKeyword::Projection => Kind::Projection,
        ast::DeclKeyword::Machine => Kind::Machine,
        ast::DeclKeyword::Workflow => Kind::Workflow,
    }
}

pub(crate) fn entry_kind(entry: &Entry) -> EntryKind {
    match entry {
        Entry::Property(_) => unreachable!("properties are handled before"),
        Entry::Handler(_) => EntryKind::Handler,
        Entry::Node(_) => EntryKind::Node,
        Entry::Gate(_) => EntryKind::Gate,
        Entry::Transfer(_) => EntryKind::Transfer,
        Entry::Policy(_) => EntryKind::Policy,
        Entry::Edge(_) => EntryKind::Edge,
        Entry::Record(_) => EntryKind::Record,
    }
}

fn entry_note(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Handler => "handlers (`on … -> …`) belong in workflows, nodes and gates",
        EntryKind::Node | EntryKind::Gate | EntryKind::Transfer => "nodes, gates, handoffs and delegations belong in workflows",
        EntryKind::Policy => "policies belong at the top level or in workflows",
        EntryKind::Edge => "edges belong in workflows (between nodes) and machines (between states)",
        EntryKind::Record => "records belong in gates and in nodes that complete with an output (not `end`, `parallel` or `flow`)",
    }
}

pub(crate) fn object_as_block(fields: &[ast::Field], span: Span) -> ast::Block {
    ast::Block {
        entries: fields
            .iter()
            .map(|f| Entry::Property(ast::Property { key: f.name.clone(), value: f.value.clone(), span: f.span }))
            .collect(),
        span,
    }
}

pub(crate) fn describe_expr(expr: &Expr) -> String {
    match &expr.kind {
        ExprKind::Number { unit, .. } if unit.is_empty() => "a number".into(),
        ExprKind::Number { unit, .. } => format!("a number in `{unit}`"),
        ExprKind::Money(_) => "an amount of money".into(),
        ExprKind::String(_) => "a string".into(),
        ExprKind::Bool(_) => "a bool".into(),
        ExprKind::Null => "`null`".into(),
        ExprKind::Name(n) => format!("the name `{n}`"),
        ExprKind::List(_) => "a list".into(),
        ExprKind::Object(_) => "an object".into(),
        ExprKind::Call { .. } => "a call".into(),
        _ => "an expression".into(),
    }
}

/// Validates a JSON value as a JSON Schema against its meta-schema.
/// Returns the JSON pointer and message of the first problem.
fn validate_schema(value: &serde_json::Value) -> Result<(), (String, String)> {
    const KNOWN: &[&str] = &[
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    ];
    if let Some(meta) = value.get("$schema") {
        let ok = meta.as_str().is_some_and(|m| KNOWN.iter().any(|k| m.trim_end_matches('#') == *k));
        if !ok {
            return Err(("/$schema".into(), format!("unknown meta-schema {meta}")));
        }
    }
    if !value.is_object() && !value.is_boolean() {
        return Err((String::new(), "a schema must be an object or a boolean".into()));
    }
    jsonschema::meta::validate(value).map_err(|error| (error.instance_path().to_string(), error.to_string()))
}

/// The most bytes of a declaration's line kept on either side of its name.
const DETAIL_REACH: usize = 80;

/// The line declaring the name at `span`, trimmed, for hovers and symbol
/// lists: at most [`DETAIL_REACH`] bytes either side of the name, so that a
/// file of one long line does not copy that line into every symbol.
fn declaration_line(text: &str, span: Span) -> String {
    let (start, end) = (span.start as usize, span.end as usize);
    let mut from = start.saturating_sub(DETAIL_REACH);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let mut to = end.saturating_add(DETAIL_REACH).min(text.len());
    while !text.is_char_boundary(to) {
        to -= 1;
    }
    let (before, after) = (&text[from..start], &text[start..to]);
    let (line_start, clipped_left) = match before.rfind('\n') {
        Some(i) => (from + i + 1, false),
        None => (from, from > 0),
    };
    let (line_end, clipped_right) = match after.find('\n') {
        Some(i) => (start + i, false),
        None => (to, to < text.len()),
    };
    let mut line = text[line_start..line_end].trim().to_string();
    if clipped_left {
        line.insert_str(0, "… ");
    }
    if clipped_right {
        line.push_str(" …");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::declaration_line;
    use flow_diagnostics::Span;

    fn span_of(text: &str, name: &str) -> Span {
        let start = text.find(name).expect("the name") as u32;
        Span { start, end: start + name.len() as u32 }
    }

    #[test]
    fn a_short_line_is_kept_whole() {
        let text = "x\n  agent writer { provider: local }  \ny";
        assert_eq!(declaration_line(text, span_of(text, "writer")), "agent writer { provider: local }");
    }

    #[test]
    fn a_long_line_is_clipped_around_the_name() {
        let text = format!("{}agent writer {{ provider: local }}{}", "é".repeat(500), " x".repeat(500));
        let detail = declaration_line(&text, span_of(&text, "writer"));
        assert!(detail.starts_with("… ") && detail.ends_with(" …"), "{detail}");
        assert!(detail.contains("agent writer { provider: local }"), "{detail}");
        assert!(detail.len() < 2 * super::DETAIL_REACH + 20, "{}", detail.len());
    }
}
