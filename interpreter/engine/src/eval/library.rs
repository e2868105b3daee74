//! The function library's evaluation (its typing rules are
//! `flow_check::functions`). Every function is total: one pass or one sort
//! over its lists, no recursion the caller controls, and a wrong-shaped
//! value gives an [`EvalError`], never a panic.

use super::{as_int, float, kind, num_cmp, numbers, to_f64, EvalError, Result};
use serde_json::{Map, Number, Value as Json};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// The functions of the library that `super::call` does not answer itself.
pub(super) fn call(function: &str, args: &[&Json]) -> Result<Json> {
    let arity = |allowed: &[usize]| -> Result<()> {
        if allowed.contains(&args.len()) {
            Ok(())
        } else {
            Err(EvalError::new(format!("`{function}` takes {allowed:?} arguments, got {}", args.len())))
        }
    };
    match function {
        "avg" => {
            arity(&[1])?;
            average(function, &numbers(function, args[0])?)
        }
        "distinct" => {
            arity(&[1])?;
            Ok(Json::Array(distinct(list(function, args[0])?.iter())))
        }
        "union" | "intersection" | "difference" | "jaccard" => {
            arity(&[2])?;
            sets(function, list(function, args[0])?, list(function, args[1])?)
        }
        "join" | "text" => {
            arity(if function == "join" { &[2] } else { &[1] })?;
            text(function, args)
        }
        "zip" => {
            arity(&[2])?;
            let (a, b) = (list(function, args[0])?, list(function, args[1])?);
            Ok(Json::Array(a.iter().zip(b).map(|(x, y)| pair("first", x.clone(), "second", y.clone())).collect()))
        }
        "split" => {
            arity(&[2])?;
            let (s, sep) = (string(function, args[0])?, string(function, args[1])?);
            if sep.is_empty() {
                return Err(EvalError::new("`split` needs a non-empty separator"));
            }
            Ok(Json::Array(s.split(sep).map(|part| Json::String(part.to_string())).collect()))
        }
        "tokens" => {
            arity(&[1])?;
            Ok(Json::Array(tokens(string(function, args[0])?).into_iter().map(Json::String).collect()))
        }
        "matches" => {
            arity(&[2])?;
            let (s, pattern) = (string(function, args[0])?, string(function, args[1])?);
            Ok(Json::Bool(is_match(pattern, s)?))
        }
        "round" => {
            arity(&[1, 2])?;
            round(args)
        }
        "clamp" => {
            arity(&[3])?;
            clamp(args)
        }
        "keys" | "values" => {
            arity(&[1])?;
            let Json::Object(map) = args[0] else {
                return Err(EvalError::new(format!("`{function}` expects an object, got {}", kind(args[0]))));
            };
            Ok(Json::Array(match function {
                "keys" => map.keys().map(|k| Json::String(k.clone())).collect(),
                _ => map.values().cloned().collect(),
            }))
        }
        "get" => {
            arity(&[2, 3])?;
            get(args)
        }
        other => Err(EvalError::new(format!("unknown function `{other}`"))),
    }
}

/// `join(xs, sep)`: the strings with the separator between them;
/// `text(x)`: a string as it is, anything else as compact JSON.
fn text(function: &str, args: &[&Json]) -> Result<Json> {
    if function == "text" {
        return Ok(Json::String(match args[0] {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        }));
    }
    let sep = string(function, args[1])?;
    let parts: Vec<&str> = list(function, args[0])?.iter().map(|v| string(function, v)).collect::<Result<_>>()?;
    Ok(Json::String(parts.join(sep)))
}

/// The set functions of two lists (distinct values, in the first list's
/// order), and their Jaccard index.
fn sets(function: &str, a: &[Json], b: &[Json]) -> Result<Json> {
    let in_b = set(b);
    Ok(Json::Array(match function {
        "union" => distinct(a.iter().chain(b)),
        "intersection" => distinct(a.iter().filter(|x| in_b.contains(&canonical(x)))),
        "difference" => distinct(a.iter().filter(|x| !in_b.contains(&canonical(x)))),
        _ => {
            let in_a = set(a);
            let union = in_a.union(&in_b).count();
            if union == 0 {
                return float("`jaccard`", 1.0);
            }
            return float("`jaccard`", in_a.intersection(&in_b).count() as f64 / union as f64);
        }
    }))
}

/// `function(x in items: body)`, given the body's value for each item.
pub(super) fn comprehension(function: &str, items: &[Json], values: Vec<Json>) -> Result<Json> {
    let condition = |value: &Json| match value {
        Json::Bool(b) => Ok(*b),
        other => Err(EvalError::new(format!("the condition of `{function}` must be a bool, got {}", kind(other)))),
    };
    match function {
        "filter" => {
            let mut kept = Vec::new();
            for (item, value) in items.iter().zip(&values) {
                if condition(value)? {
                    kept.push(item.clone());
                }
            }
            Ok(Json::Array(kept))
        }
        "count" => {
            let mut n = 0u64;
            for value in &values {
                n += u64::from(condition(value)?);
            }
            Ok(Json::from(n))
        }
        "map" => Ok(Json::Array(values)),
        "flat_map" => {
            let mut out = Vec::new();
            for value in values {
                match value {
                    Json::Array(inner) => out.extend(inner),
                    other => return Err(EvalError::new(format!("the body of `flat_map` must give a list, got {}", kind(&other)))),
                }
            }
            Ok(Json::Array(out))
        }
        "sort_by" => sort_by(items, &values),
        "group_by" => {
            let mut groups: Vec<(Json, Vec<Json>)> = Vec::new();
            let mut index: HashMap<String, usize> = HashMap::new();
            for (item, key) in items.iter().zip(values) {
                let at = *index.entry(canonical(&key)).or_insert_with(|| {
                    groups.push((key, Vec::new()));
                    groups.len() - 1
                });
                groups[at].1.push(item.clone());
            }
            Ok(Json::Array(groups.into_iter().map(|(key, items)| pair("key", key, "items", Json::Array(items))).collect()))
        }
        // sum, min, max, avg: as over the list of the body's values.
        _ => super::call(function, &[&Json::Array(values)]),
    }
}

fn list<'a>(function: &str, value: &'a Json) -> Result<&'a Vec<Json>> {
    match value {
        Json::Array(items) => Ok(items),
        other => Err(EvalError::new(format!("`{function}` expects a list, got {}", kind(other)))),
    }
}

fn string<'a>(function: &str, value: &'a Json) -> Result<&'a str> {
    match value {
        Json::String(s) => Ok(s),
        other => Err(EvalError::new(format!("`{function}` expects a string, got {}", kind(other)))),
    }
}

fn pair(a: &str, x: Json, b: &str, y: Json) -> Json {
    let mut map = Map::new();
    map.insert(a.to_string(), x);
    map.insert(b.to_string(), y);
    Json::Object(map)
}

fn average(function: &str, items: &[&Number]) -> Result<Json> {
    if items.is_empty() {
        return Err(EvalError::new(format!("`{function}` of an empty list")));
    }
    float(&format!("`{function}`"), items.iter().map(|n| to_f64(n)).sum::<f64>() / items.len() as f64)
}

/// A value's identity for sets and groups, agreeing with `==` (numbers
/// numerically, objects whatever their key order).
fn canonical(value: &Json) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Json, out: &mut String) {
    match value {
        Json::Number(n) => match as_int(n) {
            Some(i) => out.push_str(&i.to_string()),
            None => {
                let f = to_f64(n);
                if f.fract() == 0.0 && f.abs() < 1e18 {
                    out.push_str(&(f as i128).to_string());
                } else {
                    out.push_str(&format!("{f:e}"));
                }
            }
        },
        Json::Array(items) => {
            out.push('[');
            for item in items {
                write_canonical(item, out);
                out.push(',');
            }
            out.push(']');
        }
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for key in keys {
                out.push_str(&Json::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn set(items: &[Json]) -> HashSet<String> {
    items.iter().map(canonical).collect()
}

/// The items without repeats, each at its first place.
fn distinct<'a>(items: impl Iterator<Item = &'a Json>) -> Vec<Json> {
    let mut seen = HashSet::new();
    items.filter(|item| seen.insert(canonical(item))).cloned().collect()
}

/// Lowercased runs of letters and digits (Unicode), in order.
pub fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect()
}

thread_local! {
    /// Compiled patterns, by text (a guard evaluated per step compiles its
    /// pattern once). Cleared when it holds too many.
    static PATTERNS: RefCell<HashMap<String, flow_check::functions::Pattern>> = RefCell::new(HashMap::new());
}

fn is_match(pattern: &str, text: &str) -> Result<bool> {
    PATTERNS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(pattern) {
            let compiled = flow_check::functions::compile_pattern(pattern)
                .map_err(|e| EvalError::new(format!("`matches`: not a regular expression: {e}")))?;
            if cache.len() >= 64 {
                cache.clear();
            }
            cache.insert(pattern.to_string(), compiled);
        }
        Ok(cache[pattern].is_match(text))
    })
}

fn sort_by(items: &[Json], keys: &[Json]) -> Result<Json> {
    let numeric = keys.iter().all(|k| matches!(k, Json::Number(_)));
    let textual = keys.iter().all(|k| matches!(k, Json::String(_)));
    if !numeric && !textual {
        let kinds: HashSet<&str> = keys.iter().map(kind).collect();
        let mut kinds: Vec<&str> = kinds.into_iter().collect();
        kinds.sort_unstable();
        return Err(EvalError::new(format!("`sort_by` needs keys that are all numbers or all strings, got {}", kinds.join(" and "))));
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Stable: equal keys keep the list's order.
    order.sort_by(|&a, &b| match (&keys[a], &keys[b]) {
        (Json::Number(x), Json::Number(y)) => num_cmp(x, y).unwrap_or(Ordering::Equal),
        (Json::String(x), Json::String(y)) => x.cmp(y),
        _ => Ordering::Equal,
    });
    Ok(Json::Array(order.into_iter().map(|i| items[i].clone()).collect()))
}

fn number<'a>(function: &str, value: &'a Json) -> Result<&'a Number> {
    match value {
        Json::Number(n) => Ok(n),
        other => Err(EvalError::new(format!("`{function}` expects a number, got {}", kind(other)))),
    }
}

fn round(args: &[&Json]) -> Result<Json> {
    let x = number("round", args[0])?;
    let Some(digits) = args.get(1) else {
        if let Some(i) = as_int(x) {
            return Ok(Json::Number(i64::try_from(i).map(Number::from).unwrap_or_else(|_| x.clone())));
        }
        let rounded = to_f64(x).round();
        return if rounded.abs() < 9.0e15 { Ok(Json::from(rounded as i64)) } else { float("`round`", rounded) };
    };
    let digits = number("round", digits)?
        .as_u64()
        .filter(|d| *d <= 15)
        .ok_or_else(|| EvalError::new(format!("`round` takes 0 to 15 digits, got {}", digits)))?;
    let scale = 10f64.powi(digits as i32);
    float("`round`", (to_f64(x) * scale).round() / scale)
}

fn clamp(args: &[&Json]) -> Result<Json> {
    let (x, low, high) = (number("clamp", args[0])?, number("clamp", args[1])?, number("clamp", args[2])?);
    if num_cmp(low, high) == Some(Ordering::Greater) {
        return Err(EvalError::new(format!("`clamp` needs low <= high, got {low} and {high}")));
    }
    Ok(Json::Number(if num_cmp(x, low) == Some(Ordering::Less) {
        low.clone()
    } else if num_cmp(x, high) == Some(Ordering::Greater) {
        high.clone()
    } else {
        x.clone()
    }))
}

fn get(args: &[&Json]) -> Result<Json> {
    let fallback = || args.get(2).map_or(Json::Null, |d| (*d).clone());
    let found = match (args[0], args[1]) {
        (Json::Object(map), Json::String(key)) => map.get(key),
        (Json::Array(items), Json::Number(n)) => n.as_u64().and_then(|i| usize::try_from(i).ok()).and_then(|i| items.get(i)),
        (Json::Null, _) => None,
        (Json::Object(_), other) => return Err(EvalError::new(format!("`get` on an object needs a string key, got {}", kind(other)))),
        (Json::Array(_), other) => return Err(EvalError::new(format!("`get` on a list needs a number index, got {}", kind(other)))),
        (other, _) => return Err(EvalError::new(format!("`get` expects an object or a list, got {}", kind(other)))),
    };
    Ok(match found {
        Some(Json::Null) | None => fallback(),
        Some(value) => value.clone(),
    })
}

#[cfg(test)]
mod tests;
