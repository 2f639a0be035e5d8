"""The lab from Python: a probe sweep with progress, and the result files as objects."""

import json

import pytest

import pagewise

# A probe run short enough for a unit test: no warm-up, two repetitions, pread.
QUICK = dict(warmup_secs=0.0, engine="sync", min_reps=2, max_reps=2)


def test_probe_with_progress_and_reload(tmp_path):
    seen = []
    r = pagewise.probe(
        str(tmp_path),
        modes=["randread", "seqread"],
        block_sizes=[4096, 16384],
        duration_secs=0.05,
        file_size_bytes=8 << 20,
        progress=seen.append,
        **QUICK,
    )
    assert len(r["points"]) == 4
    assert {p["params"]["bs"] for p in r["points"]} == {4096, 16384}
    assert all(p["iops"] > 0 for p in r["points"])
    stages = [s["stage"] for s in seen]
    assert stages.count("point_done") == 4 and "repetition" in stages
    assert list(tmp_path.iterdir()) == []  # the test file was removed
    f = tmp_path / "probe-results.json"
    f.write_text(json.dumps(r))
    back = pagewise.load_probe_results(str(f))
    assert back["schema"] == r["schema"] and back["host"] == r["host"]
    assert [p["params"] for p in back["points"]] == [p["params"] for p in r["points"]]
    assert [p["iops"] for p in back["points"]] == pytest.approx([p["iops"] for p in r["points"]])


def test_probe_on_an_emulated_drive(tmp_path):
    # Every I/O takes at least the profile's 2 ms setup on its one channel, so
    # QD1 can do at most 500 IOPS, whatever the real device does.
    r = pagewise.probe(
        str(tmp_path),
        block_sizes=[4096],
        duration_secs=0.1,
        file_size_bytes=4 << 20,
        emulate="2ms,120MB/s,1",
        **QUICK,
    )
    assert r["emulated"]["setup_us"] == 2000.0 and r["emulated"]["channels"] == 1
    assert [p["params"]["bs"] for p in r["points"]] == [4096]
    assert 0 < r["points"][0]["iops"] <= 500 * 1.05
    with pytest.raises(pagewise.OptionsError, match="emulate"):
        pagewise.probe(str(tmp_path), emulate="fast,please")
    with pytest.raises(pagewise.OptionsError, match="engine"):
        pagewise.probe(str(tmp_path), engine="aio")


def test_progress_errors_are_raised(tmp_path):
    def fail(_):
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        pagewise.probe(str(tmp_path), block_sizes=[4096], duration_secs=0.02,
                       file_size_bytes=4 << 20, progress=fail, **QUICK)
    with pytest.raises(TypeError, match="callable"):
        pagewise.probe(str(tmp_path), progress=3)
    with pytest.raises(pagewise.OptionsError, match="mode"):
        pagewise.probe(str(tmp_path), modes=["sideways"])


def test_load_errors_and_tune_summary(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"points": 3}')
    with pytest.raises(pagewise.Error, match="not probe results"):
        pagewise.load_probe_results(str(bad))
    with pytest.raises(pagewise.Error, match="not a tune summary"):
        pagewise.load_tune_results(str(bad))
    with pytest.raises(pagewise.Error, match="cannot read"):
        pagewise.load_probe_results(str(tmp_path / "missing.json"))
    summary = {"report": "r.html", "results": "probe-results.json", "best_page_size": 8192, "reason": "x"}
    good = tmp_path / "tune.json"
    good.write_text(json.dumps(summary))
    assert pagewise.load_tune_results(str(good)) == summary


def test_tune_on_an_emulated_drive_returns_what_it_writes(tmp_path):
    seen = []
    r = pagewise.tune(
        str(tmp_path), emulate="nvme", verify="off", block_sizes=[4096, 65536],
        duration_secs=0.05, warmup_secs=0.0, file_size_bytes=8 << 20, progress=seen.append,
    )
    assert r["results"]["emulated"]["name"] == "nvme" and "nvme" in r["drive"]
    tuned = json.loads((tmp_path / "tuned.json").read_text())
    assert tuned == r["tuned"]
    on_disk = json.loads((tmp_path / "probe-results.json").read_text())
    assert [p["params"] for p in on_disk["points"]] == [p["params"] for p in r["results"]["points"]]
    assert {p["params"]["bs"] for p in r["results"]["points"]} <= {4096, 65536}
    phases = [p["phase"] for p in seen]
    assert phases[-1] == "done" and "sweep" in phases and "model" in phases
    sweep = [p["step"] for p in seen if p["phase"] == "sweep"]
    assert sweep == sorted(sweep)  # steps never go back within a phase


def test_tune_stops_on_a_progress_error_and_checks_its_options(tmp_path):
    def fail(_):
        raise ValueError("enough")

    with pytest.raises(ValueError, match="enough"):
        pagewise.tune(str(tmp_path), emulate="nvme", verify="off", block_sizes=[4096, 65536],
                      duration_secs=0.05, warmup_secs=0.0, file_size_bytes=8 << 20, progress=fail)
    assert not (tmp_path / "tuned.json").exists()
    with pytest.raises(pagewise.OptionsError, match="mix"):
        pagewise.tune(str(tmp_path), mix="point=lots")
    with pytest.raises(pagewise.OptionsError, match="emulate"):
        pagewise.tune(str(tmp_path), emulate="fast,please")
    with pytest.raises(pagewise.OptionsError, match="verify"):
        pagewise.tune(str(tmp_path), verify="sometimes")
    with pytest.raises(pagewise.OptionsError):
        pagewise.tune(str(tmp_path), emulate="nvme", verify="off", block_sizes=[4096])
