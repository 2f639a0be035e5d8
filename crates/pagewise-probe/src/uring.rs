//! Engine selection: the probe's [`Engine`] mapped onto pagewise-io's backends.
//!
//! The probe uses pagewise-io's rings exactly as the engine does, so its
//! figures are the ones the engine will see. fio 3.33 sets its rings up with
//! COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN; an A/B of both setups inside
//! the probe showed no difference beyond run-to-run noise on the reference VM
//! (docs/benchmarks.md, "Probe vs fio"). What did matter is how I/Os are handed
//! to the ring: see the eager submission in `runner`.

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
