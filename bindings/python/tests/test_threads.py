"""Threads reading while one writes: readers never see a wrong value or an
unordered scan, and the writer's every write is visible once it is done."""

import os
import random
import threading

import pagewise

WRITES = int(os.environ.get("PAGEWISE_PY_THREAD_WRITES", "3000"))


def value_of(i):
    return b"value-%08d" % (i * 7919)


def test_readers_while_one_writes(path):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    db = pagewise.Db(path, cache_bytes=1 << 20, page_size=1024, durability="buffered")
    t = db.tree("t")
    done = threading.Event()
    written = [0]
    errors = []

    def writer():
        try:
            for i in range(0, WRITES, 50):
                end = min(i + 50, WRITES)
                with db.batch() as b:
                    for j in range(i, end):
                        b.insert(t, b"%08d" % j, value_of(j))
                written[0] = end
        except Exception as e:  # reported by the main thread
            errors.append(e)
        finally:
            done.set()

    def reader(n):
        rng = random.Random(seed + n)
        try:
            while not done.is_set():
                upto = written[0]
                if upto == 0:
                    continue
                i = rng.randrange(upto)
                assert t[b"%08d" % i] == value_of(i)
                start = rng.randrange(upto)
                got = [k for k, _ in t.range(b"%08d" % start, b"%08d" % (start + 40))]
                assert got == sorted(got)
                assert got[: min(40, upto - start)] == [b"%08d" % j for j in range(start, min(start + 40, upto))]
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(n,)) for n in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors, errors
    assert len(t) == WRITES
    assert all(v == value_of(int(k)) for k, v in t.items())
    db.close()


def test_close_while_threads_iterate(path):
    db = pagewise.Db(path, durability="buffered")
    t = db.tree("t")
    t.update((b"%06d" % i, b"v" * 50) for i in range(20000))
    outcomes = []
    started = threading.Barrier(5)

    def scan():
        started.wait()
        try:
            for _ in range(50):
                for _ in t.range():
                    pass
            outcomes.append("finished")
        except pagewise.ClosedError:
            outcomes.append("closed")

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for th in threads:
        th.start()
    started.wait()
    db.close()
    for th in threads:
        th.join(timeout=120)
    assert len(outcomes) == 4 and "closed" in outcomes
