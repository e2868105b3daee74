//! JSON Schema files as Flow types: locating positions inside them, and
//! converting the structural subset (type, properties, required, items,
//! enum, nullability, local `$ref`) to [`Ty`].

use crate::types::{FieldTy, Ty};
use indexmap::IndexMap;
use serde_json::Value;

/// The byte span of the value at JSON pointer `pointer` (e.g.
/// `/properties/name/type`) in `text`, which must be valid JSON. Falls back
/// to the whole document.
pub fn locate(text: &str, pointer: &str) -> (usize, usize) {
    let target: Vec<String> = if pointer.is_empty() {
        Vec::new()
    } else {
        pointer.trim_start_matches('/').split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
    };
    let mut scanner = Scanner { bytes: text.as_bytes(), pos: 0, found: None };
    let mut path = Vec::new();
    scanner.value(&mut path, &target);
    scanner.found.unwrap_or((0, text.len()))
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    found: Option<(usize, usize)>,
}

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> String {
        let start = self.pos;
        self.pos += 1;
        while self.pos < self.bytes.len() && self.bytes[self.pos] != b'"' {
            if self.bytes[self.pos] == b'\\' {
                self.pos += 1;
            }
            self.pos += 1;
        }
        self.pos = (self.pos + 1).min(self.bytes.len());
        let raw = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
        serde_json::from_str(&raw).unwrap_or_default()
    }

    fn value(&mut self, path: &mut Vec<String>, target: &[String]) {
        self.skip_ws();
        let start = self.pos;
        match self.bytes.get(self.pos) {
            Some(b'{') => {
                self.pos += 1;
                loop {
                    self.skip_ws();
                    match self.bytes.get(self.pos) {
                        Some(b'}') => {
                            self.pos += 1;
                            break;
                        }
                        Some(b',') => self.pos += 1,
                        Some(b'"') => {
                            let key_start = self.pos;
                            let key = self.string();
                            let key_end = self.pos;
                            self.skip_ws();
                            self.pos += 1; // ':'
                            path.push(key);
                            // A pointer naming a key is best shown at the key.
                            if path.as_slice() == target && self.found.is_none() {
                                self.found = Some((key_start, key_end));
                            }
                            self.value(path, target);
                            path.pop();
                        }
                        _ => break,
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let mut index = 0;
                loop {
                    self.skip_ws();
                    match self.bytes.get(self.pos) {
                        Some(b']') => {
                            self.pos += 1;
                            break;
                        }
                        Some(b',') => {
                            self.pos += 1;
                            index += 1;
                        }
                        Some(_) => {
                            path.push(index.to_string());
                            self.value(path, target);
                            path.pop();
                        }
                        None => break,
                    }
                }
            }
            Some(b'"') => {
                self.string();
            }
            Some(_) => {
                while self.pos < self.bytes.len()
                    && !matches!(self.bytes[self.pos], b',' | b'}' | b']')
                    && !self.bytes[self.pos].is_ascii_whitespace()
                {
                    self.pos += 1;
                }
            }
            None => {}
        }
        if path.as_slice() == target && self.found.is_none() {
            self.found = Some((start, self.pos));
        }
    }
}

/// The byte offset of a 1-based line and column.
pub fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(text.len());
        }
        offset += l.len();
    }
    text.len()
}

/// Converts a (valid) JSON Schema to a Flow type. Keywords outside the
/// structural subset are ignored here; run-time validation uses the full
/// schema.
pub fn to_ty(schema: &Value) -> Ty {
    convert(schema, schema, 0)
}

fn convert(schema: &Value, root: &Value, depth: usize) -> Ty {
    if depth > 32 {
        return Ty::Any;
    }
    let Some(object) = schema.as_object() else {
        return Ty::Any; // `true` / `false` schemas
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if let Some(pointer) = reference.strip_prefix('#') {
            if let Some(target) = root.pointer(pointer) {
                return convert(target, root, depth + 1);
            }
        }
        return Ty::Any;
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        if values.iter().all(Value::is_string) {
            return Ty::Enum { values: values.iter().filter_map(|v| v.as_str().map(str::to_string)).collect() };
        }
        return Ty::Any;
    }
    if let Some(constant) = object.get("const").and_then(Value::as_str) {
        return Ty::Enum { values: vec![constant.to_string()] };
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => {
            if object.contains_key("properties") {
                vec!["object"]
            } else {
                return Ty::Any;
            }
        }
    };
    let nullable = types.contains(&"null");
    let non_null: Vec<&str> = types.iter().copied().filter(|t| *t != "null").collect();
    let ty = match non_null.as_slice() {
        [] => Ty::Null,
        ["string"] => Ty::String,
        ["integer"] => Ty::Int,
        ["number"] => Ty::Float,
        ["integer", "number"] | ["number", "integer"] => Ty::Float,
        ["boolean"] => Ty::Bool,
        ["array"] => Ty::list(object.get("items").map(|items| convert(items, root, depth + 1)).unwrap_or(Ty::Any)),
        ["object"] => {
            let required: Vec<&str> =
                object.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            let mut fields = IndexMap::new();
            if let Some(properties) = object.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    let ty = convert(property, root, depth + 1);
                    fields.insert(name.clone(), FieldTy { ty, optional: !required.contains(&name.as_str()) });
                }
            }
            if fields.is_empty() {
                Ty::Any
            } else {
                Ty::Record { fields }
            }
        }
        _ => Ty::Any,
    };
    if nullable {
        Ty::nullable(ty)
    } else {
        ty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_pointers_at_keys_and_values() {
        let text = r#"{ "type": "object", "properties": { "a": { "type": "strin" } } }"#;
        let (start, end) = locate(text, "/properties/a/type");
        assert_eq!(&text[start..end], "\"type\"");
        let (start, end) = locate(text, "");
        assert_eq!((start, end), (0, text.len()));
    }

    #[test]
    fn converts_the_structural_subset() {
        let schema: Value = serde_json::json!({
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string"},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                "score": {"type": ["number", "null"]}
            }
        });
        let ty = to_ty(&schema);
        assert_eq!(ty.to_string(), "{ id: string, tags?: [\"a\" | \"b\"], score?: float? }");
    }
}
