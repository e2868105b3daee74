//! Reading the files a program refers to (imports, JSON Schema files),
//! relative to the file that names them.

use flow_check::Loader;
use std::path::Path;

/// Loads imported modules and schema files relative to the importing file.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsLoader;

impl Loader for FsLoader {
    fn load(&self, from: &str, path: &str) -> Result<(String, String), String> {
        let base = Path::new(from).parent().unwrap_or(Path::new(""));
        let full = base.join(path);
        let text = std::fs::read_to_string(&full).map_err(|e| e.to_string())?;
        Ok((normalize(&full), text))
    }
}

/// A path as shown in diagnostics: `/` separators, no `.` segments, `..`
/// resolved where possible.
pub fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if parts.last().is_some_and(|p| p != ".." && !p.is_empty()) => {
                parts.pop();
            }
            // The root becomes an empty first segment: `/` + `tmp` → `/tmp`.
            std::path::Component::RootDir => parts.push(String::new()),
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_removes_dot_segments() {
        assert_eq!(normalize(Path::new("./examples/a/../b/x.flow")), "examples/b/x.flow");
        assert_eq!(normalize(Path::new("/tmp/./x.flow")), "/tmp/x.flow");
        assert_eq!(normalize(Path::new("/../x.flow")), "/../x.flow");
    }
}
