//! Validating artifacts against their Flow types, through JSON Schema.
//!
//! A [`Ty`] becomes a draft 2020-12 schema ([`ty_to_schema`]); declared
//! types become `$defs` reached by `$ref`, so recursive types work. Records
//! are structural: extra properties are allowed.

use flow_check::ir::TypeDef;
use flow_check::types::Ty;
use indexmap::{IndexMap, IndexSet};
use serde_json::{json, Map, Value as Json};
use std::fmt;

/// The most errors [`Validator::validate`] reports.
const MAX_ERRORS: usize = 10;

/// The JSON Schema (draft 2020-12) of values of `ty`.
///
/// Named types are resolved through `types` and emitted once each under
/// `$defs`, referred to by `$ref`. A name missing from `types` accepts
/// anything (the checker has already reported it).
pub fn ty_to_schema(ty: &Ty, types: &IndexMap<String, TypeDef>) -> Json {
    let mut schema = match node_schema(ty) {
        Json::Object(map) => map,
        _ => Map::new(),
    };
    // Collect the declared types reachable from `ty`, transitively.
    let mut names: IndexSet<String> = IndexSet::new();
    collect_names(ty, &mut names);
    let mut defs = Map::new();
    let mut next = 0;
    while next < names.len() {
        let name = names[next].clone();
        next += 1;
        match types.get(&name) {
            Some(def) => {
                collect_names(&def.ty, &mut names);
                defs.insert(name, node_schema(&def.ty));
            }
            None => {
                defs.insert(name, json!({}));
            }
        }
    }
    let mut root = Map::new();
    root.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
    root.append(&mut schema);
    if !defs.is_empty() {
        root.insert("$defs".into(), Json::Object(defs));
    }
    Json::Object(root)
}

/// The schema of one type, with named types as `$ref`s.
fn node_schema(ty: &Ty) -> Json {
    match ty {
        Ty::Any => json!({}),
        Ty::Null => json!({ "type": "null" }),
        Ty::Bool => json!({ "type": "boolean" }),
        Ty::Int => json!({ "type": "integer" }),
        Ty::Float | Ty::Duration | Ty::Money => json!({ "type": "number" }),
        Ty::Percent => json!({ "type": "number", "minimum": 0, "maximum": 1 }),
        Ty::String => json!({ "type": "string" }),
        Ty::List { item } => json!({ "type": "array", "items": node_schema(item) }),
        Ty::Record { fields } => {
            let properties: Map<String, Json> = fields.iter().map(|(name, field)| (name.clone(), node_schema(&field.ty))).collect();
            let required: Vec<&String> = fields.iter().filter(|(_, field)| !field.optional).map(|(name, _)| name).collect();
            json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": true })
        }
        Ty::Enum { values } => json!({ "enum": values }),
        Ty::Nullable { inner } => nullable(node_schema(inner)),
        Ty::Named { name } => json!({ "$ref": format!("#/$defs/{}", pointer_segment(name)) }),
    }
}

/// `schema` or null. A single `type` gains `"null"` and an `enum` gains
/// `null` (clearer errors than `anyOf`); other schemas use `anyOf`.
fn nullable(mut schema: Json) -> Json {
    if let Some(map) = schema.as_object_mut() {
        if let Some(Json::String(ty)) = map.get("type") {
            let types = json!([ty, "null"]);
            map.insert("type".into(), types);
            return schema;
        }
        if let Some(Json::Array(values)) = map.get_mut("enum") {
            values.push(Json::Null);
            return schema;
        }
    }
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// Escapes a `$defs` key for use in a `$ref` URI fragment (a JSON pointer,
/// percent-encoded where a URI needs it).
fn pointer_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c if c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '!' | '$' | '\'' | '(' | ')' | '*' | '+' | ',' | ';' | '=' | ':' | '@') =>
            {
                out.push(c)
            }
            c => {
                let mut buf = [0u8; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
        }
    }
    out
}

fn collect_names(ty: &Ty, names: &mut IndexSet<String>) {
    match ty {
        Ty::Named { name } => {
            names.insert(name.clone());
        }
        Ty::List { item } => collect_names(item, names),
        Ty::Nullable { inner } => collect_names(inner, names),
        Ty::Record { fields } => fields.values().for_each(|field| collect_names(&field.ty, names)),
        Ty::Any | Ty::Null | Ty::Bool | Ty::Int | Ty::Float | Ty::String | Ty::Duration | Ty::Money | Ty::Percent | Ty::Enum { .. } => {}
    }
}

/// A compiled validator for one type: compile once, validate many values.
pub struct Validator {
    schema: Json,
    /// `None` for `any`: every value is valid, and nothing is compiled
    /// (compiling even an empty schema checks it against the meta-schema).
    compiled: Option<jsonschema::Validator>,
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validator").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl Validator {
    /// Compiles a validator for `ty`, resolving named types through `types`.
    /// Fails when a named type is not declared in `types` or the schema does
    /// not compile.
    pub fn new(ty: &Ty, types: &IndexMap<String, TypeDef>) -> Result<Validator, String> {
        let mut names = IndexSet::new();
        collect_names(ty, &mut names);
        let mut next = 0;
        while next < names.len() {
            let name = names[next].clone();
            next += 1;
            match types.get(&name) {
                Some(def) => collect_names(&def.ty, &mut names),
                None => return Err(format!("unknown type `{name}`")),
            }
        }
        let schema = ty_to_schema(ty, types);
        let compiled = match ty {
            Ty::Any => None,
            _ => Some(jsonschema::validator_for(&schema).map_err(|e| format!("cannot compile the schema of {ty}: {e}"))?),
        };
        Ok(Validator { schema, compiled })
    }

    /// The JSON Schema this validator checks against.
    pub fn schema(&self) -> &Json {
        &self.schema
    }

    /// Checks `value`. On failure, returns at most ten errors, each as
    /// `at /path: message` (`at /` for the value itself), in a
    /// deterministic order.
    pub fn validate(&self, value: &Json) -> Result<(), Vec<String>> {
        let Some(compiled) = &self.compiled else { return Ok(()) };
        if compiled.is_valid(value) {
            return Ok(());
        }
        let mut errors: Vec<String> = compiled
            .iter_errors(value)
            .take(MAX_ERRORS)
            .map(|error| {
                let path = error.instance_path().to_string();
                let path = if path.is_empty() { "/".to_string() } else { path };
                format!("at {path}: {error}")
            })
            .collect();
        if errors.is_empty() {
            errors.push("at /: the value does not match its type".into());
        }
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_check::ir::Loc;
    use flow_check::types::FieldTy;

    fn field(ty: Ty, optional: bool) -> FieldTy {
        FieldTy { ty, optional }
    }

    fn record(fields: Vec<(&str, FieldTy)>) -> Ty {
        Ty::Record { fields: fields.into_iter().map(|(n, f)| (n.to_string(), f)).collect() }
    }

    fn named(name: &str) -> Ty {
        Ty::Named { name: name.into() }
    }

    fn types(defs: Vec<(&str, Ty)>) -> IndexMap<String, TypeDef> {
        defs.into_iter().map(|(name, ty)| (name.to_string(), TypeDef { name: name.to_string(), ty, loc: Loc::default() })).collect()
    }

    fn doc() -> Ty {
        record(vec![
            ("title", field(Ty::String, false)),
            ("count", field(Ty::Int, false)),
            ("note", field(Ty::String, true)),
            ("score", field(Ty::nullable(Ty::Float), false)),
            ("verdict", field(Ty::Enum { values: vec!["accept".into(), "revise".into()] }, false)),
            ("share", field(Ty::Percent, true)),
            ("tags", field(Ty::list(Ty::String), true)),
            ("extra", field(Ty::Any, true)),
        ])
    }

    fn check(ty: &Ty, value: Json) -> Result<(), Vec<String>> {
        Validator::new(ty, &IndexMap::new()).expect("compiles").validate(&value)
    }

    #[test]
    fn primitives() {
        assert!(check(&Ty::Int, json!(3)).is_ok());
        assert!(check(&Ty::Int, json!(3.5)).is_err());
        assert!(check(&Ty::Float, json!(3)).is_ok());
        assert!(check(&Ty::String, json!(3)).is_err());
        assert!(check(&Ty::Bool, json!(true)).is_ok());
        assert!(check(&Ty::Null, json!(null)).is_ok());
        assert!(check(&Ty::Null, json!(0)).is_err());
        assert!(check(&Ty::Duration, json!(1500)).is_ok());
        assert!(check(&Ty::Money, json!("$1")).is_err());
        assert!(check(&Ty::Percent, json!(0.1)).is_ok());
        assert!(check(&Ty::Percent, json!(10)).is_err());
        assert!(check(&Ty::Any, json!({ "x": [1, null] })).is_ok());
        assert_eq!(ty_to_schema(&Ty::Any, &IndexMap::new()), json!({ "$schema": "https://json-schema.org/draft/2020-12/schema" }));
    }

    #[test]
    fn records_with_optional_and_nullable_fields() {
        let ty = doc();
        assert!(check(&ty, json!({ "title": "t", "count": 1, "score": null, "verdict": "accept" })).is_ok());
        // Optional fields present, and extra fields, are fine.
        assert!(
            check(&ty, json!({ "title": "t", "count": 1, "score": 0.5, "verdict": "revise", "note": "n", "tags": [], "more": 1 })).is_ok()
        );
        // A nullable field is still required.
        let errors = check(&ty, json!({ "title": "t", "count": 1, "verdict": "accept" })).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("at /: ") && errors[0].contains("score"), "{errors:?}");
        // An optional field, when present, must have its type.
        let errors = check(&ty, json!({ "title": "t", "count": 1, "score": null, "verdict": "accept", "note": null })).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("at /note: "), "{errors:?}");
    }

    #[test]
    fn errors_have_paths_in_order() {
        let ty = doc();
        let value = json!({ "title": 1, "count": "x", "score": "high", "verdict": "maybe", "share": 2, "tags": ["a", 3] });
        let errors = check(&ty, value.clone()).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.split(':').next().unwrap()).collect();
        assert_eq!(paths, ["at /title", "at /count", "at /score", "at /verdict", "at /share", "at /tags/1"], "{errors:?}");
        assert!(errors[3].contains("maybe"), "{errors:?}");
        // Deterministic.
        assert_eq!(check(&ty, value).unwrap_err(), errors);
        // Not an object at all.
        let errors = check(&ty, json!([1])).unwrap_err();
        assert!(errors[0].starts_with("at /: "), "{errors:?}");
    }

    #[test]
    fn at_most_ten_errors() {
        let ty = Ty::list(Ty::Int);
        let value = Json::Array((0..25).map(|i| json!(format!("{i}"))).collect());
        let errors = check(&ty, value).unwrap_err();
        assert_eq!(errors.len(), 10);
        assert!(errors[0].starts_with("at /0: ") && errors[9].starts_with("at /9: "), "{errors:?}");
    }

    #[test]
    fn enums_and_nullable() {
        let verdict = Ty::Enum { values: vec!["accept".into(), "revise".into()] };
        assert!(check(&verdict, json!("accept")).is_ok());
        assert!(check(&verdict, json!("other")).is_err());
        assert!(check(&verdict, json!(null)).is_err());
        let nullable = Ty::nullable(verdict);
        assert!(check(&nullable, json!(null)).is_ok());
        assert!(check(&nullable, json!("revise")).is_ok());
        let errors = check(&nullable, json!("other")).unwrap_err();
        assert!(errors[0].starts_with("at /: ") && errors[0].contains("other"), "{errors:?}");
        assert_eq!(ty_to_schema(&nullable, &IndexMap::new())["enum"], json!(["accept", "revise", null]));
        // Nullable records and lists keep their shape.
        let maybe = Ty::nullable(record(vec![("x", field(Ty::list(Ty::nullable(Ty::Int)), false))]));
        assert!(check(&maybe, json!(null)).is_ok());
        assert!(check(&maybe, json!({ "x": [1, null] })).is_ok());
        let errors = check(&maybe, json!({ "x": [1, "2"] })).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("at /x/1: "), "{errors:?}");
        assert!(check(&maybe, json!(3)).is_err());
        // A nullable name uses `anyOf`.
        let defs = types(vec![("N", Ty::Int)]);
        let validator = Validator::new(&Ty::nullable(named("N")), &defs).unwrap();
        assert!(validator.validate(&json!(null)).is_ok() && validator.validate(&json!(1)).is_ok());
        assert!(validator.validate(&json!("1")).is_err());
    }

    #[test]
    fn recursive_named_types() {
        // type Tree = { label: string, children: [Tree], parent?: Link }; type Link = Tree?
        let tree = record(vec![
            ("label", field(Ty::String, false)),
            ("children", field(Ty::list(named("Tree")), false)),
            ("parent", field(named("Link"), true)),
        ]);
        let defs = types(vec![("Tree", tree), ("Link", Ty::nullable(named("Tree")))]);
        let schema = ty_to_schema(&named("Tree"), &defs);
        assert_eq!(schema["$ref"], json!("#/$defs/Tree"));
        assert_eq!(schema["$defs"].as_object().unwrap().keys().collect::<Vec<_>>(), ["Tree", "Link"]);
        let validator = Validator::new(&named("Tree"), &defs).unwrap();
        let good = json!({ "label": "a", "children": [{ "label": "b", "children": [], "parent": null }] });
        assert_eq!(validator.validate(&good), Ok(()));
        let bad = json!({ "label": "a", "children": [{ "label": "b", "children": [{ "label": 3, "children": [] }] }] });
        let errors = validator.validate(&bad).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("at /children/0/children/0/label: "), "{errors:?}");
        // A list of trees, through the name.
        let forest = Validator::new(&Ty::list(named("Tree")), &defs).unwrap();
        assert!(forest.validate(&json!([good])).is_ok());
        assert!(forest.validate(&json!([{ "label": "x" }])).is_err());
    }

    #[test]
    fn unknown_named_type_is_an_error() {
        let err = Validator::new(&Ty::list(named("Missing")), &IndexMap::new()).unwrap_err();
        assert!(err.contains("Missing"), "{err}");
        // The schema alone accepts anything there.
        let schema = ty_to_schema(&named("Missing"), &IndexMap::new());
        assert_eq!(schema["$defs"]["Missing"], json!({}));
    }

    #[test]
    fn odd_type_names_are_escaped() {
        let defs = types(vec![("std.review/Verdict x", Ty::Enum { values: vec!["ok".into()] })]);
        let ty = named("std.review/Verdict x");
        assert_eq!(ty_to_schema(&ty, &defs)["$ref"], json!("#/$defs/std.review~1Verdict%20x"));
        let validator = Validator::new(&ty, &defs).unwrap();
        assert!(validator.validate(&json!("ok")).is_ok());
        assert!(validator.validate(&json!("no")).is_err());
    }
}
