"""Progress from Python: a callable is told the rows written up to the
total; a terminal shows a tqdm bar, a pipe shows nothing (real processes,
a real pseudo-terminal)."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap

import shardset
from shardset import Features, Value

N = 20_000
WRITE = textwrap.dedent(f"""
    import sys, shardset
    from shardset import Features, Value
    shardset.write_cache([{{"x": i}} for i in range({N})], Features({{"x": Value("int64")}}),
                         sys.argv[1], batch_size=500)
""")


def test_a_callable_is_told_the_rows_written_up_to_the_total(tmp_path):
    seen = []

    def slow():
        for i in range(N):
            if i % 2000 == 0:
                import time
                time.sleep(0.05)
            yield {"x": i}
    shardset.write_cache(slow(), Features({"x": Value("int64")}), tmp_path / "a",
                         batch_size=500, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (N, None), seen[-3:]
    assert len(seen) >= 3 and [d for d, _ in seen] == sorted(d for d, _ in seen)
    seen.clear()
    rows = [{"x": i} for i in range(100)]
    shardset.write_cache(rows, Features({"x": Value("int64")}), tmp_path / "b",
                         progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (100, 100)


def test_a_pipe_shows_nothing(tmp_path):
    r = subprocess.run([sys.executable, "-c", WRITE, str(tmp_path / "c")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and r.stdout == ""


def test_a_terminal_shows_a_bar(tmp_path):
    pid, fd = pty.fork()
    if pid == 0:
        # A terminal 100 columns wide (a new pseudo-terminal has no size).
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        os.execv(sys.executable, [sys.executable, "-c", WRITE, str(tmp_path / "d")])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    text = out.decode(errors="replace")
    assert "writing" in text and "rows" in text and "100%" in text, text
