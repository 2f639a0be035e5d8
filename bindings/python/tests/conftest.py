import pytest

import pagewise


@pytest.fixture
def path(tmp_path):
    """A path for a new Db inside the test's temporary directory."""
    return str(tmp_path / "test.pw")


@pytest.fixture
def db(path):
    d = pagewise.Db.create(path, cache_bytes=4 << 20, durability="buffered")
    yield d
    d.close()
