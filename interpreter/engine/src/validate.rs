//! Validating artifacts against their Flow types, through JSON Schema.
//!
//! One validator for every run-time boundary ([`Validator`]): agent
//! outputs, tool inputs and outputs, handoff payloads, delegation inputs,
//! contract outputs, the workflow's input and output, and `schema`
//! evaluators and `schema_valid` gates.
//!
//! A [`Ty`] becomes a draft 2020-12 schema; declared types become `$defs`
//! reached by `$ref`, so recursive types work. Inline Flow types are
//! structural: records allow extra properties. The type of a JSON Schema
//! file (a [`TypeDef`] with its `schema`) is validated against that schema
//! as written — every keyword of its draft (`minLength`, `pattern`,
//! `maximum`, `minItems`, `additionalProperties`, `enum`, `$ref`, `format`,
//! …), not only the structural subset the checker sees. Each file is its
//! own resource (its `$schema`, its local `$ref`s); a `$ref` to another
//! file or a URL is not followed (the run reads no schema files) and
//! accepts any value, as it is `any` statically.
//!
//! [`ty_to_schema`] is what agents are asked for (the structured output a
//! provider is sent): the structural schema, without the files' keywords.

use flow_check::ir::{NameMap, TypeDef};
use flow_check::types::Ty;
use indexmap::IndexSet;
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::fmt;

/// The most errors [`Validator::validate`] reports.
const MAX_ERRORS: usize = 10;

/// The base of the URIs under which JSON Schema files are resources.
const FILE_URI: &str = "https://flow.invalid/schema/";

/// The JSON Schema (draft 2020-12) of values of `ty`, as requested from
/// agents: structural (a JSON Schema file's type is its structural subset).
///
/// Named types are resolved through `types` and emitted once each under
/// `$defs`, referred to by `$ref`. A name missing from `types` accepts
/// anything (the checker has already reported it).
pub fn ty_to_schema(ty: &Ty, types: &NameMap<TypeDef>) -> Json {
    build_schema(ty, types, &mut None)
}

/// The schema of `ty`; with `files`, the types of JSON Schema files are
/// `$ref`s to their files' URIs, collected in `files` (the validator's
/// schema), else their structural types, inline (they never recur).
fn build_schema(ty: &Ty, types: &NameMap<TypeDef>, files: &mut Option<HashMap<String, Json>>) -> Json {
    let structural = files.is_none();
    let inline = |name: &str| structural && types.get(name).is_some_and(|def| def.schema.is_some());
    let mut schema = match node_schema(ty, types, &inline) {
        Json::Object(map) => map,
        _ => Map::new(),
    };
    // Collect the declared types reachable from `ty`, transitively.
    let mut names: IndexSet<String> = IndexSet::new();
    collect_names(ty, types, &inline, &mut names);
    let mut defs = Map::new();
    let mut next = 0;
    while next < names.len() {
        let name = names[next].clone();
        next += 1;
        match types.get(&name) {
            Some(TypeDef { schema: Some(file), .. }) if files.is_some() => {
                let uri = format!("{FILE_URI}{}", uri_segment(&name));
                defs.insert(name, json!({ "$ref": uri }));
                if let Some(files) = files.as_mut() {
                    files.insert(uri, file.clone());
                }
            }
            Some(def) => {
                collect_names(&def.ty, types, &inline, &mut names);
                defs.insert(name, node_schema(&def.ty, types, &inline));
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

/// A type name as a URI path segment: unreserved characters kept, the
/// rest percent-encoded.
fn uri_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Serves JSON Schema files to the validator by their URIs; anything else
/// (a `$ref` to another file or a URL) is the schema `true`.
struct Files(HashMap<String, Json>);

impl jsonschema::Retrieve for Files {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Json, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str();
        let uri = uri.split_once('#').map(|(u, _)| u).unwrap_or(uri);
        Ok(self.0.get(uri).cloned().unwrap_or(Json::Bool(true)))
    }
}

/// The schema of one type, with named types as `$ref`s (except those
/// `inline` says to expand in place).
fn node_schema(ty: &Ty, types: &NameMap<TypeDef>, inline: &dyn Fn(&str) -> bool) -> Json {
    match ty {
        Ty::Any => json!({}),
        Ty::Null => json!({ "type": "null" }),
        Ty::Bool => json!({ "type": "boolean" }),
        Ty::Int => json!({ "type": "integer" }),
        Ty::Float | Ty::Duration | Ty::Money => json!({ "type": "number" }),
        Ty::Percent => json!({ "type": "number", "minimum": 0, "maximum": 1 }),
        Ty::String => json!({ "type": "string" }),
        Ty::List { item } => json!({ "type": "array", "items": node_schema(item, types, inline) }),
        Ty::Record { fields } => {
            let properties: Map<String, Json> =
                fields.iter().map(|(name, field)| (name.clone(), node_schema(&field.ty, types, inline))).collect();
            let required: Vec<&String> = fields.iter().filter(|(_, field)| !field.optional).map(|(name, _)| name).collect();
            json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": true })
        }
        Ty::Enum { values } => json!({ "enum": values }),
        Ty::Nullable { inner } => nullable(node_schema(inner, types, inline)),
        Ty::Named { name } if inline(name) => match types.get(name) {
            Some(def) => node_schema(&def.ty, types, inline),
            None => json!({}),
        },
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

/// The named types `ty` refers to (not those `inline` expands: their own
/// names, transitively).
fn collect_names(ty: &Ty, types: &NameMap<TypeDef>, inline: &dyn Fn(&str) -> bool, names: &mut IndexSet<String>) {
    match ty {
        Ty::Named { name } if inline(name) => {
            if let Some(def) = types.get(name) {
                collect_names(&def.ty, types, inline, names);
            }
        }
        Ty::Named { name } => {
            names.insert(name.clone());
        }
        Ty::List { item } => collect_names(item, types, inline, names),
        Ty::Nullable { inner } => collect_names(inner, types, inline, names),
        Ty::Record { fields } => fields.values().for_each(|field| collect_names(&field.ty, types, inline, names)),
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
    pub fn new(ty: &Ty, types: &NameMap<TypeDef>) -> Result<Validator, String> {
        let never = |_: &str| false;
        let mut names = IndexSet::new();
        collect_names(ty, types, &never, &mut names);
        let mut next = 0;
        while next < names.len() {
            let name = names[next].clone();
            next += 1;
            match types.get(&name) {
                Some(def) => collect_names(&def.ty, types, &never, &mut names),
                None => return Err(format!("unknown type `{name}`")),
            }
        }
        let mut files = Some(HashMap::new());
        let schema = build_schema(ty, types, &mut files);
        let compiled = match ty {
            Ty::Any => None,
            _ => Some(
                jsonschema::options()
                    .should_validate_formats(true)
                    .with_retriever(Files(files.unwrap_or_default()))
                    .build(&schema)
                    .map_err(|e| format!("cannot compile the schema of {ty}: {e}"))?,
            ),
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

    fn types(defs: Vec<(&str, Ty)>) -> NameMap<TypeDef> {
        defs.into_iter()
            .map(|(name, ty)| (name.to_string(), TypeDef { name: name.to_string(), ty, loc: Loc::default(), schema: None }))
            .collect()
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
        Validator::new(ty, &NameMap::default()).expect("compiles").validate(&value)
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
        assert_eq!(ty_to_schema(&Ty::Any, &NameMap::default()), json!({ "$schema": "https://json-schema.org/draft/2020-12/schema" }));
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
        assert_eq!(ty_to_schema(&nullable, &NameMap::default())["enum"], json!(["accept", "revise", null]));
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
        let err = Validator::new(&Ty::list(named("Missing")), &NameMap::default()).unwrap_err();
        assert!(err.contains("Missing"), "{err}");
        // The schema alone accepts anything there.
        let schema = ty_to_schema(&named("Missing"), &NameMap::default());
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

    // ------------------------------------------------- JSON Schema files

    /// The type of a JSON Schema file named `file`, as the checker lowers
    /// it: a named type whose definition keeps the schema as written.
    fn file_type(file: &str, schema: Json) -> (Ty, NameMap<TypeDef>) {
        let name = format!("schema({file:?})");
        let def = TypeDef { name: name.clone(), ty: flow_check::schema::to_ty(&schema), loc: Loc::default(), schema: Some(schema) };
        (named(&name), [(name, def)].into_iter().collect())
    }

    fn check_file(schema: Json, value: Json) -> Result<(), Vec<String>> {
        let (ty, defs) = file_type("x.json", schema);
        Validator::new(&ty, &defs).expect("compiles").validate(&value)
    }

    #[test]
    fn schema_files_hold_string_keywords() {
        let schema = json!({ "type": "string", "minLength": 5, "maxLength": 8 });
        assert!(check_file(schema.clone(), json!("hello")).is_ok());
        let errors = check_file(schema.clone(), json!("ab")).unwrap_err();
        assert!(errors[0].starts_with("at /: ") && errors[0].contains("shorter than 5"), "{errors:?}");
        assert!(check_file(schema, json!("much too long")).is_err());
    }

    #[test]
    fn schema_files_hold_patterns() {
        let schema = json!({ "type": "object", "properties": { "id": { "type": "string", "pattern": "^[A-Z]{3}-[0-9]+$" } } });
        assert!(check_file(schema.clone(), json!({ "id": "ABC-12" })).is_ok());
        let errors = check_file(schema, json!({ "id": "abc-12" })).unwrap_err();
        assert!(errors[0].starts_with("at /id: ") && errors[0].contains("does not match"), "{errors:?}");
    }

    #[test]
    fn schema_files_hold_number_keywords() {
        let schema = json!({ "type": "integer", "minimum": 1, "maximum": 3 });
        assert!(check_file(schema.clone(), json!(3)).is_ok());
        let errors = check_file(schema.clone(), json!(99)).unwrap_err();
        assert!(errors[0].contains("maximum of 3"), "{errors:?}");
        assert!(check_file(schema, json!(0)).is_err());
        let schema = json!({ "type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5 });
        assert!(check_file(schema.clone(), json!(1.5)).is_ok());
        assert!(check_file(schema.clone(), json!(0)).is_err());
        assert!(check_file(schema, json!(1.25)).is_err());
    }

    #[test]
    fn schema_files_hold_array_keywords() {
        let schema =
            json!({ "type": "array", "items": { "type": "string", "minLength": 1 }, "minItems": 2, "maxItems": 3, "uniqueItems": true });
        assert!(check_file(schema.clone(), json!(["a", "b"])).is_ok());
        let errors = check_file(schema.clone(), json!([])).unwrap_err();
        assert!(errors[0].contains("less than 2 items"), "{errors:?}");
        assert!(check_file(schema.clone(), json!(["a", "b", "c", "d"])).is_err());
        assert!(check_file(schema.clone(), json!(["a", "a"])).is_err());
        let errors = check_file(schema, json!(["a", ""])).unwrap_err();
        assert!(errors[0].starts_with("at /1: "), "{errors:?}");
    }

    #[test]
    fn schema_files_hold_object_keywords() {
        let schema = json!({
            "type": "object",
            "required": ["name"],
            "properties": { "name": { "type": "string" } },
            "additionalProperties": false,
            "maxProperties": 2
        });
        assert!(check_file(schema.clone(), json!({ "name": "n" })).is_ok());
        let errors = check_file(schema.clone(), json!({ "name": "n", "extra": 1 })).unwrap_err();
        assert!(errors[0].contains("extra") && errors[0].contains("not allowed"), "{errors:?}");
        assert!(check_file(schema, json!({})).is_err());
        // Inline Flow records stay structural: extra fields are allowed.
        let record = record(vec![("name", field(Ty::String, false))]);
        assert!(check(&record, json!({ "name": "n", "extra": 1 })).is_ok());
    }

    #[test]
    fn schema_files_hold_enums_and_consts() {
        // An enum of numbers is `any` statically, and holds at run time.
        let schema = json!({ "enum": [1, 2, "three"] });
        let (ty, defs) = file_type("e.json", schema.clone());
        assert_eq!(defs[0].ty, Ty::Any);
        assert!(Validator::new(&ty, &defs).unwrap().validate(&json!(2)).is_ok());
        let errors = check_file(schema, json!(4)).unwrap_err();
        assert!(errors[0].contains("is not one of"), "{errors:?}");
        assert!(check_file(json!({ "const": 7 }), json!(8)).is_err());
    }

    #[test]
    fn schema_files_hold_their_local_refs_in_every_draft() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": { "short": { "type": "string", "maxLength": 3 } },
            "type": "object",
            "properties": { "code": { "$ref": "#/$defs/short" } }
        });
        assert!(check_file(schema.clone(), json!({ "code": "abc" })).is_ok());
        let errors = check_file(schema, json!({ "code": "abcd" })).unwrap_err();
        assert!(errors[0].starts_with("at /code: "), "{errors:?}");
        // A draft-07 file: `definitions`, and its own `$schema`.
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": { "n": { "type": "integer", "maximum": 3 } },
            "type": "array",
            "items": { "$ref": "#/definitions/n" }
        });
        assert!(check_file(schema.clone(), json!([1, 2])).is_ok());
        assert!(check_file(schema, json!([1, 4])).is_err());
        // A file with its own `$id`.
        let schema = json!({ "$id": "https://example.com/s.json", "$defs": { "p": { "minimum": 0 } }, "$ref": "#/$defs/p" });
        assert!(check_file(schema.clone(), json!(0)).is_ok());
        assert!(check_file(schema, json!(-1)).is_err());
        // A reference to another file is not followed: any value.
        assert!(check_file(json!({ "$ref": "other.json" }), json!({ "anything": true })).is_ok());
    }

    #[test]
    fn schema_files_hold_formats() {
        let schema =
            json!({ "type": "object", "properties": { "email": { "type": "string", "format": "email" }, "day": { "format": "date" } } });
        assert!(check_file(schema.clone(), json!({ "email": "a@example.com", "day": "2024-02-29" })).is_ok());
        let errors = check_file(schema.clone(), json!({ "email": "not an address" })).unwrap_err();
        assert!(errors[0].starts_with("at /email: ") && errors[0].contains("email"), "{errors:?}");
        assert!(check_file(schema, json!({ "day": "2023-02-30" })).is_err());
    }

    #[test]
    fn schema_file_types_inside_flow_types_and_names() {
        // `type Review = schema("x.json")`, used in a list inside a record.
        let (file, mut defs) = file_type("x.json", json!({ "type": "string", "minLength": 2 }));
        defs.insert("Review".into(), TypeDef { name: "Review".into(), ty: file, loc: Loc::default(), schema: None });
        let ty = record(vec![("reviews", field(Ty::list(named("Review")), false))]);
        let validator = Validator::new(&ty, &defs).unwrap();
        assert!(validator.validate(&json!({ "reviews": ["ok"] })).is_ok());
        let errors = validator.validate(&json!({ "reviews": ["ok", "x"] })).unwrap_err();
        assert!(errors[0].starts_with("at /reviews/1: "), "{errors:?}");
        // Nullable, through the name.
        let validator = Validator::new(&Ty::nullable(named("Review")), &defs).unwrap();
        assert!(validator.validate(&json!(null)).is_ok() && validator.validate(&json!("x")).is_err());
    }

    #[test]
    fn agents_are_asked_for_the_structural_schema() {
        // What a provider is sent: the structural subset, inline, without
        // the file's keywords (and the same as before files kept them).
        let (ty, mut defs) =
            file_type("x.json", json!({ "type": "object", "required": ["n"], "properties": { "n": { "type": "integer", "maximum": 3 } } }));
        defs.insert("Doc".into(), TypeDef { name: "Doc".into(), ty, loc: Loc::default(), schema: None });
        let schema = ty_to_schema(&named("Doc"), &defs);
        assert_eq!(
            schema,
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": "#/$defs/Doc",
                "$defs": { "Doc": { "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"], "additionalProperties": true } }
            })
        );
        // The validator's schema refers to the file.
        let validator = Validator::new(&named("Doc"), &defs).unwrap();
        assert!(validator.schema().to_string().contains(FILE_URI), "{}", validator.schema());
    }
}
