//! Time for the runtime: the engine's [`Clock`] trait and [`FakeClock`]
//! (`flow_engine::clock`), and the system clock, which only the shell reads.

pub use flow_engine::clock::*;

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }
}
