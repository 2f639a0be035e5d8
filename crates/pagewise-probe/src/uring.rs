//! Engine selection: the probe's [`Engine`] mapped onto pagewise-io's backends.

use crate::spec::Engine;
use pagewise_io::{Backend, OpenOptions};
use std::path::Path;
use std::sync::Arc;

pub fn open(
    path: &Path,
    opts: &OpenOptions,
    engine: Engine,
) -> Result<Arc<dyn Backend>, crate::ProbeError> {
    let e = match engine {
        Engine::Uring => pagewise_io::Engine::Uring,
        Engine::Sync => pagewise_io::Engine::Sync,
    };
    Ok(pagewise_io::open_engine(path, opts, e)?)
}
