"""Progress of long operations the way Python users expect it: a `tqdm`
bar when tqdm is installed and standard error is a terminal, a callable of
the caller's (`progress=`), or nothing (a pipe, a log file, `progress=False`).
The library itself prints nothing; it counts, and this module draws."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Optional, Union

# What `progress=` takes: None (a bar on a terminal when tqdm is there,
# else nothing), False (nothing), True (a bar even off a terminal), or a
# callable told `(done, total)` (total None when unknown). Written with
# `Union`: an alias is evaluated at import, and `X | Y` of types needs
# Python 3.10 where the package supports 3.9.
ProgressLike = Union[bool, Callable[[int, Optional[int]], Any], None]


class Reporter:
    """Told the count done so far (`__call__`), and closed at the end."""

    def __init__(self, progress: ProgressLike, total: int | None, desc: str, unit: str) -> None:
        self._call: Callable[[int, int | None], Any] | None = None
        self._bar: Any = None
        self._total = total
        if callable(progress):
            self._call = progress
        elif progress is True or (progress is None and sys.stderr.isatty()):
            try:
                from tqdm.auto import tqdm  # type: ignore[import-untyped]
            except ImportError:
                return
            self._bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True,
                             file=sys.stderr)

    @property
    def active(self) -> bool:
        return self._call is not None or self._bar is not None

    def __call__(self, done: int) -> None:
        if self._call is not None:
            self._call(int(done), self._total)
        elif self._bar is not None:
            self._bar.update(int(done) - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def total_of(items: object) -> int | None:
    """The number of items when the iterable knows it (`len`), else None."""
    try:
        return len(items)  # type: ignore[arg-type]
    except TypeError:
        return None
