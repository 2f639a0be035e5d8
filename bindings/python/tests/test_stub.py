"""The .pyi stub names every public name, and every public name has a docstring."""

import ast
import pathlib

import pagewise
from pagewise import _pagewise

STUB = pathlib.Path(__file__).resolve().parents[1] / "python" / "pagewise" / "_pagewise.pyi"


CLASSES = (
    pagewise.Db,
    pagewise.ReadableTree,
    pagewise.Tree,
    pagewise.Snapshot,
    pagewise.SnapshotTree,
    pagewise.Transaction,
    pagewise.Batch,
)


def stub_names():
    """Top-level names of the stub, and each class's members (its stub
    base classes' included)."""
    tree = ast.parse(STUB.read_text())
    top, own, bases = set(), {}, {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        if isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            own[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]

    def members(name):
        inherited = [members(b) for b in bases[name] if b in own]
        return own[name].union(*inherited)

    return top, {name: members(name) for name in own}


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_covers_the_module():
    top, members = stub_names()
    assert public(_pagewise) <= top, public(_pagewise) - top
    assert set(pagewise.__all__) - {"__version__"} <= top
    for cls in CLASSES:
        assert public(cls) <= members[cls.__name__], (cls, public(cls) - members[cls.__name__])


def test_every_public_name_has_a_docstring():
    for name in public(_pagewise):
        obj = getattr(_pagewise, name)
        if callable(obj):
            assert obj.__doc__, name
    for cls in CLASSES:
        for name in public(cls):
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name}"
