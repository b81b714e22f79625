#!/bin/bash
# Sets up a fresh Debian 12 machine (as root) to build, run and test aperture: installs the
# build and test dependencies from Debian's archive and builds into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "setup.sh: run as root (it installs packages; aperture itself needs root)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
	build-essential meson ninja-build pkg-config clang llvm libclang-rt-14-dev bpftool \
	libbpf-dev libfuse3-dev fuse3 libdw-dev libelf-dev libcjson-dev uthash-dev zlib1g-dev \
	libcmocka-dev linux-libc-dev python3 python3-pytest rsync tar util-linux procps \
	protobuf-c-compiler libprotobuf-c-dev protobuf-compiler python3-protobuf \
	chromium chromium-driver python3-selenium nodejs openjdk-17-jdk-headless \
	libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev libsqlite3-dev sqlite3 curl iproute2 \
	postgresql nginx-light wrk \
	podman buildah runc busybox-static python3-yaml \
	cargo golang-go clickhouse-server
# The tests read cpu.pprof with pprof-format, a decoder independent of our profile.proto.
command -v npm >/dev/null || apt-get install -y -q --no-install-recommends npm
npm install --no-audit --no-fund --prefix /usr/local/lib/aperture-tests pprof-format@2.3.2
# The manifests in deploy/k8s are checked against the Kubernetes API's schema.
npm install --no-audit --no-fund --prefix /usr/local/lib/aperture-tests kubernetes-models@4.5.1 \
	yaml@2
# The demangler (libiberty); a stock Debian binary with its debug package, and glibc's, for
# the tests (they expect glibc's own frames, such as __lll_lock_wait, to be named).
apt-get install -y -q --no-install-recommends libiberty-dev python3.11-dbg libc6-dbg

if [ ! -r /sys/kernel/btf/vmlinux ]; then
	echo "setup.sh: this kernel has no BTF (/sys/kernel/btf/vmlinux); aperture's BPF" \
	     "programs are built against it (or pass -Dvmlinux_h=PATH to meson)" >&2
	exit 1
fi

[ -d build ] || meson setup build
ninja -C build
echo "setup.sh: built $(pwd)/build/aperture"
