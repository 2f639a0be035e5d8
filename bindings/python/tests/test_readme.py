"""The README's Python example runs as written."""

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def python_section_examples():
    text = README.read_text()
    section = text.split("## Python: `import pagewise`", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_example_runs(tmp_path):
    blocks = python_section_examples()
    assert len(blocks) == 1
    r = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[(b'k3', b'v3'), (b'k2', b'v2')]" in r.stdout
