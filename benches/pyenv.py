"""The benchmarks' Python: a virtual environment outside the checkout
(~/.cache/shardset/bench-venv, or $SHARDSET_BENCH_VENV) with the pinned
packages of bench-requirements.txt. `reexec()` creates it when missing or
stale and runs the calling script again inside it; nothing is installed into
the interpreter that started the script."""

import filecmp
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQS = os.path.join(ROOT, "bench-requirements.txt")
VENV = os.environ.get("SHARDSET_BENCH_VENV",
                      os.path.expanduser("~/.cache/shardset/bench-venv"))
PY = os.path.join(VENV, "bin", "python")
STAMP = os.path.join(VENV, ".shardset-requirements")


def _fresh():
    dev = os.path.join(ROOT, "dev-requirements.txt")
    return (os.path.exists(PY) and os.path.exists(STAMP)
            and filecmp.cmp(REQS, STAMP, shallow=False)
            and filecmp.cmp(dev, STAMP + ".dev", shallow=False))


def reexec():
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV) and _fresh():
        return
    if not _fresh():
        print(f"creating the bench Python environment in {VENV}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([PY, "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", "-r", REQS])
        shutil.copy(REQS, STAMP)
        shutil.copy(os.path.join(ROOT, "dev-requirements.txt"), STAMP + ".dev")
    os.execv(PY, [PY] + sys.argv)
