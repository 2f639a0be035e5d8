//! The `pagewise` command. Each subcommand lives in its own module under
//! `cmd/` with an `Args` struct (clap) and a `run(args) -> anyhow::Result<()>`.

mod cmd;
mod plot;
mod report;
mod signals;

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
    /// Run one node of a Raft cluster (openraft) on pagewise storage, with an HTTP API on 127.0.0.1.
    Serve(Box<cmd::serve::Args>),
    /// Crash-test a database: SIGKILL a loader process at random moments and verify after each kill; or --soak.
    Stress(Box<cmd::stress::Args>),
    /// The loader process `stress` starts and kills (internal).
    #[command(hide = true)]
    StressChild(Box<cmd::stress::child::Args>),
    /// The emulated compressing drive's server process `bench run --csd` starts (internal).
    #[command(hide = true, name = "csd-serve")]
    CsdServe {
        backing: std::path::PathBuf,
        mountpoint: std::path::PathBuf,
    },
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
        Command::Serve(a) => cmd::serve::run(*a),
        Command::Stress(a) => cmd::stress::run(*a),
        Command::StressChild(a) => cmd::stress::child::run(*a),
        Command::CsdServe {
            backing,
            mountpoint,
        } => {
            let args = [
                pagewise_bench::csd::server::SUBCOMMAND.into(),
                backing.into_os_string(),
                mountpoint.into_os_string(),
            ];
            std::process::exit(pagewise_bench::csd::server::main(&args));
        }
    };
    if let Err(e) = result {
        eprintln!("error: {}", error_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line, each cause once: library errors
/// often quote their source in their own message already.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn causes_already_quoted_are_not_repeated() {
        let os = std::io::Error::from_raw_os_error(libc::EPERM);
        let io = pagewise_io::IoError::Open {
            path: "/dev/x".into(),
            source: os,
        };
        let e = anyhow::Error::new(io).context("probing /dev/x");
        let line = error_line(&e);
        assert_eq!(line.matches("Operation not permitted").count(), 1, "{line}");
        assert!(
            line.starts_with("probing /dev/x: cannot open /dev/x"),
            "{line}"
        );
    }
}
