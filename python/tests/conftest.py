import os
import shutil
import sys
import tempfile

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


@pytest.fixture(scope="session")
def ref():
    """The reference package itself, from the checkout STABLE_DATASETS_REPO
    names: its cache, dataset and schema modules (`reference` tests only)."""
    repo = os.environ.get("STABLE_DATASETS_REPO")
    assert repo and os.path.isdir(os.path.join(repo, "stable_datasets")), \
        "STABLE_DATASETS_REPO must name a checkout of galilai-group/stable-datasets"
    # The checkout's package alone (its top-level __init__ imports every builder).
    shim = tempfile.mkdtemp()
    os.makedirs(os.path.join(shim, "stable_datasets"))
    with open(os.path.join(shim, "stable_datasets", "__init__.py"), "w") as f:
        f.write(f"__path__ = [{os.path.join(repo, 'stable_datasets')!r}]\n")
    sys.path.insert(0, shim)
    import stable_datasets.cache as cache
    import stable_datasets.dataset as dataset
    import stable_datasets.schema as schema
    return cache, dataset, schema
