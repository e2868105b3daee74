//! Where flowc's sources come from: files, or `-` for the standard input
//! (named `<stdin>` in reports; its imports resolve from the working
//! directory).

use crate::UsageError;
use flow_diagnostics::SourceDb;
use flow_pipeline::Compiled;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The name reports give the standard input.
pub const STDIN_NAME: &str = "<stdin>";

/// Whether `path` means the standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The standard input can be read once: refuse `-` twice.
pub fn at_most_one_stdin(files: &[PathBuf]) -> Result<(), UsageError> {
    if files.iter().filter(|f| is_stdin(f)).count() > 1 {
        return Err(UsageError("`-` (the standard input) can be given once".into()));
    }
    Ok(())
}

/// The name and text of `path` (or of the standard input for `-`).
pub fn read(path: &Path) -> Result<(String, String), UsageError> {
    if is_stdin(path) {
        let mut bytes = Vec::new();
        std::io::stdin().lock().read_to_end(&mut bytes).map_err(|e| UsageError(format!("cannot read the standard input: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| UsageError("the standard input is not UTF-8 text".into()))?;
        return Ok((STDIN_NAME.to_string(), text));
    }
    let text = flow_pipeline::read_source(path).map_err(UsageError)?;
    Ok((flow_pipeline::normalize(path), text))
}

/// One file (or the standard input) checked and, when checking found no
/// errors, verified (the static checks, then the model checker), through
/// the one pipeline.
pub fn compile(db: &mut SourceDb, path: &Path, max_states: usize) -> Result<Compiled, UsageError> {
    let (name, text) = read(path)?;
    let depth = flow_pipeline::Depth::Full { max_states };
    Ok(flow_pipeline::compile_text(db, &name, text, &flow_pipeline::FsLoader, depth, false))
}
