use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A file, directory or block device.
    pub path: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let f = std::fs::File::open(&args.path)
        .with_context(|| format!("cannot open {}: check the path exists", args.path.display()))?;
    match pagewise_io::topology::logical_block_size(&f, &args.path) {
        Some(lbs) => println!("logical block size: {lbs} bytes"),
        None => println!("logical block size: unknown (no sysfs entry for this device)"),
    }
    Ok(())
}
