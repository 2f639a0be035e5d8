//! The human-readable results table.

use pagewise_probe::{fmt_size, ProbeResults, TargetKind};
use std::fmt::Write;

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

fn opt_size(v: Option<u64>) -> String {
    v.map_or("?".into(), fmt_size)
}

/// A header describing target, device and host, then one row per point.
pub fn render(r: &ProbeResults) -> String {
    let mut s = String::new();
    if let Some(p) = &r.emulated {
        let _ = writeln!(s, "{}", p.banner());
    }
    let t = &r.target;
    let kind = match t.kind {
        TargetKind::CreatedFile => format!("test file {} (removed)", t.file.display()),
        TargetKind::ExistingFile => "existing file".into(),
        TargetKind::BlockDevice => "block device".into(),
    };
    let _ = writeln!(
        s,
        "target:  {} ({kind}, {})",
        t.path.display(),
        fmt_size(t.size)
    );
    let d = &r.topology;
    let _ = writeln!(
        s,
        "device:  {}{}: logical block {}, physical block {}, minimum_io_size {}, optimal_io_size {}, rotational {}, scheduler {}",
        d.device.as_deref().unwrap_or("?"),
        d.model.as_deref().map(|m| format!(" ({m})")).unwrap_or_default(),
        opt_size(d.logical_block_size),
        opt_size(d.physical_block_size),
        opt_size(d.minimum_io_size),
        opt_size(d.optimal_io_size),
        yes_no(d.rotational),
        d.scheduler.as_deref().unwrap_or("?"),
    );
    let _ = writeln!(
        s,
        "run:     engine {}, {}, host {} ({} CPUs, kernel {}), {}, {:.0} s",
        t.engine,
        if t.direct {
            "O_DIRECT"
        } else {
            "buffered (page cache)"
        },
        r.host.hostname,
        r.host.cpus,
        r.host.kernel,
        r.timestamp,
        r.elapsed_secs
    );
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s.push('\n');
    let header = [
        "mode",
        "bs",
        "align",
        "dist",
        "thr",
        "qd",
        "IOPS",
        "MB/s",
        "mean µs",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "reps",
        "±CI",
        "CPU µs/IO",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for p in &r.points {
        let q = &p.params;
        let l = &p.latency_us;
        let ci = p
            .repetitions
            .ci95_rel
            .map_or("-".into(), |c| format!("{:.1}%", c * 100.0));
        let ci = if p.repetitions.converged {
            ci
        } else {
            format!("{ci}*")
        };
        rows.push(vec![
            q.mode.to_string(),
            fmt_size(q.bs),
            fmt_size(q.align),
            q.dist.to_string(),
            q.threads.to_string(),
            p.effective_qd.to_string(),
            format!("{:.0}", p.iops),
            format!("{:.1}", p.mb_per_s),
            format!("{:.1}", l.mean),
            format!("{:.1}", l.p50),
            format!("{:.1}", l.p90),
            format!("{:.1}", l.p99),
            format!("{:.1}", l.p999),
            format!("{:.0}", l.max),
            p.repetitions.count.to_string(),
            ci,
            format!("{:.2}", p.cpu_us_per_io),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, v)| {
                // Text columns left-aligned, numbers right-aligned.
                if c < 4 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(s, "{}", line.join("  ").trim_end());
        if i == 0 {
            let _ = writeln!(
                s,
                "{}",
                "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
            );
        }
    }
    if r.points.iter().any(|p| !p.repetitions.converged) {
        let _ = writeln!(s, "\n* the 95% confidence interval did not reach --tolerance within --max-reps; trust those rows less");
    }
    s
}
