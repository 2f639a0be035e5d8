//! `pagewise bench report`: placeholder replaced below.
#[derive(clap::Args)]
pub struct Args {}
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
