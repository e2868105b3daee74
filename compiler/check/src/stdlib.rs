//! The standard library: `.flow` modules embedded in the compiler and
//! imported with `import std.NAME`.

/// Every stdlib module: its import name and source.
pub const MODULES: &[(&str, &str)] = &[
    ("std.consensus", include_str!("../../../stdlib/consensus.flow")),
    ("std.delegation", include_str!("../../../stdlib/delegation.flow")),
    ("std.evaluators", include_str!("../../../stdlib/evaluators.flow")),
    ("std.evidence", include_str!("../../../stdlib/evidence.flow")),
    ("std.media", include_str!("../../../stdlib/media.flow")),
    ("std.messages", include_str!("../../../stdlib/messages.flow")),
];

/// The source of a stdlib module, by import name (`std.evidence`).
pub fn module(name: &str) -> Option<&'static str> {
    MODULES.iter().find(|(n, _)| *n == name).map(|(_, source)| *source)
}
