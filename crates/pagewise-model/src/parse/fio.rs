//! fio JSON output (`fio --output-format=json`), one or several jobs.
//!
//! Each job's options are its own `job options` over the file's `global options`
//! over fio's defaults (rw=read, bs=4k, iodepth=1, numjobs=1). Without
//! `group_reporting`, fio lists every clone of a `numjobs` job separately under
//! the same name and group; their IOPS are summed. With it, the one entry
//! already holds the sum. Synchronous engines (sync, psync, ...) run at QD1
//! whatever `iodepth` says.

use crate::measurement::{Measurement, OpKind, Pattern};
use crate::units::parse_size;
use crate::ModelError;
use serde_json::Value;
use std::collections::BTreeMap;

pub fn parse(text: &str) -> Result<Vec<Measurement>, ModelError> {
    if text.trim().is_empty() {
        return Err(ModelError::Empty);
    }
    // Some fio versions print warnings before the JSON object.
    let start = text.find('{').ok_or(ModelError::NotFio)?;
    let root: Value =
        serde_json::from_str(&text[start..]).map_err(|e| ModelError::Json(e.to_string()))?;
    let jobs = root
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or(ModelError::NotFio)?;
    let empty = serde_json::Map::new();
    let global = root
        .get("global options")
        .and_then(Value::as_object)
        .unwrap_or(&empty);

    // (group, name) -> accumulated job, in first-seen order.
    let mut order: Vec<(i64, String)> = Vec::new();
    let mut acc: BTreeMap<(i64, String), Acc> = BTreeMap::new();
    for job in jobs {
        let name = job
            .get("jobname")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let group = job.get("groupid").and_then(Value::as_i64).unwrap_or(0);
        let one = parse_job(job, global, &name)?;
        let key = (group, name);
        match acc.get_mut(&key) {
            Some(a) => a.add(&one),
            None => {
                order.push(key.clone());
                acc.insert(key, one);
            }
        }
    }
    if order.is_empty() {
        return Err(ModelError::FioJob {
            job: "-".into(),
            what: "the file has no jobs".into(),
        });
    }
    order
        .into_iter()
        .map(|k| {
            let a = &acc[&k];
            let m = a.measurement();
            m.validate().map_err(|e| ModelError::FioJob {
                job: k.1.clone(),
                what: e.to_string(),
            })?;
            Ok(m)
        })
        .collect()
}

/// One job entry, or the sum of a job's clones.
struct Acc {
    op: OpKind,
    pattern: Pattern,
    bs: u64,
    qd: u32,
    threads: u32,
    iops: f64,
    /// Sum of iops x mean latency, to average latency weighted by I/Os.
    lat_weight: f64,
}

impl Acc {
    fn add(&mut self, o: &Acc) {
        self.iops += o.iops;
        self.lat_weight += o.lat_weight;
    }

    fn measurement(&self) -> Measurement {
        let latency_us =
            (self.lat_weight > 0.0 && self.iops > 0.0).then(|| self.lat_weight / self.iops);
        Measurement {
            op: self.op,
            pattern: self.pattern,
            block_size: self.bs,
            qd: self.qd,
            threads: self.threads,
            iops: self.iops,
            latency_us,
            ci95_rel: None,
        }
    }
}

fn parse_job(
    job: &Value,
    global: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<Acc, ModelError> {
    let err = |what: String| ModelError::FioJob {
        job: name.into(),
        what,
    };
    if let Some(e) = job.get("error").and_then(Value::as_i64) {
        if e != 0 {
            return Err(err(format!(
                "fio reported error {e} for this job; fix the job and rerun"
            )));
        }
    }
    let opts = job.get("job options").and_then(Value::as_object);
    let opt = |key: &str| -> Option<String> {
        opts.and_then(|o| o.get(key))
            .or_else(|| global.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let rw = opt("rw")
        .or_else(|| opt("readwrite"))
        .unwrap_or_else(|| "read".into());
    let (op, pattern) = fio_rw(&rw).ok_or_else(|| err(format!("unsupported rw={rw}")))?;
    let bs_text = opt("bs")
        .or_else(|| opt("blocksize"))
        .unwrap_or_else(|| "4k".into());
    // "bs=4k,8k" gives read and write sizes; the model takes the first.
    let first = bs_text.split([',', ':']).next().unwrap_or("");
    let bs = parse_size(first)
        .ok()
        .filter(|v| *v >= 1.0 && v.fract() == 0.0)
        .ok_or_else(|| err(format!("cannot read block size bs={bs_text}")))? as u64;
    let engine = opt("ioengine").unwrap_or_else(|| "psync".into());
    let qd = if is_sync_engine(&engine) {
        1
    } else {
        parse_count(opt("iodepth"), "iodepth").map_err(err)?
    };
    let threads = parse_count(opt("numjobs"), "numjobs").map_err(err)?;

    let side = |k: &str| -> (f64, f64) {
        let d = job.get(k);
        let iops = d
            .and_then(|d| d.get("iops"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let lat_ns = d
            .and_then(|d| d.get("lat_ns").or_else(|| d.get("clat_ns")))
            .and_then(|l| l.get("mean"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        (iops, lat_ns / 1000.0)
    };
    let (ri, rl) = side("read");
    let (wi, wl) = side("write");
    let (iops, lat_weight) = match op {
        OpKind::Read => (ri, ri * rl),
        OpKind::Write => (wi, wi * wl),
        OpKind::Mixed => (ri + wi, ri * rl + wi * wl),
    };
    if iops.is_nan() || iops <= 0.0 {
        return Err(err(format!(
            "no {op} I/Os completed (iops {iops}); did the job run long enough?"
        )));
    }
    Ok(Acc {
        op,
        pattern,
        bs,
        qd,
        threads,
        iops,
        lat_weight,
    })
}

fn parse_count(v: Option<String>, what: &str) -> Result<u32, String> {
    match v {
        None => Ok(1),
        Some(s) => s
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{what}={s} is not a positive whole number")),
    }
}

/// fio's rw= values (fio semantics: `read` is sequential).
fn fio_rw(rw: &str) -> Option<(OpKind, Pattern)> {
    let base = rw.split(':').next()?.trim();
    Some(match base {
        "read" => (OpKind::Read, Pattern::Sequential),
        "write" => (OpKind::Write, Pattern::Sequential),
        "randread" => (OpKind::Read, Pattern::Random),
        "randwrite" => (OpKind::Write, Pattern::Random),
        "rw" | "readwrite" => (OpKind::Mixed, Pattern::Sequential),
        "randrw" => (OpKind::Mixed, Pattern::Random),
        _ => return None,
    })
}

fn is_sync_engine(e: &str) -> bool {
    matches!(
        e,
        "sync" | "psync" | "vsync" | "pvsync" | "pvsync2" | "mmap"
    )
}
