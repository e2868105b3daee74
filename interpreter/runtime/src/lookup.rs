//! Reading property values of the plan: the IR's one set of readers
//! (`flow_check::lookup`), shared by the control plane
//! ([`crate::engine`]), the trace checker ([`crate::conformance`]) and the
//! verifier.

pub use flow_check::lookup::{budget_props, int, names, ref_name, word};
