//! The scripted provider: replies from a YAML script, else synthesized from
//! the output schema (the embedded default: no network, no API key).

use super::*;

/// A scripted provider's replies: per node (or agent), in turn order; the
/// last reply repeats.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub replies: HashMap<String, Vec<AgentReply>>,
}

/// A minimal value of a JSON Schema (what the scripted provider answers
/// when its script has nothing for a node): empty strings, zeros, false,
/// empty lists, the first enum value, required fields only.
pub fn synthesize(schema: &Value, defs: &Value) -> Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        return match defs.get(name) {
            Some(def) => synthesize(def, defs),
            None => Value::Null,
        };
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.first().cloned().unwrap_or(Value::Null);
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        return options.first().map(|o| synthesize(o, defs)).unwrap_or(Value::Null);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => json!(""),
        Some("integer") | Some("number") => json!(0),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        Some("object") => {
            let mut out = serde_json::Map::new();
            let required: Vec<&str> =
                schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    if required.contains(&k.as_str()) {
                        out.insert(k.clone(), synthesize(v, defs));
                    }
                }
            }
            Value::Object(out)
        }
        _ => Value::Null,
    }
}

pub(super) fn estimate_tokens(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

impl Executors {
    pub(super) fn script(&self, provider: &Decl) -> Result<Script, String> {
        let Some(path) = provider.script() else { return Ok(Script::default()) };
        let mut scripts = self.scripts.lock().map_err(|_| "script cache poisoned".to_string())?;
        if let Some(s) = scripts.get(path) {
            return Ok(s.clone());
        }
        let full = self.base_dir.join(path);
        let text = std::fs::read_to_string(&full).map_err(|e| format!("cannot read the script {}: {e}", full.display()))?;
        let script: Script = flow_check::limits::yaml_from_str(&format!("the script {}", full.display()), &text)?;
        scripts.insert(path.to_string(), script.clone());
        Ok(script)
    }

    pub(super) async fn agent_turn(&self, request: &AgentRequest) -> AgentReply {
        let Some(provider) = self.program.decls.get(&request.provider) else {
            return AgentReply { error: Some(format!("no provider `{}`", request.provider)), ..AgentReply::default() };
        };
        match provider.variant.as_deref() {
            Some("scripted") => {}
            Some("replay") => return self.tape_turn(provider, request),
            Some("openai") => {
                return match crate::openai::OpenAiProvider::from_decl(provider) {
                    Ok(p) => crate::openai::chat(self.client(), &p, request).await,
                    Err(e) => AgentReply { error: Some(e), ..AgentReply::default() },
                };
            }
            Some(other) => {
                return AgentReply {
                    error: Some(format!(
                        "provider `{}` ({other}) has no live client in this runtime; record a cassette for it or use a scripted provider",
                        request.provider
                    )),
                    ..AgentReply::default()
                }
            }
            None => return AgentReply { error: Some("provider without a variant".into()), ..AgentReply::default() },
        }
        let script = match self.script(provider) {
            Ok(s) => s,
            Err(e) => return AgentReply { error: Some(e), ..AgentReply::default() },
        };
        let replies = script.replies.get(&request.node).or_else(|| script.replies.get(&request.agent));
        let mut reply = match replies {
            // The node's n-th turn gets the n-th reply: a function of the
            // request, so a resumed run gets the same replies.
            Some(list) if !list.is_empty() => list[(request.node_turn.max(1) as usize - 1).min(list.len() - 1)].clone(),
            _ => {
                let defs = request.output_schema.get("$defs").cloned().unwrap_or(Value::Null);
                AgentReply { output: Some(synthesize(&request.output_schema, &defs)), ..AgentReply::default() }
            }
        };
        if reply.usage == TokenUsage::default() && reply.error.is_none() {
            let produced = reply.output.clone().or_else(|| reply.tool_calls.first().map(|c| c.input.clone())).unwrap_or(Value::Null);
            reply.usage = TokenUsage { input_tokens: estimate_tokens(&request.context) + 16, output_tokens: estimate_tokens(&produced) };
        }
        if reply.cost == 0.0 {
            reply.cost = (provider.price_input() * reply.usage.input_tokens as f64
                + provider.price_output() * reply.usage.output_tokens as f64)
                / 1e6;
        }
        reply
    }
}
