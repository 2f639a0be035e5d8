//! `pagewise probe` as a user runs it: every bad input gets a one-line error
//! saying what to do, a non-zero exit, and nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn pagewise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .args(args)
        .output()
        .expect("run pagewise")
}

/// Asserts failure with exactly one stderr line containing every `needle`.
fn assert_refused(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "want a one-line error, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "error lacks '{n}': {err}");
    }
    assert!(out.stdout.is_empty(), "nothing on stdout on error");
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// A quick sweep that would run if the input were valid.
const QUICK: [&str; 8] = [
    "--ops",
    "64",
    "--warmup",
    "0",
    "--max-reps",
    "1",
    "--min-reps",
    "1",
];

fn probe(path: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["probe", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&QUICK);
    pagewise(&args)
}

#[test]
fn nonexistent_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert_refused(
        &probe(&missing, &["--size", "4m"]),
        &["does not exist", "give a directory"],
    );
    assert!(!missing.exists());
    assert_eq!(entries(dir.path()), 0);
}

#[test]
fn block_size_not_multiple_of_logical_block_under_direct_io() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(
        &probe(dir.path(), &["--bs", "1000", "--size", "4m"]),
        &["not a multiple of the logical block size", "--no-direct"],
    );
    assert_eq!(entries(dir.path()), 0, "no test file created");
}

#[test]
fn alignment_smaller_than_logical_block() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(
        &probe(
            dir.path(),
            &["--bs", "4k", "--align", "256", "--size", "4m"],
        ),
        &["alignment 256", "--align"],
    );
    assert_eq!(entries(dir.path()), 0);
}

#[test]
fn file_smaller_than_one_block() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tiny");
    std::fs::write(&f, [7u8; 100]).unwrap();
    assert_refused(&probe(&f, &["--bs", "4k"]), &["less than one", "--bs"]);
    assert_eq!(std::fs::read(&f).unwrap(), vec![7u8; 100]);
}

#[test]
fn write_mode_on_existing_file_needs_allow_write() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("data");
    let content: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&f, &content).unwrap();
    for mode in ["randwrite", "seqwrite", "mixed:70"] {
        assert_refused(
            &probe(&f, &["--bs", "4k", "--mode", mode]),
            &["--allow-write", mode],
        );
    }
    assert_eq!(std::fs::read(&f).unwrap(), content, "file untouched");
    assert_eq!(entries(dir.path()), 1);
}

/// A block device node that exists here (checks refuse before opening it).
fn some_block_device() -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    ["/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"]
        .iter()
        .map(PathBuf::from)
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.file_type().is_block_device())
                .unwrap_or(false)
        })
}

#[test]
fn write_mode_on_device_needs_destroy_data() {
    let Some(dev) = some_block_device() else {
        eprintln!("skipped: no block device node");
        return;
    };
    assert_refused(
        &probe(&dev, &["--bs", "4k", "--mode", "randwrite"]),
        &["--destroy-data", "block device"],
    );
}

/// The block device holding `/` (mounted by definition).
fn root_device() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let line = info
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))?;
    let id = line.split_whitespace().nth(2)?;
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{id}")).ok()?;
    let name = sys.file_name()?;
    let dev = PathBuf::from("/dev").join(name);
    dev.exists().then_some(dev)
}

#[test]
fn mounted_device_is_never_written() {
    let Some(dev) = root_device() else {
        eprintln!("skipped: / is not on a block device with a /dev node");
        return;
    };
    let out = probe(
        &dev,
        &["--bs", "4k", "--mode", "randwrite", "--destroy-data"],
    );
    assert_refused(&out, &["mounted at /", "unmount"]);
}

#[test]
fn no_free_space() {
    // A 1 MiB tmpfs: too small for any test file. Needs root to mount.
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().to_str().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("skipped: cannot mount a small tmpfs here (not root?)");
        return;
    }
    let out = probe(dir.path(), &["--bs", "4k"]);
    let listed = entries(dir.path());
    let _ = Command::new("umount").arg(mnt).status();
    assert_refused(&out, &["not enough free space", "--size"]);
    assert_eq!(listed, 0, "no test file left behind");
}

#[test]
fn bad_option_values_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (vec!["--mode", "randomread"], "unknown mode"),
        (vec!["--bs", "8m"], "out of range"),
        (vec!["--bs", "3k..8k"], "powers of two"),
        (vec!["--dist", "zipf:-1"], "theta must be positive"),
        (vec!["--engine", "aio"], "use uring or sync"),
        (vec!["--tolerance", "150%"], "--tolerance"),
        (vec!["--qd", "0"], "--threads and --qd"),
    ] {
        let mut a = args.clone();
        a.extend(["--size", "4m"]);
        assert_refused(&probe(dir.path(), &a), &[needle]);
    }
    assert_eq!(entries(dir.path()), 0);
}

#[test]
fn help_documents_every_option_with_its_default() {
    let out = pagewise(&["probe", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for (opt, default) in [
        ("--mode", "[default: randread]"),
        ("--bs", "[default: 512..1m]"),
        ("--align", "[default: each block size]"),
        ("--dist", "[default: uniform]"),
        ("--threads", "[default: 1]"),
        ("--qd", "[default: 1]"),
        ("--engine", "[default: uring]"),
        ("--direct", "[default: on;"),
        ("--fsync-every", "[default: 0]"),
        ("--size", "[default: 1g]"),
        ("--duration", "[default: 2s]"),
        ("--warmup", "[default: 1s]"),
        ("--tolerance", "[default: 5%]"),
        ("--max-reps", "[default: 5]"),
        ("--min-reps", "[default: 2]"),
    ] {
        let at = help
            .find(&format!("{opt} <"))
            .or_else(|| help.find(&format!("{opt} ")))
            .unwrap_or_else(|| panic!("{opt} missing from help"));
        let rest = &help[at..];
        let next = rest[2..].find(" --").map_or(rest.len(), |i| i + 2);
        assert!(
            rest[..next].contains(default),
            "{opt} does not show {default}: {}",
            &rest[..next]
        );
    }
    for opt in [
        "--no-direct",
        "--ops",
        "--out",
        "--csv",
        "--plot",
        "--json",
        "--allow-write",
        "--destroy-data",
    ] {
        assert!(help.contains(opt), "{opt} missing from help");
    }
}

#[test]
fn small_probe_writes_json_csv_and_charts_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let json = dir.path().join("r.json");
    let csv = dir.path().join("r.csv");
    let plots = dir.path().join("plots");
    let out = pagewise(&[
        "probe",
        target.to_str().unwrap(),
        "--bs",
        "4k,16k",
        "--align",
        "4k,8k",
        "--mode",
        "randread,randwrite",
        "--size",
        "8m",
        "--ops",
        "100",
        "--warmup",
        "0",
        "--min-reps",
        "1",
        "--max-reps",
        "2",
        "--json",
        "--out",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(stdout, file);
    assert_eq!(file["schema"], "pagewise-probe/1");
    let points = file["points"].as_array().unwrap();
    // 2 modes x 2 bs x 2 alignments.
    assert_eq!(points.len(), 8);
    for p in points {
        let reps = p["repetitions"]["count"].as_u64().unwrap();
        assert_eq!(p["ops"].as_u64().unwrap(), 100 * reps);
        assert_eq!(
            p["bytes"].as_u64().unwrap(),
            100 * reps * p["params"]["bs"].as_u64().unwrap()
        );
        assert_eq!(p["params"]["align"].as_u64().unwrap() % 4096, 0);
    }
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        1 + 8
    );
    for chart in ["iops.svg", "throughput.svg", "latency.svg"] {
        let svg = std::fs::read_to_string(plots.join(chart)).unwrap();
        assert!(svg.contains("</svg>") && svg.contains("4 KiB"), "{chart}");
    }
    let heat = std::fs::read_dir(&plots)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("heatmap")
        })
        .count();
    assert_eq!(heat, 2, "one heat map per mode");
    assert_eq!(entries(&target), 0, "test file removed");
}

/// A loop device over a fresh image file, detached on drop.
struct Loop {
    dev: PathBuf,
    image: PathBuf,
}

impl Loop {
    fn new(dir: &Path, bytes: u64) -> Option<Self> {
        let image = dir.join("loop.img");
        let data: Vec<u8> = (0..bytes).map(|i| (i % 253) as u8).collect();
        std::fs::write(&image, data).ok()?;
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&image)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let dev = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        Some(Self { dev, image })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

#[test]
fn block_device_is_read_by_default_and_written_only_with_destroy_data() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lo) = Loop::new(dir.path(), 8 << 20) else {
        eprintln!("skipped: cannot attach a loop device here (not root?)");
        return;
    };
    let before = std::fs::read(&lo.image).unwrap();
    let read = probe(&lo.dev, &["--bs", "4k", "--json"]);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(r["target"]["kind"], "block_device");
    assert_eq!(r["target"]["size"], 8 << 20);
    assert_eq!(r["points"][0]["ops"], 64);
    assert_eq!(
        std::fs::read(&lo.image).unwrap(),
        before,
        "a read probe changed the device"
    );

    assert_refused(
        &probe(&lo.dev, &["--bs", "4k", "--mode", "randwrite"]),
        &["--destroy-data"],
    );
    assert_eq!(std::fs::read(&lo.image).unwrap(), before);

    let write = probe(
        &lo.dev,
        &[
            "--bs",
            "4k",
            "--mode",
            "randwrite",
            "--destroy-data",
            "--json",
        ],
    );
    assert!(
        write.status.success(),
        "{}",
        String::from_utf8_lossy(&write.stderr)
    );
    let after = std::fs::read(&lo.image).unwrap();
    assert_eq!(after.len(), before.len(), "writes stayed inside the device");
    let changed = before
        .chunks(4096)
        .zip(after.chunks(4096))
        .filter(|(a, b)| a != b)
        .count();
    // 64 random 4 KiB writes over 2048 blocks: at least one block changed, at most 64.
    assert!((1..=64).contains(&changed), "{changed} blocks changed");
}
