//! `flow-gen NODES [SEED]`: prints a generated workflow of NODES nodes
//! (`flow_tests::generate::workflow`), for benchmarks outside Rust.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(nodes) = args.first().and_then(|n| n.parse::<usize>().ok()) else {
        eprintln!("usage: flow-gen NODES [SEED]");
        std::process::exit(2);
    };
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2024);
    print!("{}", flow_tests::generate::workflow(nodes, seed));
}
