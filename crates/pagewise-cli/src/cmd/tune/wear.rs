//! The report's wear table: lifetime for each layout at one user write rate.

use super::Args;
use crate::report::WearRow;
use pagewise_model::advise::Advice;
use pagewise_model::units::{fmt_bytes, fmt_count};
use pagewise_model::wear::{estimate, FtlWa, WearInput};
use pagewise_probe::Topology;

/// Lifetime at one user write rate for the B+tree (one page written per
/// insert: engine WA = page / record), the B-epsilon tree (node writes per
/// insert x node / record) and the ideal of writing each byte once. The rate
/// is --write-rate, else the inserts/s the advised B+tree sustains in the mix.
pub fn wear_rows(
    args: &Args,
    topo: &Topology,
    a: &Advice,
) -> anyhow::Result<(Vec<WearRow>, String)> {
    let capacity = topo.size.unwrap_or(256_000_000_000) as f64;
    let record = a.dataset.leaf_entry() as f64;
    let best = a.rows.iter().find(|r| r.page_size == a.best);
    let (user_rate, basis) = match (args.write_rate, best) {
        (Some(r), _) => (r, "the given --write-rate".to_string()),
        (None, Some(b)) if a.mix.insert > 0.0 => {
            let ins = b.mix_ops * a.mix.insert;
            (
                ins * record,
                format!(
                    "{} inserts/s of {} B records: the insert share of the mix at the recommended page size, running flat out",
                    fmt_count(ins),
                    record
                ),
            )
        }
        _ => (
            10e6,
            "10 MB/s (the mix has no inserts; set --write-rate)".to_string(),
        ),
    };
    let mut rows = Vec::new();
    let mut push = |label: String, engine_wa: f64| -> anyhow::Result<()> {
        let e = estimate(&WearInput {
            capacity_bytes: capacity,
            pe_cycles: args.pe_cycles,
            host_write_rate: user_rate,
            engine_wa: engine_wa.max(1.0),
            ftl: FtlWa::OverProvisioning(args.over_provisioning),
        })?;
        rows.push(WearRow { label, estimate: e });
        Ok(())
    };
    push(
        format!(
            "B+tree, {} pages, one page written per insert",
            fmt_bytes(a.best as f64)
        ),
        a.best as f64 / record,
    )?;
    if let Some(b) = &a.bepsilon {
        push(
            format!(
                "B-epsilon tree, {} nodes, amortized flushes",
                fmt_bytes(b.node_size as f64)
            ),
            b.insert_ios / 2.0 * b.node_size as f64 / record,
        )?;
    }
    push("ideal: every user byte written once".into(), 1.0)?;
    Ok((rows, basis))
}
