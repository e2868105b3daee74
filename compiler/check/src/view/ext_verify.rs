//! Typed readers the verify needs beyond the shared ones (to be merged into
//! `decl.rs` / `flow.rs`).

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
        assert_eq!(p.decls["grants_none"].declared_tools(), Some(Vec::new()));
        assert_eq!(p.decls["silent"].declared_tools(), None);
    }
}
