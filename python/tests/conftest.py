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


# The reference package's pinned snapshot (galilai-group/stable-datasets at
# commit f38ac71) in shared/ beside the repository: where the `reference`
# tests find it when STABLE_DATASETS_REPO names no other checkout.
REFERENCE_SNAPSHOT = os.path.normpath(os.path.join(ROOT, "..", "shared", "reference",
                                                   "stable-datasets"))


@pytest.fixture(scope="session")
def ref():
    """The reference package itself, from the checkout STABLE_DATASETS_REPO
    names, else the pinned snapshot: its cache, dataset and schema modules
    (`reference` tests only). Fails, never skips, when it or one of its
    dependencies is missing."""
    repo = os.environ.get("STABLE_DATASETS_REPO") or REFERENCE_SNAPSHOT
    if not os.path.isdir(os.path.join(repo, "stable_datasets")):
        pytest.fail(f"the reference package (stable_datasets) is missing at {repo}: put the "
                    "project's shared/ folder beside the repository (its "
                    "reference/stable-datasets is the pinned snapshot), or set "
                    "STABLE_DATASETS_REPO to a checkout of galilai-group/stable-datasets",
                    pytrace=False)
    # The checkout's package alone (its top-level __init__ imports every builder).
    shim = tempfile.mkdtemp()
    os.makedirs(os.path.join(shim, "stable_datasets"))
    with open(os.path.join(shim, "stable_datasets", "__init__.py"), "w") as f:
        f.write(f"__path__ = [{os.path.join(os.path.abspath(repo), 'stable_datasets')!r}]\n")
    sys.path.insert(0, shim)
    try:
        import stable_datasets.cache as cache
        import stable_datasets.dataset as dataset
        import stable_datasets.schema as schema
    except ModuleNotFoundError as e:
        pytest.fail(f"the reference package at {repo} cannot import {e.name!r}, one of its "
                    "dependencies: install python/test-requirements.txt into this "
                    "interpreter's environment (./dev setup does)", pytrace=False)
    return cache, dataset, schema
