//! The io_uring engine comes from pagewise-io; this is the seam where it plugs in.

use pagewise_io::{Backend, OpenOptions};
use std::path::Path;
use std::sync::Arc;

pub fn open(path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>, crate::ProbeError> {
    // Until pagewise-io's uring backend lands, fall back to the sync backend.
    Ok(Arc::new(pagewise_io::open(path, opts)?))
}
