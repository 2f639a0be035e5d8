//! The `pagewise` command. Each subcommand lives in its own module under
//! `cmd/` with an `Args` struct (clap) and a `run(args) -> anyhow::Result<()>`.

mod cmd;
mod plot;
mod report;

use clap::{Parser, Subcommand};

/// pagewise: measure a drive, model it, pick page sizes, run the engine.
#[derive(Parser)]
#[command(name = "pagewise", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure a drive the way a database uses it: IOPS, MB/s and latency by block size, alignment, pattern and queue depth.
    Probe(Box<cmd::probe::Args>),
    /// Print the device topology behind a file, directory or block device.
    Topology(cmd::topology::Args),
    /// Fit T(B) = S + B/W to measurements (probe JSON, fio JSON or CSV).
    Model(cmd::model::Args),
    /// Recommend a B+tree page size (and B-epsilon node size) for a dataset on a drive.
    Advise(cmd::advise::Args),
    /// Estimate drive lifetime from write rate and write amplification.
    Wear(cmd::wear::Args),
    /// Probe the drive under DIR, fit the model, advise, and write DIR/report.html.
    Tune(cmd::tune::Args),
    /// Benchmark pagewise against peers: workloads, write amplification, reports.
    Bench(cmd::bench::Args),
    /// Create, read, write, scan, inspect and check a pagewise database.
    Db(cmd::db::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(a) => cmd::probe::run(*a),
        Command::Topology(a) => cmd::topology::run(a),
        Command::Model(a) => cmd::model::run(a),
        Command::Advise(a) => cmd::advise::run(a),
        Command::Wear(a) => cmd::wear::run(a),
        Command::Tune(a) => cmd::tune::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Db(a) => cmd::db::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
