//! Turning a user's path into a backend safely: a test file the probe creates in
//! a directory, an existing file (read-only unless allowed), or a block device
//! (read-only unless `destroy_data`, and never written while mounted).

use crate::progress::{Progress, Stage};
use crate::spec::{Engine, SweepSpec};
use crate::{interrupted, ProbeError};
use pagewise_io::topology::{free_space, in_use, Topology};
use pagewise_io::{AlignedBuf, Backend, DirectMode, OpenOptions};
use pagewise_io::{DriveClock, DriveProfile, EmulatedDrive};
use rand::{rngs::SmallRng, RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What kind of target was probed. JSON: `"created_file"`, `"existing_file"`, `"block_device"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A test file the probe created in the given directory and removed afterwards.
    CreatedFile,
    ExistingFile,
    BlockDevice,
}

/// The probed target as recorded in the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// The path the user gave.
    pub path: PathBuf,
    /// The file actually read and written (the created test file for a directory).
    pub file: PathBuf,
    pub kind: TargetKind,
    /// Bytes addressed by the probe.
    pub size: u64,
    /// True if O_DIRECT was in effect.
    pub direct: bool,
    /// "uring" or "sync".
    pub engine: String,
}

/// An opened target. Dropping it removes a test file the probe created.
pub struct Prepared {
    pub backend: Arc<dyn Backend>,
    pub info: TargetInfo,
    pub topology: Topology,
    pub warnings: Vec<String>,
    /// Set by [`Prepared::emulate`]: `backend` is then an emulated drive.
    pub emulated: Option<DriveProfile>,
    created: Option<PathBuf>,
    /// Exclusive claim on a block device being written (O_EXCL): the kernel
    /// refuses it while the device is mounted and refuses mounts while held.
    _claim: Option<std::fs::File>,
}

impl Prepared {
    /// Puts an emulated drive with `profile` between the probe and the
    /// target: every later I/O of `backend` takes S + B/W on one of P
    /// channels (or longer, if the real device is slower). Returns the
    /// drive's clock, whose stats say how often the real device was slower.
    pub fn emulate(&mut self, profile: &DriveProfile) -> Result<Arc<DriveClock>, ProbeError> {
        assert!(self.emulated.is_none(), "emulate a prepared target once");
        let clock = Arc::new(
            DriveClock::new(profile.clone()).map_err(|e| ProbeError::InvalidSpec(e.to_string()))?,
        );
        let drive = EmulatedDrive::with_clock(self.backend.clone(), clock.clone());
        self.backend = Arc::new(drive);
        self.emulated = Some(profile.clone());
        Ok(clock)
    }
}

/// A warning when more than 1% of the I/Os took longer on the real device
/// than the emulated profile allows: for them the figures describe the real
/// device. (A few late I/Os are scheduling noise on a busy machine.)
pub fn overrun_warning(clock: &DriveClock) -> Option<String> {
    let s = clock.stats();
    let total = s.ops + s.syncs;
    if s.overruns * 100 <= total {
        return None;
    }
    Some(format!(
        "{} of {} I/Os and fsyncs ({:.1}%) took longer on the real device (or waited for a CPU) than the emulated drive allows ({}): those ran at the real speed; emulate a slower drive or run on an idle machine",
        s.overruns,
        total,
        100.0 * s.overruns as f64 / total.max(1) as f64,
        clock.profile()
    ))
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some(p) = self.created.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Removes a half-created test file if preparation fails.
struct Cleanup(Option<PathBuf>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Bytes kept free on the filesystem when sizing the test file.
fn reserve(free: u64) -> u64 {
    (64u64 << 20).min(free / 10)
}

/// Opens `path` for `spec` after every safety check; writes nothing before
/// all checks pass.
pub fn prepare(
    path: &Path,
    spec: &SweepSpec,
    progress: &mut dyn FnMut(Progress),
) -> Result<Prepared, ProbeError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ProbeError::NotFound {
            path: path.to_path_buf(),
        },
        _ => open_err(path, e),
    })?;
    spec.validate()?;
    let ft = meta.file_type();
    let writer = spec
        .modes
        .iter()
        .find(|m| m.writes())
        .map(|m| m.to_string());
    // Refusals that need no access to the target come first.
    if let Some(mode) = writer.clone() {
        if ft.is_file() && !spec.allow_write {
            return Err(ProbeError::WriteNeedsAllowWrite {
                path: path.into(),
                mode,
            });
        }
        if ft.is_block_device() && !spec.destroy_data {
            return Err(ProbeError::WriteNeedsDestroyData {
                path: path.into(),
                mode,
            });
        }
        if ft.is_block_device() {
            if let Some(why) = in_use(path)? {
                return Err(ProbeError::Mounted {
                    device: path.into(),
                    why,
                });
            }
        }
    }
    let topology = Topology::for_path(path)?;
    let lbs = topology.logical_block_size.unwrap_or(512);
    let device = topology
        .device
        .clone()
        .unwrap_or_else(|| path.display().to_string());
    spec.validate_for_device(lbs, &device)?;
    let mut prepared = if ft.is_dir() {
        create_test_file(path, spec, lbs, progress)?
    } else if ft.is_file() {
        check_size(path, meta.len(), spec)?;
        open_existing(path, spec, TargetKind::ExistingFile, None)?
    } else if ft.is_block_device() {
        let mut warnings = Vec::new();
        let claim = if writer.is_some() {
            Some(claim_exclusive(path)?)
        } else {
            if let Some(why) = in_use(path)? {
                warnings.push(format!(
                    "{} is {why}; the probe only reads it, but other I/O on it disturbs the figures",
                    path.display()
                ));
            }
            None
        };
        let mut p = open_existing(path, spec, TargetKind::BlockDevice, claim)?;
        check_size(path, p.info.size, spec)?;
        p.warnings.extend(warnings);
        p
    } else {
        return Err(ProbeError::UnsupportedTarget { path: path.into() });
    };
    prepared.topology = topology;
    Ok(prepared)
}

fn open_err(path: &Path, source: std::io::Error) -> ProbeError {
    pagewise_io::IoError::Open {
        path: path.to_path_buf(),
        source,
    }
    .into()
}

fn check_size(path: &Path, size: u64, spec: &SweepSpec) -> Result<(), ProbeError> {
    let bs = spec.max_bs();
    if size < bs {
        return Err(ProbeError::FileTooSmall {
            path: path.into(),
            size,
            bs,
        });
    }
    Ok(())
}

fn claim_exclusive(dev: &Path) -> Result<std::fs::File, ProbeError> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(dev)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY) => ProbeError::InUse {
                device: dev.into(),
                holder: "another exclusive user (mount, md, another probe)".into(),
            },
            _ => pagewise_io::IoError::Open {
                path: dev.into(),
                source: e,
            }
            .into(),
        })
}

fn open_opts(spec: &SweepSpec, write: bool, create_new: bool) -> OpenOptions {
    OpenOptions {
        write,
        create: create_new,
        create_new,
        direct: if spec.direct {
            DirectMode::Try
        } else {
            DirectMode::Off
        },
    }
}

/// Opens with the spec's engine.
pub fn open_backend(
    path: &Path,
    opts: &OpenOptions,
    engine: Engine,
) -> Result<Arc<dyn Backend>, ProbeError> {
    crate::uring::open(path, opts, engine)
}

fn direct_warning(spec: &SweepSpec, b: &dyn Backend) -> Vec<String> {
    if spec.direct && !b.is_direct() {
        vec![format!(
            "{}: the filesystem refused O_DIRECT, so I/O goes through the page cache and the figures describe memory, not the drive",
            b.path().display()
        )]
    } else {
        Vec::new()
    }
}

fn open_existing(
    path: &Path,
    spec: &SweepSpec,
    kind: TargetKind,
    claim: Option<std::fs::File>,
) -> Result<Prepared, ProbeError> {
    let backend = open_backend(path, &open_opts(spec, spec.writes(), false), spec.engine)?;
    let size = backend.size()?;
    Ok(Prepared {
        info: TargetInfo {
            path: path.into(),
            file: path.into(),
            kind,
            size,
            direct: backend.is_direct(),
            engine: backend.engine().into(),
        },
        warnings: direct_warning(spec, backend.as_ref()),
        backend,
        topology: Topology::default(),
        emulated: None,
        created: None,
        _claim: claim,
    })
}

/// Size of the test file: the request, shrunk to fit the free space, rounded
/// down to whole MiB (or whole largest blocks below 1 MiB).
fn test_file_size(
    dir: &Path,
    spec: &SweepSpec,
    lbs: u64,
) -> Result<(u64, Vec<String>), ProbeError> {
    let free = free_space(dir)?;
    let usable = free.saturating_sub(reserve(free));
    let unit = if spec.file_size.min(usable) >= 1 << 20 {
        1 << 20
    } else {
        spec.max_bs().max(lbs)
    };
    let size = spec.file_size.min(usable) / unit * unit;
    let needed = spec
        .max_bs()
        .max(1 << 20)
        .min(spec.file_size.max(spec.max_bs()));
    if size < needed {
        return Err(ProbeError::NoSpace {
            dir: dir.into(),
            free,
            needed: needed + reserve(free),
        });
    }
    let mut warnings = Vec::new();
    if size < spec.file_size {
        warnings.push(format!(
            "only {free} bytes free in {}: the test file is {size} bytes instead of {}",
            dir.display(),
            spec.file_size
        ));
    }
    Ok((size, warnings))
}

fn create_test_file(
    dir: &Path,
    spec: &SweepSpec,
    lbs: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<Prepared, ProbeError> {
    let (size, mut warnings) = test_file_size(dir, spec, lbs)?;
    let name = format!(
        "pagewise-probe-{}-{:08x}.dat",
        std::process::id(),
        rand::random::<u32>()
    );
    let file = dir.join(name);
    let backend = open_backend(&file, &open_opts(spec, true, true), spec.engine)?;
    let mut cleanup = Cleanup(Some(file.clone()));
    fill_random(backend.as_ref(), size, spec.seed, progress)?;
    warnings.extend(direct_warning(spec, backend.as_ref()));
    let created = cleanup.0.take();
    Ok(Prepared {
        info: TargetInfo {
            path: dir.into(),
            file,
            kind: TargetKind::CreatedFile,
            size,
            direct: backend.is_direct(),
            engine: backend.engine().into(),
        },
        backend,
        topology: Topology::default(),
        warnings,
        emulated: None,
        created,
        _claim: None,
    })
}

/// Writes `size` bytes of incompressible random data so that a compressing or
/// deduplicating drive cannot answer reads from nothing, then syncs.
pub fn fill_random(
    b: &dyn Backend,
    size: u64,
    seed: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), ProbeError> {
    let align = b.alignment().max(4096);
    let chunk = (1u64 << 20).min(size) as usize;
    let mut buf = AlignedBuf::new(chunk, align);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xf111);
    let mut off = 0u64;
    while off < size {
        if interrupted() {
            return Err(ProbeError::Interrupted);
        }
        let len = (size - off).min(chunk as u64) as usize;
        buf.set_len(len);
        rng.fill_bytes(&mut buf);
        b.write_at(&buf, off)?;
        off += len as u64;
        if off.is_multiple_of(64 << 20) || off == size {
            progress(Progress {
                stage: Stage::Filling {
                    done: off,
                    total: size,
                },
                ..Progress::default()
            });
        }
    }
    b.sync()?;
    Ok(())
}
