//! The emulated compressing drive's server process on its own, for this
//! crate's tests (`csd::set_server_program`); `pagewise` runs the same code
//! as its hidden `csd-serve` subcommand.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(pagewise_bench::csd::server::main(&args));
}
