import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")


@pytest.fixture
def golden(tmp_path):
    """A copy of a golden cache (written by the reference) in a temp dir."""
    def copy(name):
        dst = tmp_path / name
        shutil.copytree(os.path.join(GOLDEN, name), dst)
        return str(dst)
    return copy
