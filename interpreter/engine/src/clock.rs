//! Time for the control plane: the [`Clock`] trait the engine reads, and a
//! fake clock for deterministic runs and tests (every reading advances it by
//! one millisecond). The system clock is the runtime's (`flow_runtime::clock`):
//! the engine does no I/O and reads no real time.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
    /// Whether delays (backoff, timeouts) are simulated rather than slept.
    fn is_fake(&self) -> bool {
        false
    }
}

/// A deterministic clock: starts at `start_ms`, advances 1 ms per reading.
#[derive(Debug)]
pub struct FakeClock {
    now: AtomicU64,
}

impl FakeClock {
    /// 2026-01-01T00:00:00Z.
    pub const DEFAULT_START: u64 = 1_767_225_600_000;

    pub fn new(start_ms: u64) -> FakeClock {
        FakeClock { now: AtomicU64::new(start_ms) }
    }

    /// Moves the clock `ms` forward (a simulated wait, e.g. past a
    /// decision's deadline).
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.now.fetch_add(1, Ordering::SeqCst)
    }
    fn is_fake(&self) -> bool {
        true
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-01-01T00:00:00.000Z`.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, (rem % 3600) / 60, rem % 60, ms % 1000);
    }
    // Fixed width: the digits are written directly (this runs for events
    // and leases, without the formatting machinery).
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, y as u64);
    put(5, 2, m as u64);
    put(8, 2, d as u64);
    put(11, 2, rem / 3600);
    put(14, 2, (rem % 3600) / 60);
    put(17, 2, rem % 60);
    put(20, 3, ms % 1000);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(FakeClock::DEFAULT_START), "2026-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(253_402_300_800_000), "10000-01-01T00:00:00.000Z");
    }

    #[test]
    fn fake_clock_advances() {
        let clock = FakeClock::new(10);
        assert_eq!(clock.now_ms(), 10);
        assert_eq!(clock.now_ms(), 11);
        assert!(clock.is_fake());
    }
}
