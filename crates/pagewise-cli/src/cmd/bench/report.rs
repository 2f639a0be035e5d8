//! `pagewise bench report`: results (JSON lines) to one self-contained HTML
//! page (inline SVG charts, no scripts or external files), or a markdown table.

use super::run::{mib, ns};
use crate::plot::{Axis, BarChart, LineChart, Series};
use anyhow::Context;
use pagewise_bench::PhaseResult;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Results files written by `pagewise bench run` (JSON lines).
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// HTML output.
    #[arg(short, long, default_value = "bench-report.html")]
    pub output: PathBuf,
    /// Print a markdown comparison table on stdout instead of writing HTML.
    #[arg(long)]
    pub markdown: bool,
}

/// A result line plus the command that produced it (added by `bench run`).
pub struct Entry {
    pub r: PhaseResult,
    pub command: Option<String>,
}

pub fn load(paths: &[PathBuf]) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for p in paths {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not JSON", p.display(), i + 1))?;
            let command = v.get("command").and_then(|c| c.as_str()).map(String::from);
            let r: PhaseResult = serde_json::from_value(v).with_context(|| {
                format!(
                    "{}:{}: not a bench result line (from an older version?)",
                    p.display(),
                    i + 1
                )
            })?;
            out.push(Entry { r, command });
        }
    }
    if out.is_empty() {
        anyhow::bail!("no results in {:?}: run `pagewise bench run` first", paths);
    }
    Ok(out)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let entries = load(&a.results)?;
    if a.markdown {
        print!("{}", markdown(&entries));
        return Ok(());
    }
    let html = html(&entries);
    std::fs::write(&a.output, html)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    eprintln!("wrote {} ({} results)", a.output.display(), entries.len());
    Ok(())
}

fn fmt_num(v: f64) -> String {
    match v.abs() {
        a if a >= 1e6 => format!("{:.2}M", v / 1e6),
        a if a >= 1e4 => format!("{:.1}k", v / 1e3),
        _ => format!("{v:.0}"),
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.2}"))
}

/// A phase as compared across engines: its spec, key count and sync policy.
fn label(r: &PhaseResult) -> String {
    let sync = match r.settings.sync {
        pagewise_bench::SyncPolicy::Off => "sync off",
        pagewise_bench::SyncPolicy::EveryBatch => "sync every batch",
    };
    format!(
        "{} ({} keys, {sync})",
        r.spec,
        fmt_num(r.params.keys as f64)
    )
}

/// Groups results by phase label, in order of first appearance.
fn by_spec(entries: &[Entry]) -> Vec<(String, Vec<&PhaseResult>)> {
    let mut order: Vec<(String, Vec<&PhaseResult>)> = Vec::new();
    for e in entries {
        let label = label(&e.r);
        match order.iter_mut().find(|(s, _)| *s == label) {
            Some((_, v)) => v.push(&e.r),
            None => order.push((label, vec![&e.r])),
        }
    }
    order
}

/// pagewise's own accounting and compressed bytes, when the engine reported them.
fn pagewise_detail(r: &PhaseResult) -> String {
    r.engine_stats
        .as_ref()
        .map_or(String::new(), |v| v.to_string())
}

/// How the OS's caching was limited in a phase: e.g. "cgroup-v1 ≤ 11.2MiB
/// (peak 11.0MiB)" or "fadvise"; `None` when it was not. Results from before
/// the field existed used fadvise trimming, which their notes name.
pub fn memory_cap(r: &PhaseResult) -> Option<String> {
    let Some(c) = &r.memory_cap else {
        let trimmed = r.notes.iter().any(|n| n.contains("dropped every"));
        return trimmed.then(|| "fadvise".into());
    };
    match c.method.as_str() {
        "none" => None,
        m => Some(match (c.limit_bytes, c.peak_bytes) {
            (Some(l), Some(p)) => format!("{m} ≤ {} (peak {})", mib(l), mib(p)),
            (Some(l), None) => format!("{m} ≤ {}", mib(l)),
            _ => m.to_string(),
        }),
    }
}

const CAP_FOOTNOTE: &str = "cap: how the OS was kept from caching beyond the engine's cache. cgroup-v1/v2 = the bench process's memory (its own, the OS page cache of its files and memory-mapped pages) was limited by a memory cgroup to the bytes shown: memory outside the page cache at phase start + the engine's cache + 8 MiB + 1/16 of the cache. fadvise = the Db files' page cache was dropped every 100 ms; pages between drops and memory-mapped pages (LMDB) stayed cached, so those figures are not truly capped.";

/// Engines in order of first appearance.
fn engines(entries: &[Entry]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for e in entries {
        if !v.contains(&e.r.engine) {
            v.push(e.r.engine.clone());
        }
    }
    v
}

/// One row per phase, one column per engine: ops/s, device (or syscall)
/// write amplification, space amplification.
pub fn side_by_side(entries: &[Entry]) -> String {
    let names = engines(entries);
    let mut s = format!(
        "| phase | {} |\n|---|{}\n",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    for (spec, rs) in by_spec(entries) {
        let cells: Vec<String> = names
            .iter()
            .map(|n| match rs.iter().find(|r| &r.engine == n) {
                None => "–".into(),
                Some(r) => {
                    let wa = match (r.write_amp_device, r.write_amp_syscall) {
                        (Some(d), _) => format!(", WA {d:.2}"),
                        (None, Some(w)) => format!(", WA {w:.2} (syscall)"),
                        _ => String::new(),
                    };
                    let cap = memory_cap(r).map_or(String::new(), |c| format!(", cap: {c}"));
                    let csd = r
                        .write_amp_csd_zlib
                        .map_or(String::new(), |w| format!(", WA CSD {w:.2}"));
                    format!(
                        "{} ops/s{wa}{csd}, SA {}{cap}",
                        fmt_num(r.ops_per_s),
                        opt(r.space_amp)
                    )
                }
            })
            .collect();
        s.push_str(&format!("| `{spec}` | {} |\n", cells.join(" | ")));
    }
    if entries.iter().any(|e| memory_cap(&e.r).is_some()) {
        s.push_str(&format!("\n{CAP_FOOTNOTE}\n"));
    }
    s
}

pub fn markdown(entries: &[Entry]) -> String {
    let mut s = side_by_side(entries);
    s.push('\n');
    s.push_str("| workload | engine | ops/s | p50 | p99 | WA device | WA syscall | WA compressed | WA CSD zlib | WA CSD lz4 | life plain (y) | life CSD (y) | space amp | Db size | CPU s | peak RSS | memory cap |\n");
    s.push_str(
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for (spec, rs) in by_spec(entries) {
        for r in rs {
            let _ = writeln!(
                s,
                "| {spec} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} |",
                r.engine,
                r.ops_per_s,
                ns(r.latency.p50_ns),
                ns(r.latency.p99_ns),
                opt(r.write_amp_device),
                opt(r.write_amp_syscall),
                opt(compressed_wa(r)),
                opt(r.write_amp_csd_zlib),
                opt(r.write_amp_csd_lz4),
                years(lifetime_years(r.write_amp_device)),
                years(lifetime_years(r.write_amp_csd_zlib)),
                opt(r.space_amp),
                mib(r.db_bytes),
                r.cpu_user_s + r.cpu_sys_s,
                r.peak_rss_bytes.map_or("–".into(), mib),
                memory_cap(r).unwrap_or_else(|| "–".into()),
            );
        }
    }
    if entries.iter().any(|e| e.r.csd.is_some()) {
        let _ = write!(s, "\n{CSD_FOOTNOTE}\n");
    }
    let _ = writeln!(s, "\n{WEAR_FOOTNOTE}");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn html(entries: &[Entry]) -> String {
    let mut s = String::new();
    s.push_str("<!doctype html><html><head><meta charset=\"utf-8\"><title>pagewise bench report</title><style>");
    s.push_str("body{font-family:sans-serif;margin:24px}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td.note{text-align:left;min-width:360px;max-width:520px;font-size:11px}td:first-child,td:nth-child(2),th{text-align:left}h2{margin-top:32px}code{background:#f4f4f4;padding:1px 4px}.note{color:#555;font-size:12px}figure{display:inline-block;margin:8px}");
    s.push_str("</style></head><body><h1>pagewise bench report</h1>");
    let first = &entries[0].r;
    let _ = write!(
        s,
        "<p>{} results. Host <b>{}</b>: {} CPUs ({}), {:.1} GiB RAM, kernel {}.</p>",
        entries.len(),
        esc(&first.host.hostname),
        first.host.cpus,
        esc(&first.host.cpu_model),
        first.host.mem_bytes as f64 / (1u64 << 30) as f64,
        esc(&first.host.kernel)
    );
    let mut commands: Vec<&str> = entries
        .iter()
        .filter_map(|e| e.command.as_deref())
        .collect();
    commands.dedup();
    s.push_str("<p>Commands:</p><ul>");
    for c in commands {
        let _ = write!(s, "<li><code>{}</code></li>", esc(c));
    }
    s.push_str("</ul>");
    s.push_str("<p class=note>WA device = bytes that reached the run's private loop device (ext4 data + metadata + journal, unmounted after each phase, minus an empty mount/umount) / user bytes written (keys + values). WA syscall = bytes handed to write syscalls (<code>wchar</code>) / user bytes. Space amp = bytes allocated by the Db's files / live user bytes.</p>");
    comparison_table(&mut s, entries);
    let groups = by_spec(entries);
    write_amp_bars(&mut s, &groups);
    s.push_str("<h2>Throughput over time and latency CDF per phase</h2>");
    for (spec, rs) in &groups {
        let _ = write!(s, "<h3><code>{}</code></h3>", esc(spec));
        let mut tput = LineChart::new(
            &format!("{spec}: throughput over time"),
            Axis::linear("seconds since phase start", "s"),
            Axis::linear("throughput", "ops/s"),
        );
        let mut cdf = LineChart::new(
            &format!("{spec}: latency CDF"),
            Axis::log("latency", "µs"),
            Axis::linear("fraction of samples at or below", "").with_range(0.0, 1.0),
        )
        .subtitle(&format!("one sample = {}", rs[0].latency.unit));
        for (i, r) in rs.iter().enumerate() {
            let pts = r
                .throughput
                .iter()
                .enumerate()
                .map(|(t, &v)| (t as f64 + 0.5, v as f64))
                .collect();
            tput.add(Series::measured(&r.engine, pts).color(i));
            let pts = r
                .latency
                .cdf
                .iter()
                .map(|&(q, v)| (v as f64 / 1e3, q))
                .collect();
            cdf.add(Series::line(&r.engine, pts).color(i));
        }
        let _ = write!(
            s,
            "<figure>{}</figure><figure>{}</figure>",
            tput.to_svg(),
            cdf.to_svg()
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// The pagewise settings a run set (the engine's defaults otherwise), one
/// per line of the settings cell.
fn pagewise_settings(st: &pagewise_bench::Settings) -> String {
    let bytes = |n: u64| crate::plot::format_bytes(n as f64);
    [
        (
            "B-eps node",
            st.bepsilon_node_bytes.map(|n| bytes(n.into())),
        ),
        (
            "B-eps leaf",
            st.bepsilon_leaf_bytes.map(|n| bytes(n.into())),
        ),
        (
            "B-eps basement",
            st.bepsilon_basement_bytes.map(|n| bytes(n.into())),
        ),
        ("B-eps fanout", st.bepsilon_fanout.map(|n| n.to_string())),
        (
            "delta threshold",
            st.delta_threshold_bytes.map(|n| format!("{n} B")),
        ),
        ("WAL limit", st.wal_limit_bytes.map(mib)),
        ("dirty percent", st.dirty_percent.map(|p| format!("{p}%"))),
    ]
    .into_iter()
    .filter_map(|(what, v)| v.map(|v| format!("<br>{what} {}", esc(&v))))
    .collect()
}

fn comparison_table(s: &mut String, entries: &[Entry]) {
    s.push_str("<h2>Comparison</h2><table><tr><th>workload</th><th>engine</th><th>ops/s</th><th>p50</th><th>p99</th><th>p99.9</th><th>CPU s</th><th>peak RSS</th><th>user written</th><th>device written</th><th>WA device</th><th>syscall written</th><th>WA syscall</th><th>WA compressed drive</th><th>WA CSD zlib</th><th>WA CSD lz4</th><th>life plain (y)</th><th>life CSD (y)</th><th>Db size</th><th>space amp</th><th>memory cap</th><th>settings</th><th>notes</th></tr>");
    for (spec, rs) in by_spec(entries) {
        for r in rs {
            let st = &r.settings;
            let _ = write!(
                s,
                "<tr><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{}</td><td style=\"white-space:nowrap\">cache {}<br>sync {:?}<br>direct {}<br>compr. {}{}</td><td class=note>{}{}</td></tr>",
                esc(&spec),
                esc(&r.engine_version),
                esc(&r.engine),
                fmt_num(r.ops_per_s),
                ns(r.latency.p50_ns),
                ns(r.latency.p99_ns),
                ns(r.latency.p999_ns),
                r.cpu_user_s + r.cpu_sys_s,
                r.peak_rss_bytes.map_or("–".into(), mib),
                mib(r.user_bytes_written),
                r.device_writes.as_ref().map_or("–".into(), |d| mib(d.bytes)),
                opt(r.write_amp_device),
                r.syscall_write_bytes.map_or("–".into(), mib),
                opt(r.write_amp_syscall),
                opt(compressed_wa(r)),
                opt(r.write_amp_csd_zlib),
                opt(r.write_amp_csd_lz4),
                years(lifetime_years(r.write_amp_device)),
                years(lifetime_years(r.write_amp_csd_zlib)),
                mib(r.db_bytes),
                opt(r.space_amp),
                esc(&memory_cap(r).unwrap_or_else(|| "–".into())),
                mib(st.cache_bytes),
                st.sync,
                st.direct_io,
                st.compression,
                pagewise_settings(st),
                esc(&r.notes.join("; ")),
                match pagewise_detail(r) {
                    d if d.is_empty() => String::new(),
                    d => format!("<details><summary>engine stats</summary><code>{}</code></details>", esc(&d)),
                },
            );
        }
    }
    s.push_str("</table>");
    if entries.iter().any(|e| e.r.csd.is_some()) {
        let _ = write!(s, "<p class=note>{}</p>", esc(CSD_FOOTNOTE));
    }
    let _ = write!(s, "<p class=note>{}</p>", esc(WEAR_FOOTNOTE));
    if entries.iter().any(|e| memory_cap(&e.r).is_some()) {
        let _ = write!(s, "<p class=note>{}</p>", esc(CAP_FOOTNOTE));
    }
}

fn write_amp_bars(s: &mut String, groups: &[(String, Vec<&PhaseResult>)]) {
    let writes: Vec<&(String, Vec<&PhaseResult>)> = groups
        .iter()
        .filter(|(_, rs)| rs.iter().any(|r| r.user_bytes_written > 0))
        .collect();
    if writes.is_empty() {
        return;
    }
    let mut engines: Vec<String> = Vec::new();
    for (_, rs) in &writes {
        for r in rs {
            if !engines.contains(&r.engine) {
                engines.push(r.engine.clone());
            }
        }
    }
    let series = |f: fn(&PhaseResult) -> Option<f64>| -> Vec<(String, Vec<Option<f64>>)> {
        engines
            .iter()
            .map(|e| {
                (
                    e.clone(),
                    writes
                        .iter()
                        .map(|(_, rs)| rs.iter().find(|r| &r.engine == e).and_then(|r| f(r)))
                        .collect(),
                )
            })
            .collect()
    };
    let labels: Vec<String> = writes.iter().map(|(spec, _)| spec.clone()).collect();
    let dev = BarChart {
        title: "Write amplification at the device (loop device bytes / user bytes)",
        y_label: "write amplification",
        groups: labels.clone(),
        series: series(|r| r.write_amp_device),
    };
    let sys = BarChart {
        title: "Write amplification at the syscall (wchar / user bytes)",
        y_label: "write amplification",
        groups: labels,
        series: series(|r| r.write_amp_syscall),
    };
    let _ = write!(
        s,
        "<h2>Write amplification</h2><figure>{}</figure><figure>{}</figure>",
        dev.svg(),
        sys.svg()
    );
    let csd_series = series(|r| r.write_amp_csd_zlib);
    if csd_series
        .iter()
        .any(|(_, v)| v.iter().any(Option::is_some))
    {
        let csd = BarChart {
            title: "Physical write amplification on a compressing drive (zlib-class stored bytes / user bytes)",
            y_label: "write amplification",
            groups: writes.iter().map(|(spec, _)| spec.clone()).collect(),
            series: csd_series,
        };
        let _ = write!(s, "<figure>{}</figure>", csd.svg());
    }
}

/// The drive assumed for the lifetime columns: an enterprise TLC drive of
/// the compressing kind's size (3.84 TB), 1000 P/E cycles, 28% spare flash
/// (FTL write amplification from the greedy-GC model), written at a fixed
/// 10 MB/s of user data, so that lifetimes differ by write amplification
/// only, not by how fast an engine happens to run.
pub const WEAR_CAPACITY_BYTES: f64 = 3.84e12;
pub const WEAR_PE_CYCLES: f64 = 1000.0;
pub const WEAR_OVER_PROVISIONING: f64 = 0.28;
pub const WEAR_USER_BYTES_PER_S: f64 = 10e6;

pub const WEAR_FOOTNOTE: &str = "Lifetime: years until the flash wears out (pagewise-model's wear calculator) for a 3.84 TB TLC drive, 1000 P/E cycles, 28% over-provisioning (FTL write amplification from the greedy-GC model), written at a fixed 10 MB/s of user data, with the phase's measured write amplification: 'plain' uses WA device (loop device bytes), 'CSD' the compressing drive's stored bytes (zlib-class). The compressing drive's extra effective spare space (compressed data frees flash) is not modelled, so CSD lifetimes are conservative. '–' where the WA was not measured or is below 1 (outside the model).";

pub const CSD_FOOTNOTE: &str = "WA CSD = bytes a drive with in-storage transparent compression would store / user bytes: the Db ran on a FUSE pass-through mount (`bench run --csd`) over the same loop filesystem, and every 4 KiB block written (by file offset; partial blocks read back whole) was compressed on its own, raw deflate level 1 (zlib-class) and lz4; all-zero blocks cost 0, incompressible ones 4096.";

/// Years the assumed drive lasts at write amplification `wa`, if it can be modelled.
pub fn lifetime_years(wa: Option<f64>) -> Option<f64> {
    use pagewise_model::wear::{estimate, FtlWa, WearInput};
    let wa = wa.filter(|w| *w >= 1.0)?;
    let input = WearInput {
        capacity_bytes: WEAR_CAPACITY_BYTES,
        pe_cycles: WEAR_PE_CYCLES,
        host_write_rate: WEAR_USER_BYTES_PER_S,
        engine_wa: wa,
        ftl: FtlWa::OverProvisioning(WEAR_OVER_PROVISIONING),
    };
    estimate(&input).ok().map(|e| e.years)
}

fn years(v: Option<f64>) -> String {
    v.map_or("–".into(), |y| {
        if y >= 10.0 {
            format!("{y:.0}")
        } else {
            format!("{y:.2}")
        }
    })
}

/// Bytes an in-storage-compression drive would have stored (pagewise only),
/// as write amplification: emulated physical bytes / user bytes.
pub fn compressed_wa(r: &PhaseResult) -> Option<f64> {
    let phys = r
        .engine_stats
        .as_ref()?
        .get("compressing_drive")?
        .get("physical_bytes_written")?
        .as_u64()?;
    (r.user_bytes_written > 0).then(|| phys as f64 / r.user_bytes_written as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagewise_bench::exec::NoProgress;
    use pagewise_bench::{Measure, Params, RunConfig, Settings, Spec};

    fn results() -> Vec<Entry> {
        let dir = tempfile::tempdir().unwrap();
        let base = Params {
            keys: 2000,
            ..Params::default()
        };
        let cfg = RunConfig {
            engine: "btreemap".into(),
            settings: Settings::default(),
            specs: ["fillrandom", "readrandom:ops=500"]
                .iter()
                .map(|s| Spec::parse(s, &base).unwrap())
                .collect(),
            measure: Measure::Plain {
                dir: dir.path().into(),
            },
            csd: false,
            cap_scope: Default::default(),
        };
        let mut out = Vec::new();
        pagewise_bench::run(&cfg, &NoProgress, &mut |r| {
            out.push(Entry {
                r: r.clone(),
                command: Some("pagewise bench run".into()),
            });
            let mut other = r.clone();
            other.engine = "other".into();
            other.ops_per_s = 12345.0;
            out.push(Entry {
                r: other,
                command: None,
            });
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn side_by_side_has_a_column_per_engine_and_a_row_per_phase() {
        let md = side_by_side(&results());
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "| phase | btreemap | other |");
        assert_eq!(lines.len(), 4, "{md}");
        assert!(
            lines[2].starts_with("| `fillrandom (2000 keys, sync off)` |"),
            "{md}"
        );
        assert!(lines[3].contains("12.3k ops/s"), "{md}");
        // Loads carry write and space amplification; reads only space.
        assert!(lines[2].contains("WA ") && lines[2].contains("SA "), "{md}");
        assert!(!lines[3].contains("WA "), "{md}");
    }

    #[test]
    fn memory_cap_is_shown_per_cell_with_a_footnote() {
        let mut es = results();
        assert!(
            memory_cap(&es[0].r).is_none(),
            "uncapped phases show nothing"
        );
        es[2].r.memory_cap = Some(pagewise_bench::MemoryCap {
            method: "cgroup-v1".into(),
            limit_bytes: Some(12 << 20),
            peak_bytes: Some(11 << 20),
        });
        // A line from before the field: its notes say it was trimmed.
        es[3].r.memory_cap = None;
        es[3].r.notes = vec!["OS page cache of the Db's files dropped every 100 ms".into()];
        let md = side_by_side(&es);
        let row = md.lines().nth(3).unwrap();
        assert!(
            row.contains("cap: cgroup-v1 ≤ 12.0MiB (peak 11.0MiB)"),
            "{md}"
        );
        assert!(row.contains("cap: fadvise"), "{md}");
        assert!(md.contains("not truly capped"), "footnote: {md}");
        assert!(markdown(&es).contains("| cgroup-v1 ≤ 12.0MiB (peak 11.0MiB) |"));
        assert!(html(&es).contains("<td>fadvise</td>"));
    }

    #[test]
    fn html_is_self_contained_with_charts_and_table() {
        let h = html(&results());
        assert!(h.starts_with("<!doctype html>"));
        assert!(
            !h.contains("<script") && !h.contains("src=\""),
            "no external or scripted content"
        );
        assert_eq!(
            h.matches("<svg").count(),
            2 + 2 * 2,
            "2 write-amp bar charts + throughput and CDF per phase"
        );
        assert!(h.contains("pagewise bench run"));
    }

    #[test]
    fn lifetime_scales_inversely_with_write_amplification() {
        let ftl = pagewise_model::wear::greedy_gc_wa(WEAR_OVER_PROVISIONING);
        // capacity x cycles / (rate x WA x FTL WA), in years of 365.25 days.
        let by_hand = 3.84e12 * 1000.0 / (10e6 * 2.0 * ftl) / (365.25 * 86400.0);
        let got = lifetime_years(Some(2.0)).unwrap();
        assert!((got - by_hand).abs() < 1e-9 * by_hand, "{got} vs {by_hand}");
        let ratio = lifetime_years(Some(2.0)).unwrap() / lifetime_years(Some(8.0)).unwrap();
        assert!((ratio - 4.0).abs() < 1e-9);
        assert_eq!(
            lifetime_years(Some(0.5)),
            None,
            "below 1: outside the model"
        );
        assert_eq!(lifetime_years(None), None);
    }

    #[test]
    fn csd_columns_and_lifetimes_are_shown() {
        let mut es = results();
        es[0].r.write_amp_device = Some(10.0);
        es[0].r.write_amp_csd_zlib = Some(2.5);
        es[0].r.write_amp_csd_lz4 = Some(3.25);
        es[0].r.csd = Some(Default::default());
        let md = markdown(&es);
        let row = md
            .lines()
            .find(|l| l.starts_with("| fillrandom") && l.contains("| btreemap |"))
            .unwrap();
        let (plain, csd) = (
            years(lifetime_years(Some(10.0))),
            years(lifetime_years(Some(2.5))),
        );
        assert!(
            row.contains(&format!("| 2.50 | 3.25 | {plain} | {csd} |")),
            "{row}"
        );
        assert!(md.contains("WA CSD = bytes a drive"), "footnote: {md}");
        assert!(side_by_side(&es).contains("WA CSD 2.50"));
        let h = html(&es);
        assert!(h.contains("<th>WA CSD zlib</th>") && h.contains("<b>2.50</b>"));
        assert_eq!(h.matches("<svg").count(), 3 + 2 * 2, "a CSD bar chart too");
    }
}
