//! Prints what pagewise-io knows about each path: topology (JSON), whether a
//! block device is in use, and free space for directories.
//! Usage: cargo run -p pagewise-io --example topo -- PATH...

use pagewise_io::topology::{free_space, is_mounted, Topology};
use std::path::Path;

fn main() {
    for arg in std::env::args().skip(1) {
        let path = Path::new(&arg);
        match Topology::for_path(path) {
            Ok(t) => println!("{arg}: {}", serde_json::to_string(&t).expect("serialize")),
            Err(e) => println!("{arg}: error: {e}"),
        }
        if let Ok(m) = is_mounted(path) {
            println!("{arg}: is_mounted = {m}");
        }
        if path.is_dir() {
            println!(
                "{arg}: free_space = {:?}",
                free_space(path).map_err(|e| e.to_string())
            );
        }
    }
}
