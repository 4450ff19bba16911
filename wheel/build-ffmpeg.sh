#!/usr/bin/env bash
# The release wheel's FFmpeg: a minimal static FFmpeg (libavcodec,
# libavformat, libavutil, libswscale) with libx264, SVT-AV1, dav1d and zlib,
# compiled for glibc 2.28, which `./dev wheel` links into the extension
# (docs/guide/install.md). Run by `./dev wheel`; by hand:
#
#   wheel/build-ffmpeg.sh     builds it, or says it is up to date
#
# Why each choice:
#
# - Static and minimal. The wheel used to bundle Debian 12's shared FFmpeg
#   and all it links (126 libraries: X11, GLib, cairo, ICU, TLS, audio
#   codecs), which set its glibc floor at 2.35 and its size at 127 MB.
#   Configured with only what src/video uses (the lists below), linked into
#   the extension, FFmpeg adds about 25 MB and no library to the wheel.
# - glibc 2.28 (manylinux_2_28: RHEL 8 and its rebuilds, Debian 10): every
#   object is compiled by zig (PyPI's `ziglang`, pinned in
#   wheel/requirements.txt, from the wheel tools' virtual environment) for
#   x86_64-linux-gnu.2.28, whose glibc headers and stubs are 2.28's, so no
#   object can bind a newer symbol. No container or older root is needed;
#   the `verify` step links every object of every archive against those
#   stubs and fails on any symbol version above 2.28.
# - Sources: Debian 12's (bookworm) source packages ffmpeg, x264, svt-av1,
#   dav1d and zlib, by `apt-get source` through an apt configuration of the
#   script's own (deb-src lines, lists and cache in the build root), so the
#   system's apt setup is untouched and nothing comes from outside Debian's
#   archive. FFmpeg 5.1 is the version the rest of the project builds and
#   tests against (Debian 12's system FFmpeg). The versions used are written
#   to the prefix (source-versions.txt), with each package's debian/copyright.
# - Encoders: libx264 and libsvtav1 (the segments layout's H.264 and AV1);
#   decoders: FFmpeg's own for the video codecs the demuxers carry, and
#   libdav1d for AV1. x264 needs --enable-gpl: this FFmpeg build is
#   GPL-2.0-or-later (docs/guide/install.md, Licences).
# - Position-independent code (-fPIC) throughout: the archives end up in a
#   shared object, the Python extension.
# - Out of the checkout: sources, build trees and the prefix live in
#   $SHARDSET_FFMPEG_ROOT (default ~/.cache/shardset/ffmpeg-2.28). A stamp
#   in the prefix holds this script's hash and zig's version: while both
#   match, the build (about 8 minutes on 2 cores) is skipped. The sources
#   and build trees are removed after a build; the prefix (about 25 MB of
#   archives) is kept.
#
# Needs: nasm, meson, ninja, cmake, dpkg-source (dpkg-dev), make, binutils
# (nm, strings, objdump), pkg-config and Debian's archive keyring, which
# `./dev wheel` installs when missing, and the wheel tools' virtual
# environment with ziglang ($SHARDSET_WHEEL_VENV).
#
# After it, link the prefix's libraries as the wheel does: ffmpeg-sys-next's
# `static` feature (shardset's `ffmpeg-static`), FFMPEG_DIR unset and
# PKG_CONFIG_LIBDIR=$PREFIX/lib/pkgconfig (its pkg-config route takes x264,
# SVT-AV1, dav1d and zlib from the .pc files, in link order; with FFMPEG_DIR
# it links the av* archives alone), and the final link by zig for glibc
# 2.28 (`maturin build --zig --compatibility manylinux_2_28`).
set -euo pipefail

ROOT="${SHARDSET_FFMPEG_ROOT:-$HOME/.cache/shardset/ffmpeg-2.28}"
WHEEL_VENV="${SHARDSET_WHEEL_VENV:-$HOME/.cache/shardset/wheel-venv}"
PREFIX=$ROOT/prefix
SRC=$ROOT/src
BUILD=$ROOT/build
LOGS=$ROOT/logs
BIN=$ROOT/bin
JOBS=${JOBS:-$(nproc)}
GLIBC=2.28
TARGET=x86_64-linux-gnu.$GLIBC
MIRROR="${SHARDSET_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${SHARDSET_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

say() { echo "build-ffmpeg: $*" >&2; }

# What shardset uses (src/video): the demuxers of decode.rs's DEMUXERS
# (matroska is also "webm", mpegps is "mpeg"; nothing that opens other
# files: no image2, concat, hls), decoders of the video codecs those carry
# and libdav1d for AV1, libx264 and libsvtav1 to encode segments (raw
# elementary streams: no muxer), swscale; the file protocol alone.
FF_DEMUXERS=mov,matroska,avi,mpegts,mpegps,flv,ivf,h264,hevc,m4v,mpegvideo,obu,ogg,asf,gif,nut,yuv4mpegpipe
FF_DECODERS=h264,hevc,vp8,vp9,libdav1d,mpeg4,msmpeg4v1,msmpeg4v2,msmpeg4v3,h263,h263p,flv,mpeg1video,mpeg2video,mjpeg,gif,rawvideo,theora,vc1,wmv1,wmv2,wmv3,prores,ffv1,png
FF_PARSERS=h264,hevc,vp8,vp9,av1,mpeg4video,mpegvideo,mjpeg,vc1,h263,png,gif
FF_ENCODERS=libx264,libsvtav1

for t in nasm meson ninja cmake dpkg-source make nm strings objdump pkg-config apt-get; do
  command -v "$t" >/dev/null || { say "$t is missing (./dev wheel installs it)"; exit 1; }
done
[ -f "$KEYRING" ] || { say "$KEYRING is missing (debian-archive-keyring)"; exit 1; }
ZIG=$("$WHEEL_VENV/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' 2>/dev/null) \
  || { say "no ziglang in $WHEEL_VENV (./dev wheel installs wheel/requirements.txt there)"; exit 1; }
ZIG_VERSION=$("$ZIG" version)

STAMP="$PREFIX/.shardset-stamp"
WANT="$(sha256sum "$0" | cut -d' ' -f1) zig $ZIG_VERSION"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -f "$PREFIX/lib/pkgconfig/libavcodec.pc" ]; then
  say "up to date in $PREFIX (this script and zig $ZIG_VERSION unchanged)"
  exit 0
fi

rm -rf "$PREFIX" "$SRC" "$BUILD" "$LOGS"
mkdir -p "$PREFIX" "$SRC" "$BUILD" "$LOGS" "$BIN"
# zig's caches (its glibc 2.28 stubs, compiler-rt) stay in the build root.
export ZIG_GLOBAL_CACHE_DIR=$ROOT/zig-cache ZIG_LOCAL_CACHE_DIR=$ROOT/zig-cache
# Only our own .pc files: never the system's FFmpeg.
export PKG_CONFIG_LIBDIR=$PREFIX/lib/pkgconfig PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
export PATH="$BIN:$PATH"
unset CC CXX AR RANLIB CFLAGS CXXFLAGS LDFLAGS CPPFLAGS

COMMON_CFLAGS="-O2 -fPIC"

# One source tree per Debian source package, as `apt-get source` unpacked it.
srcdir() {
  local d
  d=$(find "$SRC" -maxdepth 1 -mindepth 1 -type d -name "$1-*" | sort | tail -1)
  [ -n "$d" ] || { say "no source tree for $1 in $SRC"; exit 1; }
  echo "$d"
}

# zcc, zcxx, zar, zranlib: wrappers that run zig's binary directly (no
# Python start-up per configure test) for the 2.28 target.
#  -fno-sanitize=all: zig cc turns UBSan traps on when no -O is given (as in
#   configure tests); keep them off.
#  -g0: zig cc emits DWARF by default (FFmpeg's --disable-debug only leaves
#   out its own -g): libavcodec.a was 38 MB with it, ~85% debug sections.
#  stdin (`-`) through a temporary file: zig cc cannot compile stdin with a
#   .2.28 target ("version '.2.28' in target triple ... is invalid", as
#   meson's `cc -E -dM -` shows).
#  -dumpmachine answered here: configure scripts ask for the triple, which
#   zig would print with its .2.28.
#  -Wl,--version answered as LLD: meson 1.0 does not know "zig ld".
write_wrappers() {
  local lang mode ext name
  for lang in cc:c:zcc c++:cpp:zcxx; do
    IFS=: read -r mode ext name <<<"$lang"
    cat >"$BIN/$name" <<EOF
#!/bin/bash
export ZIG_GLOBAL_CACHE_DIR="\${ZIG_GLOBAL_CACHE_DIR:-$ROOT/zig-cache}" ZIG_LOCAL_CACHE_DIR="\${ZIG_LOCAL_CACHE_DIR:-$ROOT/zig-cache}"
case "\$*" in
  -dumpmachine) echo x86_64-linux-gnu; exit 0 ;;
  -Wl,--version|*" -Wl,--version") echo "LLD 21.0.0 (compatible with GNU linkers)"; exit 0 ;;
esac
args=(); tmp=; prev=
for a in "\$@"; do
  if [ "\$a" = - ] && [ "\$prev" != -o ]; then
    tmp=\$(mktemp --suffix=.$ext); cat >"\$tmp"; args+=("\$tmp")
  else args+=("\$a"); fi
  prev=\$a
done
"$ZIG" $mode -target $TARGET -fno-sanitize=all -g0 "\${args[@]}"; rc=\$?
[ -z "\$tmp" ] || rm -f "\$tmp"
exit \$rc
EOF
  done
  printf '#!/bin/sh\nexec "%s" ar "$@"\n' "$ZIG" >"$BIN/zar"
  printf '#!/bin/sh\nexec "%s" ranlib "$@"\n' "$ZIG" >"$BIN/zranlib"
  chmod +x "$BIN/zcc" "$BIN/zcxx" "$BIN/zar" "$BIN/zranlib"
  printf 'int main(void){return 0;}\n' >"$BUILD/zcc-test.c"
  zcc -O2 "$BUILD/zcc-test.c" -o "$BUILD/zcc-test" && "$BUILD/zcc-test"
}

step_sources() {
  local apt=$ROOT/apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/sources.list.d" "$apt/etc/preferences.d"
  cat >"$apt/etc/sources.list" <<EOF
deb-src [signed-by=$KEYRING] $MIRROR bookworm main
deb-src [signed-by=$KEYRING] $MIRROR bookworm-updates main
deb-src [signed-by=$KEYRING] $SECURITY_MIRROR bookworm-security main
EOF
  # APT::Sandbox::User: the lists and the download dir are under $HOME,
  # which apt's _apt user may not enter.
  local opts=(-o "Dir::Etc::SourceList=$apt/etc/sources.list" -o "Dir::Etc::SourceParts=$apt/etc/sources.list.d"
    -o "Dir::Etc::Preferences=$apt/etc/preferences" -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=$(id -un)")
  apt-get "${opts[@]}" update -qq
  cd "$SRC"
  apt-get "${opts[@]}" source -qq ffmpeg x264 svt-av1 dav1d zlib 2>&1 | grep -v '^dpkg-source: info' || true
  local dsc p
  mkdir -p "$PREFIX/share/copyright"
  for dsc in "$SRC"/*.dsc; do
    p=$(basename "$dsc" .dsc)
    echo "$p" >>"$PREFIX/source-versions.txt"
    cp "$(srcdir "${p%%_*}")/debian/copyright" "$PREFIX/share/copyright/$p"
  done
  [ "$(wc -l <"$PREFIX/source-versions.txt")" = 5 ] || { say "expected 5 source packages"; exit 1; }
  cat "$PREFIX/source-versions.txt"
}

step_zlib() {
  rm -rf "$BUILD/zlib"; cp -a "$(srcdir zlib)" "$BUILD/zlib"; cd "$BUILD/zlib"
  CC=zcc AR=zar RANLIB=zranlib CFLAGS="$COMMON_CFLAGS" ./configure --static --prefix="$PREFIX" --libdir="$PREFIX/lib"
  make -j"$JOBS" libz.a
  make install
  rm -f "$PREFIX"/lib/libz.so*
}

step_x264() {
  rm -rf "$BUILD/x264"; cp -a "$(srcdir x264)" "$BUILD/x264"; cd "$BUILD/x264"
  # 8-bit only (segments are 8-bit); every chroma format (4:2:0 to 4:4:4).
  CC=zcc AR=zar RANLIB=zranlib STRINGS=strings ./configure --prefix="$PREFIX" --libdir="$PREFIX/lib" \
    --host=x86_64-linux-gnu --enable-static --enable-pic --disable-cli \
    --disable-opencl --disable-avs --disable-swscale --disable-lavf --disable-ffms --disable-gpac --disable-lsmash \
    --bit-depth=8 --chroma-format=all --extra-cflags="-fPIC"
  make -j"$JOBS"
  make install-lib-static
}

step_dav1d() {
  rm -rf "$BUILD/dav1d"
  CC=zcc AR=zar meson setup "$BUILD/dav1d" "$(srcdir dav1d)" --prefix="$PREFIX" --libdir=lib \
    --buildtype=release -Ddefault_library=static -Db_staticpic=true \
    -Denable_tools=false -Denable_tests=false -Denable_examples=false -Dbitdepths=8,16
  ninja -C "$BUILD/dav1d" -j"$JOBS"
  ninja -C "$BUILD/dav1d" install
}

step_svtav1() {
  rm -rf "$BUILD/svtav1"
  # The encoder library only (no apps, no decoder: dav1d decodes).
  # REPRODUCIBLE_BUILDS: zig makes -Wdate-time an error (__DATE__ in EbEncHandle.c).
  cmake -S "$(srcdir svt-av1)" -B "$BUILD/svtav1" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_C_COMPILER="$BIN/zcc" -DCMAKE_CXX_COMPILER="$BIN/zcxx" \
    -DCMAKE_AR="$BIN/zar" -DCMAKE_RANLIB="$BIN/zranlib" \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF \
    -DBUILD_APPS=OFF -DBUILD_DEC=OFF -DBUILD_TESTING=OFF -DCOVERAGE=OFF \
    -DREPRODUCIBLE_BUILDS=ON
  ninja -C "$BUILD/svtav1" -j"$JOBS"
  ninja -C "$BUILD/svtav1" install
}

step_ffmpeg() {
  rm -rf "$BUILD/ffmpeg"; mkdir -p "$BUILD/ffmpeg"; cd "$BUILD/ffmpeg"
  "$(srcdir ffmpeg)/configure" --prefix="$PREFIX" --libdir="$PREFIX/lib" \
    --cc="$BIN/zcc" --cxx="$BIN/zcxx" --ar="$BIN/zar" --ranlib="$BIN/zranlib" --nm=nm \
    --pkg-config=pkg-config --pkg-config-flags=--static \
    --extra-cflags="-I$PREFIX/include" --extra-ldflags="-L$PREFIX/lib" \
    --enable-static --disable-shared --enable-pic --disable-debug --disable-doc --disable-programs \
    --enable-gpl \
    --disable-autodetect --disable-iconv --enable-zlib --enable-pthreads \
    --disable-avdevice --disable-avfilter --disable-swresample --disable-postproc --disable-network \
    --disable-everything \
    --enable-protocol=file \
    --enable-demuxer="$FF_DEMUXERS" --enable-decoder="$FF_DECODERS" --enable-parser="$FF_PARSERS" \
    --enable-encoder="$FF_ENCODERS" \
    --enable-libx264 --enable-libsvtav1 --enable-libdav1d
  # zig's glibc 2.28 stubs still have sysctl() (gone from glibc 2.32 for new
  # links) but its headers, a newer glibc's, have no <sys/sysctl.h>:
  # configure's link test finds the function and libavutil/cpu.c then fails
  # to include the header. FFmpeg uses sysctl on BSD and macOS only.
  sed -i 's/^#define HAVE_SYSCTL 1$/#define HAVE_SYSCTL 0/' config.h
  make -j"$JOBS"
  make install
  # configure tries -latomic first and zig accepts it (a no-op: zig's
  # compiler-rt has the atomics); x86-64 needs no libatomic, and a .pc with
  # -latomic would make another linker pull libatomic.so.1 in.
  sed -i 's/ -latomic//g' "$PREFIX"/lib/pkgconfig/lib*.pc
  grep -H '^Libs' "$PREFIX"/lib/pkgconfig/lib*.pc
}

# The glibc floor: every object of every archive linked whole into a shared
# object against zig's glibc 2.28 stubs with -z defs (an undefined symbol
# fails the link), then the symbol versions it binds. The version script
# keeps FFmpeg's symbols local as a Rust cdylib's does (without it LLD
# refuses FFmpeg's assembly in a shared object: its symbols would be
# preemptible).
step_verify() {
  cd "$BUILD"
  printf 'int shardset_probe(void){return 0;}\n' >probe.c
  printf '{ global: shardset_probe; local: *; };\n' >probe.map
  zcc -shared -fPIC -o probe-whole.so probe.c -Wl,--version-script=probe.map -Wl,-z,defs -L"$PREFIX/lib" \
    -Wl,--whole-archive -lavformat -lavcodec -lswscale -lavutil -lx264 -lSvtAv1Enc -ldav1d -lz -Wl,--no-whole-archive \
    -lm -lpthread -ldl
  local versions
  versions=$(objdump -T probe-whole.so | grep -o 'GLIBC_[0-9.]*' | sort -uV)
  echo "glibc versions the archives need:" $versions
  if objdump -T probe-whole.so | grep -E 'GLIBC_2\.(29|[3-9][0-9])'; then
    say "symbols newer than GLIBC_$GLIBC (above)"
    exit 1
  fi
  ls -l "$PREFIX"/lib/*.a
}

start=$SECONDS
say "building a static FFmpeg for glibc $GLIBC with zig $ZIG_VERSION in $ROOT (about 8 minutes on 2 cores)"
for step in wrappers sources zlib x264 dav1d svtav1 ffmpeg verify; do
  t0=$SECONDS
  fn=step_$step; [ "$step" = wrappers ] && fn=write_wrappers
  # (not inside `if`: errexit would be off in the step)
  set +e; ( set -e; "$fn" ) >"$LOGS/$step.log" 2>&1; rc=$?; set -e
  if [ $rc -ne 0 ]; then
    tail -n 30 "$LOGS/$step.log" >&2
    say "step $step failed after $((SECONDS - t0)) s (above; all of it in $LOGS/$step.log)"
    exit 1
  fi
  say "$step: $((SECONDS - t0)) s"
done
grep -h '^glibc versions' "$LOGS/verify.log" >&2
rm -rf "$SRC" "$BUILD" "$ROOT/apt"
echo "$WANT" >"$STAMP"
say "done in $((SECONDS - start)) s: $(du -sh "$PREFIX/lib" | cut -f1) of archives in $PREFIX/lib"
