//! Stack safety for the passes over expression and formula trees.
//!
//! The parser bounds every tree's height ([`crate::MAX_TREE_HEIGHT`]), so a
//! recursive pass needs at most that many levels. How much stack one level
//! takes depends on the pass and the build (an unoptimised checker takes
//! over 16 KiB a level), and threads have different stacks (a tokio worker
//! 2 MiB, an editor's analysis thread whatever it was given). So each
//! recursive pass calls [`guarded`] at every level: when less than
//! [`RED_ZONE`] of the thread's stack remains, the rest of the pass runs on
//! a fresh segment allocated on the heap. The height bound keeps the total
//! bounded; this keeps any one thread's stack from being the limit.

/// Below this much remaining stack, a guarded call moves to a new segment.
pub const RED_ZONE: usize = 256 << 10;

/// The size of each new segment.
pub const SEGMENT: usize = 4 << 20;

/// Runs `f`, on a fresh stack segment if this thread's is nearly used up.
pub fn guarded<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}
