//! Templates: `{field}` (or `{a.b}`) replaced by the input's value, as
//! idempotency keys, probe and command argv, and HTTP tool URLs write them.
//! Pure; shared by the control plane and the data plane.

use serde_json::Value;

/// Replaces `{field}` in a template with the input's fields.
pub fn template(text: &str, input: &Value) -> String {
    template_with(text, input, |s| s.to_string())
}

/// [`template`], passing each substituted value through `encode`.
pub fn template_with(text: &str, input: &Value, encode: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let field = &after[..close];
                let value = field.split('.').try_fold(input, |v, f| v.get(f));
                match value {
                    Some(Value::String(s)) => out.push_str(&encode(s)),
                    Some(other) => out.push_str(&encode(&other.to_string())),
                    None => {
                        out.push('{');
                        out.push_str(field);
                        out.push('}');
                    }
                }
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_fields_and_keep_unknown_ones() {
        let input = serde_json::json!({ "slug": "a-b", "n": 3, "nested": { "x": "y" } });
        assert_eq!(template("publish-{slug}-{n}-{nested.x}-{missing}", &input), "publish-a-b-3-y-{missing}");
    }
}
