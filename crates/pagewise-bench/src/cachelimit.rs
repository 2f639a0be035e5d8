//! How a phase whose engine cache is smaller than the Db keeps the OS from
//! caching the rest for the engine, and the record of how it did.
//!
//! Preferred: a memory cgroup ([`crate::memcap`]) capping the whole process,
//! page cache and mapped pages included, at
//! `B + C + slack`, where `B` is what the group held outside the page cache at
//! the start of the phase (anonymous memory and kernel objects, after
//! returning free heap pages to the OS), `C` the engine's cache budget and the
//! slack `8 MiB + C/16` pays for what a phase allocates that is not cache
//! (latency histograms, thread stacks, page tables, the engine's bookkeeping).
//! So an engine with its own cache may keep about the slack in the OS page
//! cache besides, and LMDB, which has no cache of its own, keeps `C + slack`
//! of its map resident. Fallback where cgroups cannot be used: the fadvise
//! trimmer ([`crate::oscache`]), which cannot evict mapped pages.

use crate::memcap::{Group, MemCap};
use crate::oscache::Trimmer;
use crate::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Slack above anonymous memory + cache budget (see the module comment).
pub fn slack(budget: u64) -> u64 {
    (8 << 20) + budget / 16
}

/// How often the fadvise trimmer runs and the cgroup watchdog looks.
const TRIM_PERIOD: Duration = Duration::from_millis(100);
const WATCH_PERIOD: Duration = Duration::from_millis(10);

/// What the user asked for (`--memory-cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapChoice {
    /// A memory cgroup if this process may make one, else fadvise trimming.
    #[default]
    Auto,
    /// A memory cgroup or an error.
    Cgroup,
    /// Only the fadvise trimmer (the method before cgroups were used).
    Fadvise,
}

impl std::str::FromStr for CapChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "cgroup" => Ok(Self::Cgroup),
            "fadvise" => Ok(Self::Fadvise),
            _ => Err(format!("{s:?}: use auto, cgroup or fadvise")),
        }
    }
}

/// Which phases are held to a memory cap (`--cap-phases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapScope {
    /// Every phase, loads included: the process may hold what it held outside
    /// the page cache at phase start + the engine's cache + slack, page cache
    /// and mapped pages included, so an engine living in the OS page cache is
    /// held to the same memory as one with its own buffer pool. Needs a
    /// memory cgroup; with fadvise trimming only small-cache phases are capped
    /// (trimming a phase that writes would force writeback, changing what it writes).
    #[default]
    All,
    /// Only phases whose `cache=` option is smaller than the Db (the 5%-cache
    /// reads), as the peer tables measured before fills were capped too.
    SmallCache,
}

impl std::str::FromStr for CapScope {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "all" => Ok(Self::All),
            "small-cache" => Ok(Self::SmallCache),
            _ => Err(format!("{s:?}: use all or small-cache")),
        }
    }
}

/// Whether a phase runs under a cap. `small_cache`: the phase set a cache
/// smaller than the Db on disk; `group`: a memory cgroup is in use.
pub fn phase_capped(scope: CapScope, small_cache: bool, group: bool) -> bool {
    match scope {
        CapScope::All => small_cache || group,
        CapScope::SmallCache => small_cache,
    }
}

/// How a phase's memory was limited, in each result line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryCap {
    /// "cgroup-v1", "cgroup-v2", "fadvise" (page cache trimmed, mapped pages
    /// not) or "none" (the cache was not limited).
    pub method: String,
    /// The cgroup's limit (the last one, if the watchdog had to raise it).
    pub limit_bytes: Option<u64>,
    /// The cgroup's highest usage in the phase: anonymous + page cache + kernel.
    pub peak_bytes: Option<u64>,
}

impl MemoryCap {
    pub fn none() -> Self {
        Self::method("none")
    }

    fn method(m: &str) -> Self {
        Self {
            method: m.into(),
            limit_bytes: None,
            peak_bytes: None,
        }
    }
}

/// Limits the OS's caching in capped phases, for one or more runs.
pub struct CacheLimiter {
    cap: Option<MemCap>,
    fallback: Option<String>,
}

impl CacheLimiter {
    /// Creates the cgroup now, before the runs allocate anything, when some
    /// phase will be capped (`capped`) and `choice` allows it: memory
    /// allocated before the move stays charged to the old group.
    pub fn new(choice: CapChoice, capped: bool) -> Result<Self> {
        let cap = match choice {
            CapChoice::Fadvise => return Ok(Self::fadvise()),
            _ if !capped => None,
            CapChoice::Cgroup => Some(MemCap::create()?),
            CapChoice::Auto => match MemCap::create() {
                Ok(c) => Some(c),
                Err(e) => {
                    let why = match e {
                        BenchError::MemCap { why } => why,
                        e => e.to_string(),
                    };
                    return Ok(Self {
                        cap: None,
                        fallback: Some(why),
                    });
                }
            },
        };
        Ok(Self {
            cap,
            fallback: None,
        })
    }

    /// Trimming only.
    pub fn fadvise() -> Self {
        Self {
            cap: None,
            fallback: None,
        }
    }

    /// Why `Auto` fell back to trimming.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Whether capped phases are limited by a memory cgroup (not fadvise).
    pub fn has_group(&self) -> bool {
        self.cap.is_some()
    }

    /// Takes a helper process (the compressing drive's server) out of the
    /// capped group: it stands for the drive, not for the engine. Returns a
    /// note if that failed (its memory is then charged to the engine).
    pub fn release(&self, pid: u32) -> Option<String> {
        let cap = self.cap.as_ref()?;
        cap.release(pid).err().map(|e| {
            format!("the compressing drive's server stayed in the bench's memory cgroup ({e}); its memory counts against the engine's cap")
        })
    }

    /// "cgroup-v1", "cgroup-v2" or "fadvise".
    pub fn method(&self) -> &'static str {
        self.cap.as_ref().map_or("fadvise", |c| c.group().method())
    }

    /// Before the engine opens: what the group holds outside the page cache.
    pub(crate) fn base(&self) -> Result<Option<u64>> {
        let Some(cap) = &self.cap else {
            return Ok(None);
        };
        trim_heap();
        Ok(Some(cap.group().unreclaimable()?))
    }

    /// After the engine opened: caps the group at `base + budget + slack`
    /// (trims `dir` instead without a group, or if the cap cannot be set).
    pub(crate) fn start(&mut self, dir: &Path, base: Option<u64>, budget: u64) -> Active<'_> {
        let mut notes = self
            .fallback
            .iter()
            .map(|why| format!("memory cgroup not used ({why}); fell back to fadvise trimming"))
            .collect::<Vec<_>>();
        if let (Some(cap), Some(base)) = (self.cap.as_mut(), base) {
            match cap_group(cap, base, budget) {
                Ok((limit, mut n)) => {
                    notes.append(&mut n);
                    let peak_ok = cap.reset_peak();
                    let watch = Watchdog::start(cap.group().clone(), limit, slack(budget) / 2);
                    return Active::Group {
                        cap,
                        watch,
                        peak_ok,
                        notes,
                    };
                }
                Err(e) => notes.push(format!(
                    "memory cgroup limit not set ({e}); fell back to fadvise trimming"
                )),
            }
        }
        Active::Trim(Trimmer::start(dir, TRIM_PERIOD), notes)
    }
}

/// Sets the phase's limit; returns it and a note saying how it was made.
fn cap_group(cap: &MemCap, base: u64, budget: u64) -> Result<(u64, Vec<String>)> {
    let g = cap.group();
    let slack = slack(budget);
    let mut limit = base + budget + slack;
    let mut notes = vec![format!(
        "process memory capped by a {} memory cgroup at {limit} bytes = {base} held outside the page cache at phase start + cache {budget} + slack {slack}, so the OS page cache (mapped pages included) cannot add more than that",
        cap.group().method()
    )];
    let now = g.unreclaimable()?;
    if now + slack / 2 > limit {
        limit = now + slack;
        notes.push(format!("the engine held {now} bytes outside the page cache after opening (more than its cache budget); limit raised to {limit}"));
    }
    g.set_limit(limit)?;
    Ok((limit, notes))
}

/// A limit on the OS's caching for the length of one phase.
pub(crate) enum Active<'a> {
    Trim(Trimmer, Vec<String>),
    Group {
        cap: &'a mut MemCap,
        watch: Watchdog,
        peak_ok: bool,
        notes: Vec<String>,
    },
}

impl Active<'_> {
    /// Ends the limit; returns the record and notes for the result line.
    pub(crate) fn finish(self, engine: &str) -> (MemoryCap, Vec<String>) {
        match self {
            Active::Trim(t, mut notes) => {
                notes.push(format!(
                    "OS page cache of the Db's files dropped every 100 ms ({} rounds) so reads come from the engine's cache or the device{}",
                    t.rounds(),
                    if engine == "lmdb" { "; LMDB's mapped pages cannot be dropped this way, so LMDB ran fully cached" } else { "" }
                ));
                (MemoryCap::method("fadvise"), notes)
            }
            Active::Group {
                cap,
                watch,
                peak_ok,
                mut notes,
            } => {
                let (limit, raised) = watch.stop();
                let peak = if peak_ok { cap.peak() } else { None };
                if let Err(e) = cap.group().lift() {
                    notes.push(format!("could not lift the memory limit: {e}"));
                }
                if raised > 0 {
                    notes.push(format!("memory outside the page cache neared the limit during the phase; the watchdog raised it {raised} times, to {limit} bytes, rather than let the kernel kill the bench"));
                }
                let rec = MemoryCap {
                    method: cap.group().method().into(),
                    limit_bytes: Some(limit),
                    peak_bytes: peak,
                };
                (rec, notes)
            }
        }
    }
}

/// Returns free heap pages to the OS so they are not counted as the
/// process's memory (glibc keeps freed memory of earlier phases mapped).
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Raises the limit when memory the kernel cannot reclaim (anonymous, kernel)
/// comes within `headroom` of it: an engine over its cache budget would
/// otherwise get the bench OOM-killed, losing every engine's results.
pub(crate) struct Watchdog {
    stop: Arc<AtomicBool>,
    limit: Arc<AtomicU64>,
    raised: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(g: Group, limit: u64, headroom: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let lim = Arc::new(AtomicU64::new(limit));
        let raised = Arc::new(AtomicU64::new(0));
        let (s, l, r) = (stop.clone(), lim.clone(), raised.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                if let Ok(held) = g.unreclaimable() {
                    let cur = l.load(Relaxed);
                    if held + headroom > cur && g.set_limit(held + 2 * headroom).is_ok() {
                        l.store(held + 2 * headroom, Relaxed);
                        r.fetch_add(1, Relaxed);
                    }
                }
                std::thread::sleep(WATCH_PERIOD);
            }
        });
        Self {
            stop,
            limit: lim,
            raised,
            thread: Some(thread),
        }
    }

    /// Stops watching; returns the last limit and how many times it was raised.
    fn stop(mut self) -> (u64, u64) {
        self.halt();
        (self.limit.load(Relaxed), self.raised.load(Relaxed))
    }

    fn halt(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_reject_others() {
        assert_eq!("auto".parse(), Ok(CapChoice::Auto));
        assert_eq!("cgroup".parse(), Ok(CapChoice::Cgroup));
        assert_eq!("fadvise".parse(), Ok(CapChoice::Fadvise));
        assert!("cgroups".parse::<CapChoice>().unwrap_err().contains("auto"));
    }

    #[test]
    fn scopes_parse_and_decide_which_phases_are_capped() {
        assert_eq!("all".parse(), Ok(CapScope::All));
        assert_eq!("small-cache".parse(), Ok(CapScope::SmallCache));
        assert!("reads"
            .parse::<CapScope>()
            .unwrap_err()
            .contains("small-cache"));
        assert_eq!(CapScope::default(), CapScope::All);
        // (scope, small cache, cgroup) -> capped
        let table = [
            (CapScope::All, false, true, true),
            (CapScope::All, true, true, true),
            (CapScope::All, false, false, false),
            (CapScope::All, true, false, true),
            (CapScope::SmallCache, false, true, false),
            (CapScope::SmallCache, true, true, true),
            (CapScope::SmallCache, false, false, false),
            (CapScope::SmallCache, true, false, true),
        ];
        for (scope, small, group, want) in table {
            assert_eq!(
                phase_capped(scope, small, group),
                want,
                "{scope:?} {small} {group}"
            );
        }
    }

    #[test]
    fn slack_is_8_mib_plus_a_sixteenth() {
        assert_eq!(slack(0), 8 << 20);
        assert_eq!(slack(160 << 20), 18 << 20);
    }

    #[test]
    fn a_limiter_without_capped_phases_makes_no_group() {
        let l = CacheLimiter::new(CapChoice::Cgroup, false).unwrap();
        assert_eq!(l.method(), "fadvise");
        assert!(l.fallback().is_none());
    }

    #[test]
    fn memory_cap_serialises_with_the_documented_field_names() {
        let v = serde_json::to_value(MemoryCap {
            method: "cgroup-v1".into(),
            limit_bytes: Some(5),
            peak_bytes: None,
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"method": "cgroup-v1", "limit_bytes": 5, "peak_bytes": null})
        );
    }
}
