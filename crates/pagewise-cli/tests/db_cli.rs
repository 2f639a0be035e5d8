//! `pagewise db` as a user runs it: reading commands leave the files as they were.

use std::path::Path;
use std::process::{Command, Output};

fn pagewise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagewise"))
        .args(args)
        .output()
        .expect("run pagewise")
}

fn ok(args: &[&str]) -> String {
    let o = pagewise(args);
    assert!(
        o.status.success(),
        "pagewise {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn bytes(p: &Path) -> (Vec<u8>, Vec<u8>) {
    let wal = p.with_file_name(format!("{}-wal", p.file_name().unwrap().to_string_lossy()));
    (std::fs::read(p).unwrap(), std::fs::read(wal).unwrap())
}

#[test]
fn put_then_read_commands_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = p.to_str().unwrap();
    ok(&["db", "create", db, "--page-size", "512"]);
    for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
        ok(&["db", "put", db, k, v]);
    }
    let before = bytes(&p);
    assert_eq!(ok(&["db", "get", db, "b"]), "2\n");
    assert_eq!(ok(&["db", "scan", db]), "a\t1\nb\t2\nc\t3\n");
    assert_eq!(
        ok(&["db", "scan", db, "--reverse", "--limit", "1"]),
        "c\t3\n"
    );
    assert!(ok(&["db", "stats", db]).contains("page size       512 B"));
    assert!(ok(&["db", "check", db]).contains("3 entries"));
    assert!(
        bytes(&p) == before,
        "a reading command wrote to the database"
    );

    let o = pagewise(&["db", "get", db, "zz"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
    assert!(bytes(&p) == before);
}

#[test]
fn backup_writes_a_checked_copy_and_leaves_the_source_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let (db, copy) = (p.to_str().unwrap(), d.path().join("copy"));
    ok(&["db", "create", db, "--page-size", "512"]);
    for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
        ok(&["db", "put", db, k, v]);
    }
    let before = bytes(&p);
    let out = ok(&["db", "backup", db, copy.to_str().unwrap()]);
    assert!(
        out.contains("3 entries") && out.contains("check ok"),
        "{out}"
    );
    assert!(bytes(&p) == before, "backup wrote to the source");
    assert_eq!(
        ok(&["db", "scan", copy.to_str().unwrap()]),
        "a\t1\nb\t2\nc\t3\n"
    );
    assert!(ok(&["db", "stats", copy.to_str().unwrap()]).contains("page size       512 B"));
    let again = pagewise(&["db", "backup", db, copy.to_str().unwrap()]);
    assert!(
        !again.status.success(),
        "an existing copy is never overwritten"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}
