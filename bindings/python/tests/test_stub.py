"""The .pyi stub names every public name, and every public name has a docstring."""

import ast
import pathlib

import pagewise
from pagewise import _pagewise

STUB = pathlib.Path(__file__).resolve().parents[1] / "python" / "pagewise" / "_pagewise.pyi"


def stub_names():
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        if isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return top, members


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_covers_the_module():
    top, members = stub_names()
    assert public(_pagewise) <= top, public(_pagewise) - top
    assert set(pagewise.__all__) - {"__version__"} <= top
    for cls in (pagewise.Db, pagewise.Tree, pagewise.Batch):
        assert public(cls) <= members[cls.__name__], (cls, public(cls) - members[cls.__name__])


def test_every_public_name_has_a_docstring():
    for name in public(_pagewise):
        obj = getattr(_pagewise, name)
        if callable(obj):
            assert obj.__doc__, name
    for cls in (pagewise.Db, pagewise.Tree, pagewise.Batch):
        for name in public(cls):
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name}"
