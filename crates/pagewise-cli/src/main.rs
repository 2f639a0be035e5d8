//! The `pagewise` command.

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
    /// Print the device topology behind a path.
    Topology {
        /// A file, directory or block device.
        path: std::path::PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topology { path } => topology(&path),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn topology(path: &std::path::Path) -> anyhow::Result<()> {
    let f = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let lbs = pagewise_io::topology::logical_block_size(&f, path);
    println!("logical block size: {lbs:?}");
    Ok(())
}
