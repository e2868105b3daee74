//! Readers of lists as declared, keeping an empty list apart from an
//! absent one: `allowed_agents: []` lets no agent call a tool, no
//! `allowed_agents` lets every agent that holds it.

use super::{names, Props};
use crate::ir::Decl;

impl Decl {
    /// The tools property as declared, an empty list included (`None` when
    /// undeclared): a contract that declares it grants only those (agent,
    /// contract).
    pub fn declared_tools(&self) -> Option<Vec<String>> {
        self.prop("tools").map(|v| names(Some(v)))
    }

    /// The agents a tool names in `allowed_agents`, an empty list included
    /// (`None` when undeclared) (tool).
    pub fn declared_allowed_agents(&self) -> Option<Vec<String>> {
        self.prop("allowed_agents").map(|v| names(Some(v)))
    }

    /// Whether the tool lets `agent` call it: every agent when it declares
    /// no `allowed_agents`, only those listed when it does (none for `[]`).
    /// The verifier (E0701), the engine and trace check all ask this.
    pub fn allows_agent(&self, agent: &str) -> bool {
        self.declared_allowed_agents().is_none_or(|names| names.iter().any(|n| n == agent))
    }
}

#[cfg(test)]
mod tests {
    use crate::{check_program, NoFiles};
    use flow_diagnostics::SourceDb;

    #[test]
    fn declared_lists_keep_empty_apart_from_absent() {
        let source = r#"
provider p: scripted { script: "s.yaml" }
tool closed: builtin { description: "none may call it", input: {}, output: {}, allowed_agents: [] }
tool open: builtin { description: "any holder may call it", input: {}, output: {} }
type R = { ok: bool }
contract grants_none { objective: "nothing", output: R, tools: [] }
contract silent { objective: "says nothing of tools", output: R }
"#;
        let mut db = SourceDb::new();
        let root = db.add("t.flow", source.to_string());
        let checked = check_program(&mut db, root, &NoFiles);
        let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        let p = checked.program;
        assert_eq!(p.decls["closed"].declared_allowed_agents(), Some(Vec::new()));
        assert_eq!(p.decls["open"].declared_allowed_agents(), None);
        assert!(!p.decls["closed"].allows_agent("anyone"), "`allowed_agents: []` lets no agent call it");
        assert!(p.decls["open"].allows_agent("anyone"), "no `allowed_agents` lets every holder call it");
        assert_eq!(p.decls["grants_none"].declared_tools(), Some(Vec::new()));
        assert_eq!(p.decls["silent"].declared_tools(), None);
    }
}
