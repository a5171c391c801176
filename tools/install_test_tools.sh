#!/bin/sh
# The system tools the tests use beyond gcc: clang with its UBSan runtime, the ARM cross toolchain
# with newlib, and QEMU for Cortex-M (tests/export/c); QEMU user mode (qemu-x86_64 -cpu Haswell runs
# onnxruntime as an AVX2 CPU without VNNI computes: tests/export/test_ort_u8s8.py; qemu-aarch64 runs the
# native paths' ARM64 build) and the ARM64 cross compiler with its C library (the native NEON / SDOT
# paths, tests/runtime/test_native_arm64.py). Installed with apt-get when
# missing and the user is root (Debian/Ubuntu); otherwise, or when apt-get fails or times out, a loud
# warning and exit 0 (best effort: the tests that need a missing tool skip, saying which).
#
#   tools/install_test_tools.sh [--required]     (--required: fail instead of warning; make mcu-toolchain)
#
# `make test` runs it first (best effort), `make mcu-toolchain` / `make test-mcu` with --required.
#
# INTQ_NO_APT=1 skips the installation. INTQ_APT_TIMEOUT (seconds, default 300) bounds each apt-get.
# Measured on Debian 12 (2 cores): 153 MB to download (3 s here), about 60-80 s to unpack and configure.

required=0
[ "$1" = "--required" ] && required=1
timeout_s="${INTQ_APT_TIMEOUT:-300}"

missing=""
have() { command -v "$1" >/dev/null 2>&1; }
# clang and the UBSan runtime it links (Debian: libclang-rt-<version>-dev)
if ! have clang; then
    missing="$missing clang libclang-rt-14-dev"
else
    probe=$(mktemp -d)
    printf 'int main(void) { return 0; }\n' > "$probe/p.c"
    if ! clang -fsanitize=undefined -o "$probe/p" "$probe/p.c" >/dev/null 2>&1; then
        v=$(clang -dumpversion 2>/dev/null | cut -d. -f1)
        missing="$missing libclang-rt-${v:-14}-dev"
    fi
    rm -rf "$probe"
fi
have arm-none-eabi-gcc || missing="$missing gcc-arm-none-eabi"
[ -e /usr/lib/arm-none-eabi/newlib/libc.a ] || missing="$missing libnewlib-arm-none-eabi"
have qemu-system-arm || missing="$missing qemu-system-arm"
have qemu-x86_64 && have qemu-aarch64 || missing="$missing qemu-user"
have aarch64-linux-gnu-gcc || missing="$missing gcc-aarch64-linux-gnu"
[ -e /usr/aarch64-linux-gnu/lib/libc.so ] || missing="$missing libc6-dev-arm64-cross"
# headless Chromium: renders the HTML report in tests/analysis/test_html_report.py (Debian 12: ~100 MB)
have chromium-headless-shell || have chromium || missing="$missing chromium-headless-shell"

if [ -z "$missing" ]; then
    echo "test tools present: clang (+UBSan), arm-none-eabi-gcc + newlib, qemu-system-arm, qemu-user, aarch64-linux-gnu-gcc + libc, headless Chromium"
    exit 0
fi

warn() {
    echo "" >&2
    echo "##########################################################################" >&2
    echo "## WARNING: $1" >&2
    echo "## missing:$missing" >&2
    echo "## The C backend's clang / UBSan / Cortex-M tests, the live QEMU tests and the ARM64 native paths' tests will be SKIPPED (pytest -rs says why)." >&2
    echo "##########################################################################" >&2
    echo "" >&2
    [ $required -eq 1 ] && exit 1
    exit 0
}

[ "${INTQ_NO_APT:-0}" = "1" ] && warn "INTQ_NO_APT=1: not installing"
[ "$(id -u)" = "0" ] || warn "not root: cannot apt-get install (run as root, or install them yourself)"
have apt-get || warn "no apt-get on this system: install the packages with your package manager"

start=$(date +%s)
echo "installing the C backend's test tools with apt-get:$missing (timeout ${timeout_s}s each step)"
timeout "$timeout_s" apt-get update -q >/dev/null || warn "apt-get update failed or timed out"
install() { DEBIAN_FRONTEND=noninteractive timeout "$timeout_s" apt-get install -y -q --no-install-recommends "$@" >/dev/null; }
if ! install $missing; then
    # one unknown name (another distribution's clang runtime package) must not cost the others
    failed=""
    for p in $missing; do install "$p" || failed="$failed $p"; done
    [ -n "$failed" ] && missing="$failed" && warn "apt-get install failed or timed out for some packages"
fi
echo "installed in $(( $(date +%s) - start )) s:$missing"
