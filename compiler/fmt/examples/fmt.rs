//! Formats `.flow` files with flow-fmt until `flowc fmt` is wired:
//! `cargo run -p flow-fmt --example fmt -- [--check] FILE...`.
//! Rewrites each file in place (or, with `--check`, lists the files that
//! are not formatted and exits 1).
// A developer tool reads and writes files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut check = false;
    let mut failed = false;
    for arg in std::env::args().skip(1) {
        if arg == "--check" {
            check = true;
            continue;
        }
        let source = match std::fs::read_to_string(&arg) {
            Ok(source) => source,
            Err(error) => {
                eprintln!("{arg}: {error}");
                failed = true;
                continue;
            }
        };
        match flow_fmt::format(&source) {
            Ok(formatted) if formatted == source => {}
            Ok(_) if check => {
                println!("{arg}: not formatted");
                failed = true;
            }
            Ok(formatted) => {
                if let Err(error) = std::fs::write(&arg, formatted) {
                    eprintln!("{arg}: {error}");
                    failed = true;
                } else {
                    println!("{arg}: formatted");
                }
            }
            Err(error) => {
                eprintln!("{arg}: {error}");
                for diagnostic in error.diagnostics() {
                    eprintln!("  {}: {}", diagnostic.code.0, diagnostic.message);
                }
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
