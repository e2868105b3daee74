//! Every child accounted for. Each command, probe and MCP server runs in
//! its own process group, and the group is torn down — SIGTERM, then
//! SIGKILL after a grace period — when its call ends, times out or is
//! cancelled, so grandchildren (`sh script.sh` → `sleep`) go with it.
//! Groups being torn down are registered; [`stop_all`] waits for them
//! (killing what outlives the grace) before `flow` exits, so no orphan
//! survives it.

use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a group has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// Groups sent SIGTERM and not yet known gone: pgid → when SIGKILL is due.
static DYING: Mutex<BTreeMap<i32, Instant>> = Mutex::new(BTreeMap::new());

/// A process group this process started (its leader's pid is its id).
/// Dropping it tears the group down.
#[derive(Debug)]
pub struct Group {
    pgid: Option<Pid>,
}

impl Group {
    /// The group led by the child `pid` (spawned with `process_group(0)`).
    pub fn led_by(pid: Option<u32>) -> Group {
        Group { pgid: pid.and_then(|p| i32::try_from(p).ok()).and_then(Pid::from_raw) }
    }

    /// Tears the group down now: SIGTERM to every member left, SIGKILL
    /// after [`GRACE`] to any that outlive it. Idempotent.
    pub fn stop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            terminate(pgid);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether any process of the group is left.
fn alive(pgid: Pid) -> bool {
    // EPERM means it exists but is not ours to signal (not ours any more).
    test_kill_process_group(pgid).is_ok()
}

fn terminate(pgid: Pid) {
    if !alive(pgid) {
        return;
    }
    let _ = kill_process_group(pgid, Signal::TERM);
    let due = Instant::now() + GRACE;
    if let Ok(mut dying) = DYING.lock() {
        dying.insert(pgid.as_raw_nonzero().get(), due);
    }
    tracing::debug!(pgid = pgid.as_raw_nonzero().get(), "process group sent SIGTERM");
    // The SIGKILL after the grace, even if nobody calls `stop_all`.
    std::thread::spawn(move || {
        while Instant::now() < due && alive(pgid) {
            std::thread::sleep(Duration::from_millis(20));
        }
        reap(pgid);
    });
}

/// SIGKILL to what is left of the group, and forget it.
fn reap(pgid: Pid) {
    if alive(pgid) {
        let _ = kill_process_group(pgid, Signal::KILL);
        tracing::debug!(pgid = pgid.as_raw_nonzero().get(), "process group sent SIGKILL after the grace period");
    }
    if let Ok(mut dying) = DYING.lock() {
        dying.remove(&pgid.as_raw_nonzero().get());
    }
}

/// Waits until every group being torn down is gone, killing those past
/// their grace. Called before `flow` exits.
pub async fn stop_all() {
    loop {
        let pending: Vec<(i32, Instant)> = match DYING.lock() {
            Ok(dying) => dying.iter().map(|(k, v)| (*k, *v)).collect(),
            Err(_) => return,
        };
        if pending.is_empty() {
            return;
        }
        let now = Instant::now();
        for (raw, due) in pending {
            let Some(pgid) = Pid::from_raw(raw) else { continue };
            if !alive(pgid) || now >= due {
                reap(pgid);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
