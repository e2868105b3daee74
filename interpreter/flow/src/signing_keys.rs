//! `flow key generate`: an ed25519 key pair for `flow run --sign` and
//! `flow trace check --verify-key`.

use flow_runtime::driver::exit;
use std::path::Path;

/// Writes the private key to `out` (readable by its owner only) and the
/// public key to `out.pub`; refuses to overwrite either unless `force`.
pub fn generate(out: &Path, force: bool) -> u8 {
    let public_path = {
        let mut name = out.as_os_str().to_os_string();
        name.push(".pub");
        std::path::PathBuf::from(name)
    };
    if !force {
        for path in [out, public_path.as_path()] {
            if path.exists() {
                eprintln!("flow: {} exists: a key is never overwritten without --force", path.display());
                return exit::USAGE;
            }
        }
    }
    let (private, public) = match flow_runtime::signing::generate() {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("flow: {e}");
            return exit::USAGE;
        }
    };
    if let Err(e) = write_private(out, &private).and_then(|_| std::fs::write(&public_path, public)) {
        eprintln!("flow: cannot write the key: {e}");
        return exit::USAGE;
    }
    println!("private key: {} (sign with `flow run --sign {}`)", out.display(), out.display());
    println!("public key:  {} (check with `flow trace check --verify-key {}`)", public_path.display(), public_path.display());
    exit::SUCCESS
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}
