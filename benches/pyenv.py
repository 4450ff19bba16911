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


def _fresh(reqs=REQS, venv=VENV, extra=True):
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".shardset-requirements")
    dev = os.path.join(ROOT, "dev-requirements.txt")
    return (os.path.exists(py) and os.path.exists(stamp)
            and filecmp.cmp(reqs, stamp, shallow=False)
            and (not extra or filecmp.cmp(dev, stamp + ".dev", shallow=False)))


def reexec(reqs=REQS, venv=VENV, no_deps=False):
    """Runs the calling script again in the environment of `reqs` (the
    benchmarks' own by default), made first when missing or stale.
    no_deps: `reqs` pins every package (a complete freeze), installed as it
    is without resolving dependencies again."""
    own = reqs == REQS
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".shardset-requirements")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv) and _fresh(reqs, venv, own):
        return
    if not _fresh(reqs, venv, own):
        print(f"creating the bench Python environment in {venv}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", venv])
        subprocess.check_call([py, "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", "-r", reqs]
                              + (["--no-deps"] if no_deps else []))
        shutil.copy(reqs, stamp)
        if own:
            shutil.copy(os.path.join(ROOT, "dev-requirements.txt"), stamp + ".dev")
    os.execv(py, [py] + sys.argv)
