#!/usr/bin/env bash
# Idempotent set-up for `make run` / `make test`: installs what is missing (Debian/Ubuntu, as
# root), makes .venv able to import the distribution's bcc, installs memtop into it.
# A second run finds everything in place and returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
VENV=${VENV:-.venv}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

pkgs=()
for p in python3-bpfcc bpfcc-tools python3-venv; do
    installed "$p" || pkgs+=("$p")
done

# Every program the tests and `make run` call: tests/programs.txt, the same list the test suite
# checks before its first test. A program found on PATH (or a file that exists) needs nothing.
want_bpftool=0
while read -r prog pkg _; do
    case "$prog" in ''|'#'*) continue ;; esac
    if [ "${prog#/}" != "$prog" ]; then [ -e "$prog" ] && continue
    else command -v "$prog" >/dev/null 2>&1 && continue
    fi
    if [ "$pkg" = bpftool ]; then want_bpftool=1; continue; fi  # its package differs: below
    case " ${pkgs[*]} " in *" $pkg "*) ;; *) pkgs+=("$pkg") ;; esac
done < tests/programs.txt

# Kernel headers: exact ones for the running kernel when the distribution has them, else the
# generic package as a stand-in (memtop builds the merged tree itself at run time).
release=$(uname -r)
if [ ! -e "/lib/modules/$release/build" ] && ! compgen -G "/usr/src/linux-headers-*" >/dev/null; then
    want_headers=1
else
    want_headers=0
fi

if [ ${#pkgs[@]} -gt 0 ] || [ "$want_headers" = 1 ] || [ "$want_bpftool" = 1 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: missing packages: ${pkgs[*]:-} (kernel headers: $want_headers, bpftool: $want_bpftool); run 'make setup' as root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt=(apt-get -o DPkg::Lock::Timeout=300)  # another apt run holds the lock: wait for it
    "${apt[@]}" update -qq
    if [ "$want_bpftool" = 1 ]; then
        # Debian has a bpftool package; Ubuntu ships it in linux-tools (a wrapper in -common that
        # runs the one built for the running kernel, from linux-tools-RELEASE).
        if ! grep -q '^ID=ubuntu' /etc/os-release 2>/dev/null \
            || apt-cache policy bpftool 2>/dev/null | grep -q 'Candidate: [0-9]'; then
            pkgs+=(bpftool)
        elif apt-cache policy "linux-tools-$release" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
            pkgs+=(linux-tools-common "linux-tools-$release")
        else
            pkgs+=(linux-tools-common linux-tools-generic)
        fi
    fi
    if [ "$want_headers" = 1 ]; then
        if apt-cache policy "linux-headers-$release" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
            pkgs+=("linux-headers-$release")
        elif grep -q '^ID=ubuntu' /etc/os-release 2>/dev/null; then
            pkgs+=(linux-headers-generic)
        else
            pkgs+=("linux-headers-$(dpkg --print-architecture)")
        fi
    fi
    echo "setup: installing ${pkgs[*]}"
    "${apt[@]}" install -y -qq "${pkgs[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV (sees the distribution's bcc through --system-site-packages)"
    "$SYS_PYTHON" -m venv --system-site-packages "$VENV"
fi

stamp="$VENV/.memtop-installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "setup: installing memtop into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]' 2> >(grep -v "^WARNING: Location" >&2)
    rm -f "$VENV"/.memtop-installed-*
    touch "$stamp"
fi

bpftool version >/dev/null 2>&1 || {
    echo "setup: bpftool does not run here (Ubuntu: it needs linux-tools-$release); the tests call it" >&2
    exit 1
}

"$VENV/bin/python" -c 'import bcc' 2>/dev/null || {
    echo "setup: warning: bcc is not importable from $VENV; memtop will run its /proc view" >&2
}

# memtop's modules as bytecode, compiled here once: Python writes none at import when
# PYTHONDONTWRITEBYTECODE is set (it is on this project's machines), and compiling all of them
# on every start delayed the first frame (docs/performance.md). Quick when nothing changed.
"$VENV/bin/python" -m compileall -q memtop >/dev/null || true
