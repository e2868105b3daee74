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
