//! CSV with header `block_size,iops` and optional columns `op`, `qd`,
//! `threads`, `latency_us` in any order. `block_size` accepts units (`4k`, `4KiB`).
//! Missing optional columns default to randread, QD1, one thread.

use crate::measurement::{parse_workload, Measurement, OpKind, Pattern};
use crate::units::parse_size;
use crate::ModelError;

const COLUMNS: [&str; 6] = ["block_size", "iops", "op", "qd", "threads", "latency_us"];

pub fn parse(text: &str) -> Result<Vec<Measurement>, ModelError> {
    if text.trim().is_empty() {
        return Err(ModelError::Empty);
    }
    if is_probe_csv(text) {
        return parse_probe_csv(text);
    }
    let mut rdr = ::csv::ReaderBuilder::new()
        .trim(::csv::Trim::All)
        .comment(Some(b'#'))
        .flexible(false)
        .from_reader(text.as_bytes());
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| ModelError::CsvRow {
            line: 1,
            what: e.to_string(),
        })?
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let mut idx = [None; 6];
    for (i, h) in header.iter().enumerate() {
        let pos = COLUMNS
            .iter()
            .position(|c| c == h)
            .ok_or_else(|| ModelError::CsvUnknownColumn { column: h.clone() })?;
        idx[pos] = Some(i);
    }
    let joined = header.join(",");
    let need = |k: usize| {
        idx[k].ok_or(ModelError::CsvMissingColumn {
            found: joined.clone(),
            missing: COLUMNS[k],
        })
    };
    let (bs_i, iops_i) = (need(0)?, need(1)?);

    let mut out = Vec::new();
    for (n, rec) in rdr.records().enumerate() {
        let line = n + 2;
        let rec = rec.map_err(|e| ModelError::CsvRow {
            line,
            what: format!("{e}; every row needs as many fields as the header"),
        })?;
        let row_err = |what: String| ModelError::CsvRow { line, what };
        let field = |k: Option<usize>| k.and_then(|i| rec.get(i)).filter(|s| !s.is_empty());
        let bs_text = field(Some(bs_i)).unwrap_or("");
        let bs = parse_size(bs_text)
            .ok()
            .filter(|v| *v >= 1.0 && v.fract() == 0.0)
            .ok_or_else(|| {
                row_err(format!(
                    "block_size {bs_text:?} is not a positive whole number of bytes"
                ))
            })? as u64;
        let iops = number(field(Some(iops_i)), "iops").map_err(&row_err)?;
        let (op, pattern) = match field(idx[2]) {
            Some(s) => parse_workload(s).map_err(|e| row_err(e.to_string()))?,
            None => (OpKind::Read, Pattern::Random),
        };
        let qd = count(field(idx[3]), "qd").map_err(&row_err)?;
        let threads = count(field(idx[4]), "threads").map_err(&row_err)?;
        let latency_us = match field(idx[5]) {
            Some(s) => Some(number(Some(s), "latency_us").map_err(&row_err)?),
            None => None,
        };
        let m = Measurement {
            op,
            pattern,
            block_size: bs,
            qd,
            threads,
            iops,
            latency_us,
            ci95_rel: None,
        };
        m.validate().map_err(|e| row_err(e.to_string()))?;
        out.push(m);
    }
    if out.is_empty() {
        return Err(ModelError::CsvRow {
            line: 2,
            what: "no data rows after the header".into(),
        });
    }
    Ok(out)
}

fn number(s: Option<&str>, what: &str) -> Result<f64, String> {
    let s = s.ok_or_else(|| format!("{what} is empty"))?;
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{what} {s:?} is not a number"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{what} must be positive, got {s}"));
    }
    Ok(v)
}

fn count(s: Option<&str>, what: &str) -> Result<u32, String> {
    match s {
        None => Ok(1),
        Some(s) => s
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{what} {s:?} must be a positive whole number")),
    }
}

/// The probe's `--csv` output starts with this header.
const PROBE_HEADER: &str = "mode,bs,align,dist,threads,qd,engine";

fn is_probe_csv(text: &str) -> bool {
    text.trim_start().starts_with(PROBE_HEADER)
}

/// `pagewise probe --csv` output. As for its JSON, only uniform offsets
/// aligned to the block size feed the model; the sync engine runs at QD1
/// whatever `qd` says.
fn parse_probe_csv(text: &str) -> Result<Vec<Measurement>, ModelError> {
    let mut rdr = ::csv::ReaderBuilder::new()
        .trim(::csv::Trim::All)
        .from_reader(text.as_bytes());
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| ModelError::CsvRow {
            line: 1,
            what: e.to_string(),
        })?
        .iter()
        .map(str::to_string)
        .collect();
    let col = |name: &'static str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or(ModelError::CsvMissingColumn {
                found: header.join(","),
                missing: name,
            })
    };
    let c = [
        col("mode")?,
        col("bs")?,
        col("align")?,
        col("dist")?,
        col("threads")?,
        col("qd")?,
        col("engine")?,
        col("iops")?,
        col("lat_mean_us")?,
        col("ci95_rel")?,
    ];
    let mut out = Vec::new();
    for (n, rec) in rdr.records().enumerate() {
        let line = n + 2;
        let row_err = |what: String| ModelError::CsvRow { line, what };
        let rec = rec.map_err(|e| row_err(e.to_string()))?;
        let f = |i: usize| rec.get(c[i]).unwrap_or("");
        let (op, pattern) = parse_workload(f(0)).map_err(|e| row_err(e.to_string()))?;
        let bs = count(Some(f(1)), "bs").map_err(&row_err)? as u64;
        let align: u64 = f(2).parse().unwrap_or(bs);
        if f(3) != "uniform" || (pattern == Pattern::Random && align != bs) {
            continue;
        }
        let threads = count(Some(f(4)), "threads").map_err(&row_err)?;
        let qd = if f(6) == "sync" {
            1
        } else {
            count(Some(f(5)), "qd").map_err(&row_err)?
        };
        let m = Measurement {
            op,
            pattern,
            block_size: bs,
            qd,
            threads,
            iops: number(Some(f(7)), "iops").map_err(&row_err)?,
            latency_us: f(8).parse().ok().filter(|l: &f64| *l > 0.0),
            ci95_rel: f(9)
                .parse()
                .ok()
                .filter(|c: &f64| c.is_finite() && *c >= 0.0),
        };
        m.validate().map_err(|e| row_err(e.to_string()))?;
        out.push(m);
    }
    if out.is_empty() {
        return Err(ModelError::CsvRow {
            line: 2,
            what: "no uniform, block-aligned points in this probe CSV".into(),
        });
    }
    Ok(out)
}

/// Writes measurements as CSV with every column (the inverse of [`parse`]).
pub fn to_csv(ms: &[Measurement]) -> String {
    let mut s = String::from("op,block_size,qd,threads,iops,latency_us\n");
    for m in ms {
        let lat = m.latency_us.map(|l| l.to_string()).unwrap_or_default();
        s.push_str(&format!(
            "{},{},{},{},{},{}\n",
            m.workload(),
            m.block_size,
            m.qd,
            m.threads,
            m.iops,
            lat
        ));
    }
    s
}
