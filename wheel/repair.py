"""`auditwheel repair` for the release wheel, with the X11 and GLib libraries
bundled as well.

The manylinux policies let a wheel take a few libraries from the system
(glibc's, libstdc++, libgcc_s, zlib, expat, and X11's and GLib's), so
`auditwheel repair` leaves those out. Debian's FFmpeg links X11 (VA-API and
VDPAU) and, through librsvg, GLib, and a server or container image with
nothing but Python has neither: the wheel would not import there. This runs
auditwheel itself with those libraries taken out of every policy's list, so
they are copied into the wheel like any other; the platform tag is still
auditwheel's, computed over every library the wheel then holds. glibc's
libraries, libstdc++, libgcc_s, zlib and expat stay the system's (any
machine with CPython has them).

Usage: python repair.py WHEEL -w OUT_DIR  (auditwheel repair's arguments)
"""

import sys

import auditwheel.policy
from auditwheel.main import main

BUNDLED = frozenset({
    "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6",
    "libGL.so.1", "libglib-2.0.so.0", "libgobject-2.0.so.0", "libgthread-2.0.so.0",
})

# The one place auditwheel 6.8 (pinned in requirements.txt) reads a
# policy's library list for glibc; checked so a newer auditwheel that
# reads it elsewhere fails here instead of quietly leaving them out.
_policy_whitelist = getattr(auditwheel.policy, "_fixup_musl_libc_soname", None)
if _policy_whitelist is None:
    sys.exit("repair.py: this auditwheel has no policy._fixup_musl_libc_soname; "
             "use the version wheel/requirements.txt pins")


def _whitelist(*args, **kwargs):
    return frozenset(_policy_whitelist(*args, **kwargs)) - BUNDLED


auditwheel.policy._fixup_musl_libc_soname = _whitelist

if __name__ == "__main__":
    sys.argv[0] = "auditwheel"
    sys.argv.insert(1, "repair")
    sys.exit(main())
