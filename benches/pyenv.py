"""The benchmarks' Python: a virtual environment outside the checkout
(~/.cache/shardset/bench-venv, or $SHARDSET_BENCH_VENV) with the pinned
packages of bench-requirements.txt. `reexec()` creates it when missing or
stale and runs the calling script again inside it; nothing is installed into
the interpreter that started the script."""

import filecmp
import glob
import os
import shutil
import subprocess
import sys
import tempfile

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


# The pinned snapshot of the reference's public repository
# (galilai-group/stable-datasets) beside the checkout, used when
# $STABLE_DATASETS_REPO is unset; the commit it was taken at.
REFERENCE_SNAPSHOT = os.path.normpath(os.path.join(ROOT, "..", "shared", "reference",
                                                   "stable-datasets"))
REFERENCE_SNAPSHOT_COMMIT = "f38ac71"


def reference_package():
    """The reference's modules `(cache, dataset, schema)` imported from the
    checkout named by $STABLE_DATASETS_REPO (its public repository), else
    from the pinned snapshot beside the checkout (REFERENCE_SNAPSHOT), and
    the commit it is at; stops with a message when it is missing."""
    repo = os.path.abspath(os.environ.get("STABLE_DATASETS_REPO") or REFERENCE_SNAPSHOT)
    if not os.path.isdir(os.path.join(repo, "stable_datasets")):
        sys.exit(f"the reference package (stable_datasets) is missing at {repo}: set "
                 "STABLE_DATASETS_REPO to a checkout of its public repository "
                 "(galilai-group/stable-datasets), or lay the pinned snapshot at "
                 f"{REFERENCE_SNAPSHOT}")
    # Its spawned workers find it through the shim below, by this variable.
    os.environ["STABLE_DATASETS_REPO"] = repo
    # A package shim on sys.path (and PYTHONPATH, for the reference's own
    # spawned workers) whose only content is the checkout's module path:
    # the checkout's top-level __init__ imports every dataset builder.
    shim = os.path.join(tempfile.gettempdir(), f"shardset-bench-shim-{os.getuid()}")
    os.makedirs(os.path.join(shim, "stable_datasets"), exist_ok=True)
    init = os.path.join(shim, "stable_datasets", "__init__.py")
    text = ("import os\n__path__ = [os.path.join(os.environ['STABLE_DATASETS_REPO'], "
            "'stable_datasets')]\n")
    if not os.path.exists(init) or open(init).read() != text:
        # Atomically: worker processes may be importing it at this moment.
        tmp = f"{init}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, init)
    if shim not in sys.path:
        sys.path.insert(0, shim)
    if shim not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = shim + os.pathsep + os.environ.get("PYTHONPATH", "")
    import stable_datasets.cache as cache
    import stable_datasets.dataset as dataset
    import stable_datasets.schema as schema
    commit = "?"
    if os.path.exists(os.path.join(repo, ".git")):
        try:
            commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip() or "?"
        except OSError:
            pass
    elif os.path.realpath(repo) == os.path.realpath(REFERENCE_SNAPSHOT):
        commit = f"{REFERENCE_SNAPSHOT_COMMIT} (snapshot)"
    return cache, dataset, schema, commit


def install_shardset(venv):
    """The shardset package in the running environment `venv`: the wheel
    named by $SHARDSET_WHEEL, else a release wheel built from this checkout
    with maturin (installed into `venv` first when it lacks it); installed
    again only when the wheel changed."""
    stamp = os.path.join(venv, ".shardset-wheel")
    wheel = os.environ.get("SHARDSET_WHEEL")
    if not wheel:
        maturin = os.path.join(venv, "bin", "maturin")
        if not os.path.exists(maturin):
            subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                                   "--disable-pip-version-check", "maturin==1.16.0"])
        out = tempfile.mkdtemp(prefix="shardset-wheel-")
        # The module links the system FFmpeg libraries; a manylinux repair
        # (patchelf) is not needed for a wheel used on this machine.
        subprocess.check_call([maturin, "build", "--release", "--auditwheel", "skip", "--quiet",
                               "-o", out], cwd=os.path.join(ROOT, "python"))
        wheel = glob.glob(os.path.join(out, "*.whl"))[0]
    key = f"{os.path.abspath(wheel)} {os.path.getmtime(wheel)}"
    if not os.path.exists(stamp) or open(stamp).read() != key:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", "--force-reinstall", "--no-deps",
                               wheel])
        with open(stamp, "w") as f:
            f.write(key)
