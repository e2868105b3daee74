//! One writer per run. The process that drives a run (`flow run`,
//! `flow resume`, `flow replay`) or records a decision in it
//! (`flow approve`) holds an exclusive lock on the run directory's `lock`
//! file for as long as it may write; a second is refused while the first
//! lives. The operating system drops the lock with the process — kill -9
//! included — so a dead driver never blocks the run.
//!
//! A new run directory is created whole: under a temporary name, with its
//! lock taken and its plan and metadata written, then renamed into place.
//! A directory that holds a run is never written by a second `flow run`.

use super::*;
use std::fs::{File, OpenOptions, TryLockError};

/// The lock file inside a run directory.
pub const LOCK_FILE: &str = "lock";

/// An exclusive hold on a run directory; released when dropped (or when
/// the process ends).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock of `run_dir`, or says who holds it.
    pub fn acquire(run_dir: &Path) -> Result<RunLock, RunError> {
        let path = run_dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| RunError::Storage(format!("cannot open {}: {e}", path.display())))?;
        match try_lock_briefly(&file) {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                let holder = if holder.is_empty() { "another process" } else { holder };
                return Err(RunError::Usage(format!(
                    "the run in {} is being driven by {holder}; wait for it to stop (or stop it) and try again",
                    run_dir.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(RunError::Storage(format!("cannot lock {}: {e}", path.display()))),
        }
        // Who holds it, for the message a second process gets.
        let who = format!("pid {} on {}\n", std::process::id(), host());
        let written = file.set_len(0).and_then(|_| file.write_all(who.as_bytes())).and_then(|_| file.flush());
        written.map_err(|e| RunError::Storage(format!("cannot write {}: {e}", path.display())))?;
        Ok(RunLock { _file: file })
    }
}

/// Tries the lock a few times over a quarter of a second: a lock just let
/// go can still be held for an instant by a child process being started
/// elsewhere in the same process (it holds a copy of every descriptor
/// until it executes its program), which is not a driver.
fn try_lock_briefly(file: &std::fs::File) -> Result<(), TryLockError> {
    let mut tries = 0;
    loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if tries < 5 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// This machine's name, as the kernel knows it.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this host".into())
}

/// Whether `run_id` is a name a run directory may have: letters, digits,
/// `.`, `_` and `-`, not starting with `.`, at most 128 bytes. A run id
/// never names a path, so `.flow/runs/ID` stays under `.flow/runs/`.
pub fn valid_run_id(run_id: &str) -> bool {
    !run_id.is_empty()
        && run_id.len() <= 128
        && !run_id.starts_with('.')
        && run_id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Creates the run directory of a new run, whole: refuses one that holds
/// anything (a run is moved aside first with [`move_aside`]), builds it
/// under a temporary name — lock taken, plan and metadata written — and
/// renames it into place. Gives the held lock.
pub(super) fn create_run_dir(opts: &Options, run_id: &str, plan: &str, meta: &str) -> Result<RunLock, RunError> {
    let dir = &opts.run_dir;
    if occupied(dir)? {
        let what = match run_id_in(dir) {
            Some(id) => format!("already holds run {id}: `flow resume {}` continues it, or `--force-new` moves it aside", dir.display()),
            None => "is not empty and holds no run; choose another `--run-dir`".to_string(),
        };
        return Err(RunError::Usage(format!("{} {what}", dir.display())));
    }
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("run");
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| RunError::Usage(format!("cannot create {}: {e}", parent.display())))?;
    let staging = parent.join(format!(".{name}.creating-{run_id}"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| RunError::Storage(format!("cannot clear {}: {e}", staging.display())))?;
    }
    std::fs::create_dir(&staging).map_err(|e| RunError::Usage(format!("cannot create {}: {e}", staging.display())))?;
    // The lock is on the file, not its name: it holds across the rename.
    let lock = RunLock::acquire(&staging)?;
    {
        let mut journal = SqliteJournal::open(&staging.join("journal.sqlite"), opts.durable)?;
        journal.set_meta(run_id, PLAN, plan)?;
        journal.set_meta(run_id, META, meta)?;
    }
    if dir.exists() {
        // An empty directory made for the run (checked above).
        std::fs::remove_dir(dir).map_err(|e| RunError::Usage(format!("cannot replace {}: {e}", dir.display())))?;
    }
    std::fs::rename(&staging, dir)
        .map_err(|e| RunError::Storage(format!("cannot move {} to {}: {e}", staging.display(), dir.display())))?;
    Ok(lock)
}

/// Whether `dir` exists and holds anything.
fn occupied(dir: &Path) -> Result<bool, RunError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            Err(RunError::Usage(format!("{} is a file, not a run directory", dir.display())))
        }
        Err(e) => Err(RunError::Usage(format!("cannot read {}: {e}", dir.display()))),
    }
}

/// The run id a run directory's journal records, if it holds one.
fn run_id_in(dir: &Path) -> Option<String> {
    let journal = open_journal(dir, false).ok()?;
    run_id_of(&journal).ok()
}

/// Moves the run in `dir` aside to `DIR.old-RUN_ID` (numbered when that is
/// taken), under its own lock: a run being driven is never moved. Gives
/// where it went; `None` when `dir` holds no run (nothing is moved).
pub fn move_aside(dir: &Path) -> Result<Option<PathBuf>, RunError> {
    let Some(id) = run_id_in(dir) else { return Ok(None) };
    let held = RunLock::acquire(dir)?;
    let base = format!("{}.old-{id}", dir.display());
    let mut target = PathBuf::from(&base);
    let mut n = 1;
    while target.exists() {
        n += 1;
        target = PathBuf::from(format!("{base}.{n}"));
    }
    std::fs::rename(dir, &target).map_err(|e| RunError::Storage(format!("cannot move {} aside: {e}", dir.display())))?;
    drop(held);
    Ok(Some(target))
}
