"""The package's types checked as part of the tests, with mypy (pinned in
python/test-requirements.txt) run by the tests' interpreter:

1. The stub of the native module (`shardset/_shardset.pyi`) against the
   module itself: `python -m mypy.stubtest shardset._shardset`, on the
   package these tests import (every class, method, function and
   parameter the bindings register is in the stub and agrees with it).

2. The pure-Python modules (python/shardset) and the Python examples
   (examples/*.py) under `mypy --strict`.

Both run in a temporary working directory, so mypy's cache stays out of
the checkout. Without mypy the tests fail, naming it; they never skip.
"""

import glob
import importlib.util
import os
import subprocess
import sys

import pytest

import shardset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "python", "shardset")
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))


def mypy(args, cwd, env=None):
    """`python -m <args>` with the tests' interpreter; fails the test with
    mypy's output unless it exits 0."""
    if importlib.util.find_spec("mypy") is None:
        pytest.fail(f"mypy is missing from the tests' interpreter ({sys.executable}): install "
                    "python/test-requirements.txt into it (./dev setup does)", pytrace=False)
    r = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"`python -m {' '.join(args)}` exited {r.returncode}:\n{r.stdout}{r.stderr}",
                    pytrace=False)
    return r.stdout


def test_stub_matches_native_module(tmp_path):
    # The stub and the module of the package imported here: its directory
    # first on the path of the runtime stubtest imports and of mypy.
    where = os.path.dirname(os.path.dirname(os.path.abspath(shardset.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (where, env.get("PYTHONPATH")) if p)
    out = mypy(["mypy.stubtest", "--strict-type-check-only", "shardset._shardset"],
               cwd=tmp_path, env=env)
    assert "Success" in out, out


def test_package_and_examples_pass_mypy_strict(tmp_path):
    assert EXAMPLES, "no Python example found in examples/"
    out = mypy(["mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), PACKAGE, *EXAMPLES],
               cwd=tmp_path)
    assert "Success: no issues found" in out, out
