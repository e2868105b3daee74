//! Typed readers the verify needs beyond the shared ones (to be merged into
//! `decl.rs` / `flow.rs`).
