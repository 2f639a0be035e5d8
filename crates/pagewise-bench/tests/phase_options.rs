//! Phase options that change how a phase runs: `warm=1` reads everything
//! first; a cache smaller than the Db trims the OS page cache, a larger one does not.

use pagewise_bench::exec::NoProgress;
use pagewise_bench::runner::{run, Measure, RunConfig};
use pagewise_bench::{Params, Settings, Spec};

#[test]
fn warm_reads_everything_and_only_small_caches_trim_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let base = Params {
        keys: 200_000,
        ..Params::default()
    };
    let specs = [
        "fillrandom",
        "readrandom:cache=2G,warm=1,ops=100",
        "readrandom:cache=5%,ops=100",
    ];
    let cfg = RunConfig {
        engine: "btreemap".into(),
        settings: Settings::default(),
        specs: specs
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
    run(&cfg, &NoProgress, &mut |r| {
        out.push(r.clone());
        Ok(())
    })
    .unwrap();
    let has = |i: usize, what: &str| out[i].notes.iter().any(|n| n.contains(what));
    assert!(
        has(1, "warmed up by reading all 200000"),
        "{:?}",
        out[1].notes
    );
    assert!(
        !has(1, "dropped every"),
        "a 2 GiB cache must not trim: {:?}",
        out[1].notes
    );
    assert!(
        has(2, "dropped every"),
        "a 5% cache must trim: {:?}",
        out[2].notes
    );
    assert!(!has(2, "warmed up"));
    assert_eq!(
        out[2].settings.cache_bytes,
        out[1].db_bytes / 20,
        "5% of the Db on disk"
    );
    assert_eq!((out[1].found, out[1].missing), (100, 0));
}
