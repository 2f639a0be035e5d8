//! A run: one engine, a fresh filesystem, phases in order; one result per phase.

use crate::cachelimit::{phase_capped, CacheLimiter, CapScope, MemoryCap};
use crate::csd::{CsdMount, CsdStats};
use crate::engine::{open_engine_for, Engine, OpenFor, Settings};
use crate::exec::{latency_unit, run_phase, DbState, Progress, TABLES};
use crate::loopfs::LoopFs;
use crate::metrics::{Latency, Recorder};
use crate::sysinfo::{self, Host};
use crate::workload::{Kind, Params, Spec};
use crate::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How bytes written are measured.
#[derive(Debug, Clone)]
pub enum Measure {
    /// A fresh ext4 on a loop device under `work_dir` (root only).
    Loop { work_dir: PathBuf, image_bytes: u64 },
    /// A plain directory: only the syscall figure (`wchar`).
    Plain { dir: PathBuf },
}

/// One `pagewise bench run` for one engine.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub engine: String,
    pub settings: Settings,
    pub specs: Vec<Spec>,
    pub measure: Measure,
    /// Put the Db on an emulated compressing drive (a FUSE mount over the
    /// run's filesystem, see [`crate::csd`]) and report its stored bytes.
    pub csd: bool,
    /// Which phases are held to a memory cap (page cache and mapped pages
    /// included) when a memory cgroup is available.
    pub cap_scope: CapScope,
}

/// Device-level write figures of a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceWrites {
    /// Loop device sectors written x 512, unmounted to unmounted, minus the baseline.
    pub bytes: u64,
    /// Before subtracting the baseline.
    pub raw_bytes: u64,
    /// One empty mount + umount on this filesystem (median of 3), subtracted.
    pub baseline_bytes: u64,
    pub device: String,
}

/// One JSON line of results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub engine: String,
    pub engine_version: String,
    pub workload: String,
    pub spec: String,
    pub params: Params,
    pub settings: Settings,
    pub host: Host,
    pub pagewise_version: String,
    /// Unix seconds when the phase started.
    pub started_at: u64,
    pub elapsed_s: f64,
    pub open_s: f64,
    /// Final sync + close (flushes; counted in write figures, not in throughput).
    pub close_s: f64,
    pub ops: u64,
    pub ops_per_s: f64,
    /// Ops completed in each second of the phase.
    pub throughput: Vec<u64>,
    pub latency: Latency,
    pub found: u64,
    pub missing: u64,
    /// readwhilewriting: writes of the writer thread beside the reads (the
    /// phase's ops), and their rate over the phase.
    #[serde(default)]
    pub side_writes: Option<u64>,
    #[serde(default)]
    pub side_writes_per_s: Option<f64>,
    /// txn: commits refused by a conflict and run again (ops count each
    /// transaction once, when it commits).
    #[serde(default)]
    pub conflicts: Option<u64>,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub peak_rss_bytes: Option<u64>,
    /// Keys + values handed to the engine in this phase.
    pub user_bytes_written: u64,
    /// Keys + values the Db holds after the phase.
    pub live_user_bytes: u64,
    /// Bytes allocated by the Db's files after close.
    pub db_bytes: u64,
    pub space_amp: Option<f64>,
    /// Bytes this process handed to write syscalls (`wchar`).
    pub syscall_write_bytes: Option<u64>,
    pub write_amp_syscall: Option<f64>,
    pub device_writes: Option<DeviceWrites>,
    pub write_amp_device: Option<f64>,
    /// Engine's own statistics (pagewise: bytes by category, compressed bytes).
    pub engine_stats: Option<serde_json::Value>,
    /// What the emulated compressing drive saw in this phase (runs with `csd`).
    #[serde(default)]
    pub csd: Option<CsdStats>,
    /// Physical write amplification on a compressing drive: bytes it stores
    /// (raw deflate, zlib-class) / user bytes written.
    #[serde(default)]
    pub write_amp_csd_zlib: Option<f64>,
    /// The same with lz4.
    #[serde(default)]
    pub write_amp_csd_lz4: Option<f64>,
    /// How the OS was kept from caching beyond the engine's cache (absent in
    /// results from before it was recorded: those used fadvise trimming).
    #[serde(default)]
    pub memory_cap: Option<MemoryCap>,
    pub notes: Vec<String>,
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// The emulated compressing drive of a run: mounted for each phase.
struct CsdPlace {
    backing: PathBuf,
    mnt: PathBuf,
    mount: Option<CsdMount>,
    /// A plain backing directory this run made (removed at the end).
    own_backing: bool,
}

impl Drop for CsdPlace {
    fn drop(&mut self) {
        // Unmount before the backing files (and their loop device) go.
        self.mount.take();
        if self.own_backing {
            let _ = std::fs::remove_dir_all(&self.backing);
        }
    }
}

/// Where the run's files live and how device bytes are read. Field order is
/// drop order: the FUSE mount goes before the loop filesystem under it.
struct Place {
    csd: Option<CsdPlace>,
    fs: Option<LoopFs>,
    dir: PathBuf,
    baseline: u64,
    notes: Vec<String>,
}

fn prepare(cfg: &RunConfig) -> Result<Place> {
    let mut place = prepare_base(cfg)?;
    if !cfg.csd {
        return Ok(place);
    }
    if let Some(why) = crate::csd::unavailable_reason() {
        return Err(BenchError::Command {
            cmd: "--csd (emulated compressing drive)".into(),
            stderr: format!("cannot mount FUSE: {why}"),
        });
    }
    let work_dir = match &cfg.measure {
        Measure::Loop { work_dir, .. } => work_dir,
        Measure::Plain { dir } => dir,
    };
    std::fs::create_dir_all(work_dir)
        .map_err(|e| BenchError::os("create work directory", work_dir, e))?;
    place.notes.extend(crate::loopfs::sweep_stale(work_dir));
    let tag = format!("run-{}-{}", cfg.engine, std::process::id());
    let (backing, own_backing) = match &place.fs {
        Some(fs) => (fs.mount_point().to_path_buf(), false),
        None => {
            let b = work_dir.join(&tag);
            std::fs::create_dir_all(&b)
                .map_err(|e| BenchError::os("create run directory", &b, e))?;
            (b, true)
        }
    };
    let mnt = work_dir.join(format!("{tag}.csd"));
    place.dir = mnt.join("db");
    place.csd = Some(CsdPlace {
        backing,
        mnt,
        mount: None,
        own_backing,
    });
    Ok(place)
}

fn prepare_base(cfg: &RunConfig) -> Result<Place> {
    match &cfg.measure {
        Measure::Loop { work_dir, image_bytes } => {
            if let Some(why) = crate::loopfs::unavailable_reason() {
                let dir = work_dir.join(format!("run-{}-{}", cfg.engine, std::process::id()));
                return Ok(Place {
                    csd: None,
                    fs: None,
                    dir,
                    baseline: 0,
                    notes: vec![format!("device bytes not measured: {why}; write amplification is the syscall figure only")],
                });
            }
            std::fs::create_dir_all(work_dir).map_err(|e| BenchError::os("create work directory", work_dir, e))?;
            let swept = crate::loopfs::sweep_stale(work_dir);
            let tag = format!("run-{}-{}", cfg.engine, std::process::id());
            let mut fs = LoopFs::create(&work_dir.join(format!("{tag}.img")), &work_dir.join(&tag), *image_bytes)?;
            let baseline = fs.mount_cycle_baseline(3)?;
            fs.umount()?;
            let dir = fs.mount_point().join("db");
            Ok(Place {
                csd: None,
                fs: Some(fs),
                dir,
                baseline,
                notes: swept,
            })
        }
        Measure::Plain { dir } => Ok(Place {
            csd: None,
            fs: None,
            dir: dir.join(format!("run-{}-{}", cfg.engine, std::process::id())),
            baseline: 0,
            notes: vec!["device bytes not measured (plain directory); write amplification is the syscall figure only".into()],
        }),
    }
}

/// Runs every phase of `cfg` in order, handing each result to `emit` as it
/// completes; capped phases trim the OS page cache (fadvise).
pub fn run(
    cfg: &RunConfig,
    progress: &dyn Progress,
    emit: &mut dyn FnMut(&PhaseResult) -> Result<()>,
) -> Result<()> {
    run_with(cfg, &mut CacheLimiter::fadvise(), progress, emit)
}

/// [`run`] with capped phases limited by `limiter` (a memory cgroup, made
/// before the first run so that everything the runs allocate is charged to it).
pub fn run_with(
    cfg: &RunConfig,
    limiter: &mut CacheLimiter,
    progress: &dyn Progress,
    emit: &mut dyn FnMut(&PhaseResult) -> Result<()>,
) -> Result<()> {
    let host = Host::detect();
    let mut place = prepare(cfg)?;
    let state = DbState::default();
    let out = (|| {
        for spec in &cfg.specs {
            if crate::interrupted() {
                return Err(BenchError::Interrupted);
            }
            let r = phase(cfg, spec, &mut place, &state, &host, limiter, progress)?;
            emit(&r)?;
        }
        Ok(())
    })();
    if place.fs.is_none() && place.csd.is_none() {
        let _ = std::fs::remove_dir_all(&place.dir);
    }
    out
}

fn phase(
    cfg: &RunConfig,
    spec: &Spec,
    place: &mut Place,
    state: &DbState,
    host: &Host,
    limiter: &mut CacheLimiter,
    progress: &dyn Progress,
) -> Result<PhaseResult> {
    let p = &spec.params;
    let mut notes = place.notes.clone();
    let dev_before = match &mut place.fs {
        Some(fs) => Some(fs.bytes_written()?),
        None => None,
    };
    if let Some(fs) = &mut place.fs {
        fs.mount()?;
    }
    if let Some(c) = &mut place.csd {
        let m = CsdMount::mount(&c.backing, &c.mnt)?;
        notes.push(format!("compressing drive mounted: {}", m.note()));
        if let Some(n) = m.server_pid().and_then(|pid| limiter.release(pid)) {
            notes.push(n);
        }
        c.mount = Some(m);
    }
    let db_before = sysinfo::disk_usage(&place.dir);
    let mut settings = cfg.settings.clone();
    if let Some(c) = p.cache {
        settings.cache_bytes = c.resolve(db_before);
        notes.push(format!(
            "cache {} bytes = {:?} of the Db's {} bytes on disk",
            settings.cache_bytes, c, db_before
        ));
    }
    let started_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Before reading wchar: the reset is itself a 1-byte write.
    let rss_reset = sysinfo::reset_peak_rss();
    let wchar0 = sysinfo::kernel_write_bytes();
    let (u0, s0) = sysinfo::cpu_times();
    // A cache smaller than the Db must not be topped up by the OS page cache;
    // with scope `all`, no phase may use more memory than its engine cache.
    let small_cache = p.cache.is_some() && settings.cache_bytes < db_before;
    let capped = phase_capped(cfg.cap_scope, small_cache, limiter.has_group());
    if !capped && cfg.cap_scope == CapScope::All {
        notes.push("memory not capped in this phase: no memory cgroup (fadvise trimming caps only phases with a cache smaller than the Db; in other phases it would force writeback of what the phase writes)".into());
    }
    let base = if capped { limiter.base()? } else { None };
    let t_open = Instant::now();
    let engine = open_engine_for(
        &cfg.engine,
        &place.dir,
        &settings,
        &TABLES,
        open_for(spec.kind),
    )?;
    let open_s = t_open.elapsed().as_secs_f64();
    let engine_version = engine.version();
    if p.warm {
        let mut n = 0u64;
        engine.scan(crate::exec::MAIN, b"", usize::MAX, &mut |_, _| {
            n += 1;
            !crate::interrupted()
        })?;
        notes.push(format!(
            "warmed up by reading all {n} main-table entries before timing"
        ));
    }
    // The final sync and close run under the cap too: they are part of the
    // phase's writes (a B-tree's last checkpoint, an LSM's compactions).
    let active = capped.then(|| limiter.start(&place.dir, base, settings.cache_bytes));
    let outcome = run_and_close(engine, spec.kind, p, state, progress);
    let memory_cap = match active {
        Some(a) => {
            let (rec, mut n) = a.finish(&cfg.engine);
            notes.append(&mut n);
            rec
        }
        None => MemoryCap::none(),
    };
    let Ran {
        rec,
        elapsed,
        close_s,
        engine_stats,
    } = outcome?;
    let (u1, s1) = sysinfo::cpu_times();
    // With --csd the FUSE server is another process: wchar is the engine's alone.
    let wchar = wchar0
        .zip(sysinfo::kernel_write_bytes())
        .map(|(a, b)| b - a);
    let peak_rss_bytes = if rss_reset { sysinfo::peak_rss() } else { None };
    let db_bytes = sysinfo::disk_usage(&place.dir);
    // Before the loop filesystem: unmounting writes back mapped pages.
    let csd = match place.csd.as_mut().and_then(|c| c.mount.take()) {
        Some(mut m) => Some(m.unmount()?),
        None => None,
    };
    if let Some(c) = &csd {
        notes.push(csd_note(c));
    }
    let device_writes = match (&mut place.fs, dev_before) {
        (Some(fs), Some(before)) => {
            fs.umount()?;
            let raw = fs.bytes_written()? - before;
            Some(DeviceWrites {
                bytes: raw.saturating_sub(place.baseline),
                raw_bytes: raw,
                baseline_bytes: place.baseline,
                device: fs.device().into(),
            })
        }
        _ => None,
    };
    if rec.missing > 0 {
        notes.push(format!(
            "{} lookups found no value (keys not loaded, or a truncated load)",
            rec.missing
        ));
    }
    let live = state.live_bytes();
    let user = rec.user_bytes;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let rww = spec.kind == Kind::ReadWhileWriting;
    Ok(PhaseResult {
        engine: cfg.engine.clone(),
        engine_version,
        workload: spec.kind.name(),
        spec: spec.text.clone(),
        params: p.clone(),
        settings,
        host: host.clone(),
        pagewise_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        elapsed_s: elapsed.as_secs_f64(),
        open_s,
        close_s,
        ops: rec.ops,
        ops_per_s: rec.ops as f64 / secs,
        throughput: rec.throughput(elapsed),
        latency: rec.latency(latency_unit(spec.kind, p)),
        found: rec.found,
        missing: rec.missing,
        side_writes: rww.then_some(rec.side_writes),
        side_writes_per_s: rww.then(|| rec.side_writes as f64 / secs),
        conflicts: (spec.kind == Kind::Txn).then_some(rec.conflicts),
        cpu_user_s: u1 - u0,
        cpu_sys_s: s1 - s0,
        peak_rss_bytes,
        user_bytes_written: user,
        live_user_bytes: live,
        db_bytes,
        space_amp: ratio(db_bytes, live),
        syscall_write_bytes: wchar,
        write_amp_syscall: wchar.and_then(|w| ratio(w, user)),
        write_amp_device: device_writes.as_ref().and_then(|d| ratio(d.bytes, user)),
        device_writes,
        engine_stats,
        write_amp_csd_zlib: csd.as_ref().and_then(|c| ratio(c.zlib_bytes, user)),
        write_amp_csd_lz4: csd.as_ref().and_then(|c| ratio(c.lz4_bytes, user)),
        csd,
        memory_cap: Some(memory_cap),
        notes,
    })
}

/// How a phase's engine is opened: RocksDB as a transaction DB for `txn`.
fn open_for(kind: Kind) -> OpenFor {
    match kind {
        Kind::Txn => OpenFor::Transactions,
        _ => OpenFor::Plain,
    }
}

/// What [`run_and_close`] measured.
struct Ran {
    rec: Recorder,
    elapsed: Duration,
    close_s: f64,
    engine_stats: Option<serde_json::Value>,
}

/// Runs the phase's operations, then syncs and closes the engine (the close
/// is timed on its own: its writes count, its time is not in ops/s).
fn run_and_close(
    engine: Box<dyn Engine>,
    kind: Kind,
    p: &Params,
    state: &DbState,
    progress: &dyn Progress,
) -> Result<Ran> {
    let (rec, elapsed) = run_phase(engine.as_ref(), kind, p, state, progress)?;
    if crate::interrupted() {
        // A partial phase is not a result; dropping the engine closes it.
        return Err(BenchError::Interrupted);
    }
    let t_close = Instant::now();
    engine.sync()?;
    let engine_stats = engine.close()?;
    Ok(Ran {
        rec,
        elapsed,
        close_s: t_close.elapsed().as_secs_f64(),
        engine_stats,
    })
}

/// How the engine used the emulated compressing drive, for the notes.
fn csd_note(c: &CsdStats) -> String {
    format!(
        "compressing drive (FUSE, writeback cache {}): {} writes ({} of cached pages written back), {} blocks of 4 KiB ({} all-zero), {} O_DIRECT opens, {} fallocate calls",
        if c.writeback_cache { "on" } else { "off: writes metered as issued" },
        c.write_ops, c.page_cache_writes, c.blocks_written, c.zero_blocks, c.direct_opens, c.fallocates
    )
}

impl PhaseResult {
    /// Main-table keys after this phase, for messages.
    pub fn describe(&self) -> String {
        format!("{} {} {:.0} ops/s", self.engine, self.spec, self.ops_per_s)
    }
}
