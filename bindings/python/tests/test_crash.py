"""A child process is killed (SIGKILL) in the middle of writing; every write
it acknowledged (printed after the call returned) survives the reopen."""

import os
import signal
import subprocess
import sys

import pagewise

CHILD = r"""
import sys, pagewise
db = pagewise.Db.create(sys.argv[1], page_size=4096, durability="sync", wal_limit_bytes=1 << 20)
t = db.tree("t")
i = 0
while True:
    if i % 3 == 0:
        with db.batch() as b:
            b.insert(t, b"%08d" % i, b"batch-%d" % i)
            b.insert("side", b"%08d" % i, b"side-%d" % i)
    else:
        t[b"%08d" % i] = b"x" * (i % 200)
    print(i, flush=True)
    i += 1
"""


def expected(i):
    return b"batch-%d" % i if i % 3 == 0 else b"x" * (i % 200)


def test_acknowledged_writes_survive_sigkill(path):
    want = int(os.environ.get("PAGEWISE_PY_CRASH_WRITES", "400"))
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE, text=True)
    acked = -1
    try:
        for line in child.stdout:
            acked = int(line)
            if acked >= want:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # The child went on writing until the kill landed: what it printed
    # meanwhile was acknowledged too.
    for line in child.stdout:
        acked = int(line)
    assert acked >= want, f"the child acknowledged only {acked + 1} writes"
    with pagewise.Db.open(path) as db:
        t, side = db.tree("t"), db.tree("side")
        for i in range(acked + 1):
            assert t[b"%08d" % i] == expected(i), i
            if i % 3 == 0:
                assert side[b"%08d" % i] == b"side-%d" % i
        # At most the write in flight when killed is beyond the acknowledged ones.
        assert len(t) in (acked + 1, acked + 2)
        assert db.check()["problems"] == []
