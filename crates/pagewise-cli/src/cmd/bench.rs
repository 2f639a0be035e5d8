//! `pagewise bench run ...` runs standard workloads against pagewise and peers;
//! `pagewise bench report RESULTS.jsonl -o report.html` renders the results.

mod report;
mod run;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Run workloads (fill, read, scan, YCSB, iiBench) on one or more engines.
    Run(Box<run::Args>),
    /// Render results (JSON lines) as a self-contained HTML page or a markdown table.
    Report(report::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Run(a) => run::run(*a),
        Command::Report(a) => report::run(a),
    }
}
