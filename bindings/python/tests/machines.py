"""What the stateful Hypothesis tests share: a Db in a temporary directory
holding tree "t" of the machine's kind, checked and removed at teardown,
and one pair of test cases (B+tree, B-epsilon) per machine."""

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine

import pagewise

EXAMPLES = int(os.environ.get("PAGEWISE_PY_EXAMPLES", "25"))
CACHE = 256 << 10


class DbMachine(RuleBasedStateMachine):
    """Base of the machines: `create_db` in an `@initialize` rule."""

    kind = "btree"

    def create_db(self, **options):
        self.dir = tempfile.mkdtemp(prefix="pagewise-model-")
        self.path = os.path.join(self.dir, "m.pw")
        self.db = pagewise.Db.create(self.path, page_size=512, cache_bytes=CACHE, **options)
        self.t = self.tree()

    def tree(self):
        if self.kind == "btree":
            return self.db.tree("t")
        return self.db.tree("t", kind="bepsilon", node_bytes=8 << 10, basement_bytes=1 << 10, fanout=4)

    def teardown(self):
        if getattr(self, "db", None) is not None:
            assert self.db.check()["problems"] == []
            self.db.close()
        shutil.rmtree(getattr(self, "dir", ""), ignore_errors=True)


def model_cases(machine, steps):
    """The machine's test cases for a B+tree and a B-epsilon tree."""
    common = settings(
        max_examples=EXAMPLES,
        stateful_step_count=steps,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    bepsilon = type(machine.__name__ + "BEpsilon", (machine,), {"kind": "bepsilon"})
    cases = []
    for m in (machine, bepsilon):
        case = m.TestCase
        case.settings = common
        cases.append(case)
    return cases
