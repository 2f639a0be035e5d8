//! fio JSON and CSV parsing, against values read off the fixture files, and
//! the same data in both formats giving the same fit.

use pagewise_model::fit::fit_all;
use pagewise_model::parse::{csv, fio, parse_any};
use pagewise_model::{OpKind, Pattern};

const SWEEP: &str = include_str!("data/fio_randread_sweep.json");
const QD: &str = include_str!("data/fio_qd_threads_mixed.json");
const SINGLE: &str = include_str!("data/fio_single_randwrite.json");
const GROUPED: &str = include_str!("data/fio_group_reporting.json");

#[test]
fn fio_sweep_has_six_randread_points() {
    let ms = fio::parse(SWEEP).unwrap();
    let sizes: Vec<u64> = ms.iter().map(|m| m.block_size).collect();
    assert_eq!(sizes, [512, 4096, 16384, 65536, 262144, 1048576]);
    assert!(ms
        .iter()
        .all(|m| m.op == OpKind::Read && m.pattern == Pattern::Random));
    assert!(ms.iter().all(|m| m.qd == 1 && m.threads == 1));
    // Values as fio printed them (jobs[0].read.iops, jobs[0].read.lat_ns.mean).
    assert_eq!(ms[0].iops, 19777.34375);
    assert!(ms[0].latency_us.is_some());
}

#[test]
fn fio_iodepth_numjobs_and_mixed() {
    let ms = fio::parse(QD).unwrap();
    assert_eq!(ms.len(), 3, "the two numjobs clones merge into one point");
    assert_eq!((ms[0].qd, ms[0].threads, ms[0].block_size), (8, 1, 4096));
    assert_eq!(ms[0].iops, 56652.347652);
    // psync ignores iodepth; two clones reported separately are summed.
    assert_eq!((ms[1].op, ms[1].qd, ms[1].threads), (OpKind::Write, 1, 2));
    assert!((ms[1].iops - (14835.164835 + 14458.083832)).abs() < 1e-6);
    // randrw: reads + writes.
    assert_eq!((ms[2].op, ms[2].qd), (OpKind::Mixed, 4));
    assert!((ms[2].iops - (12574.425574 + 5553.446553)).abs() < 1e-6);
}

#[test]
fn fio_single_job_and_group_reporting() {
    let ms = fio::parse(SINGLE).unwrap();
    assert_eq!(ms.len(), 1);
    assert_eq!((ms[0].op, ms[0].pattern), (OpKind::Write, Pattern::Random));
    assert_eq!(ms[0].iops, 16693.306693);
    let g = fio::parse(GROUPED).unwrap();
    assert_eq!((g[0].qd, g[0].threads, g[0].block_size), (4, 2, 8192));
    assert_eq!(g[0].iops, 56406.593407);
}

#[test]
fn fio_errors() {
    assert!(fio::parse("").is_err());
    assert!(fio::parse("{\"x\": 1}").is_err());
    assert!(fio::parse("{\"jobs\": []}").is_err());
    assert!(fio::parse("{\"jobs\": [{\"jobname\": \"a\", \"job options\": {\"rw\": \"randread\"}, \"read\": {\"iops\": 0}}]}").is_err());
    assert!(fio::parse("{not json").is_err());
}

#[test]
fn same_data_same_fit_in_both_formats() {
    let from_fio = fio::parse(SWEEP).unwrap();
    let text = csv::to_csv(&from_fio);
    let from_csv = parse_any(&text).unwrap();
    assert_eq!(from_fio, from_csv);
    let a = fit_all(&from_fio).unwrap();
    let b = fit_all(&from_csv).unwrap();
    assert_eq!(a, b);
    // And the minimal CSV (block_size,iops only) gives the same S and W.
    let minimal: String = std::iter::once("block_size,iops".to_string())
        .chain(
            from_fio
                .iter()
                .map(|m| format!("{},{}", m.block_size, m.iops)),
        )
        .collect::<Vec<_>>()
        .join("\n");
    let c = fit_all(&csv::parse(&minimal).unwrap()).unwrap();
    assert_eq!(a.fits[0].affine.setup_s, c.fits[0].affine.setup_s);
    assert_eq!(a.fits[0].affine.sec_per_byte, c.fits[0].affine.sec_per_byte);
}

#[test]
fn csv_accepts_units_and_any_column_order() {
    let ms =
        csv::parse("iops,block_size,op,qd\n1000,4k,randwrite,4\n500,64KiB,seqread,1\n").unwrap();
    assert_eq!(ms[0].block_size, 4096);
    assert_eq!((ms[0].op, ms[0].qd), (OpKind::Write, 4));
    assert_eq!(
        (ms[1].block_size, ms[1].pattern),
        (65536, Pattern::Sequential)
    );
}

#[test]
fn csv_errors_are_clear() {
    let err = |t: &str| csv::parse(t).unwrap_err().to_string();
    assert!(err("").contains("empty"));
    assert!(err("block_size\n4096\n").contains("lacks column \"iops\""));
    assert!(err("block_size,iops,colour\n4096,1,red\n").contains("unknown"));
    assert!(err("block_size,iops\n4096,-5\n").contains("line 2"));
    assert!(err("block_size,iops\n4096,0\n").contains("positive"));
    assert!(err("block_size,iops\n0,100\n").contains("block_size"));
    assert!(err("block_size,iops\n4096,lots\n").contains("not a number"));
    assert!(err("block_size,iops\n4096,100,7\n").contains("line 2"));
    assert!(err("block_size,iops,op\n4096,100,trim\n").contains("unknown operation"));
    assert!(err("block_size,iops\n").contains("no data rows"));
}

#[test]
fn probe_csv_is_understood() {
    // Two rows as `pagewise probe --csv` writes them, plus a zipf row and a
    // misaligned row that must be left out, and a sync-engine row at "qd 8".
    let text = "mode,bs,align,dist,threads,qd,engine,direct,iops,mb_per_s,lat_mean_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,reps,ci95_rel,cpu_us_per_io,ops,bytes
randread,4096,4096,uniform,1,1,uring,true,4597.8,18.833,216.61,35.52,112.45,3989.50,21430.27,29130.75,5,1.5419,21.574,1144,4685824
randread,16384,16384,uniform,1,1,uring,true,4406.4,72.194,313.75,60.22,120.13,3620.86,18219.01,185860.10,5,0.7900,21.844,1336,21889024
randread,4096,4096,zipf:0.99,1,1,uring,true,9000.0,1,1,1,1,1,1,1,5,,1,1,1
randread,4096,512,uniform,1,1,uring,true,9000.0,1,1,1,1,1,1,1,5,,1,1,1
randwrite,4096,4096,uniform,2,8,sync,true,3000.0,1,1,1,1,1,1,1,5,0.02,1,1,1
";
    let ms = parse_any(text).unwrap();
    assert_eq!(ms.len(), 3);
    assert_eq!((ms[0].block_size, ms[0].iops), (4096, 4597.8));
    assert_eq!(ms[0].latency_us, Some(216.61));
    assert_eq!(ms[1].ci95_rel, Some(0.79));
    assert_eq!((ms[2].op, ms[2].qd, ms[2].threads), (OpKind::Write, 1, 2));
}
