#!/bin/bash
# deploy/image.sh [IMAGE]: the daemon's container image, built by buildah FROM scratch from
# this tree's own build (build/, or $APERTURE_BUILD): build/aperture with every shared
# library it links (as ldd resolves them here), the dynamic loader, glibc's DNS modules (the
# aggregator is reached by a Service's name), libgcc_s (glibc loads it for pthread_cancel),
# the CA bundle (https sync) and the JVM agent at
# the path compiled into the binary. No registry and no distribution image: the image holds
# what this machine built and nothing else. Default IMAGE: localhost/aperture:latest.
#
# The same image runs the node daemon (`aperture mount`, the default command) and the
# aggregator (`aperture aggregate`); deploy/k8s/ uses it for both.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${1:-localhost/aperture:latest}
build=$(realpath "${APERTURE_BUILD:-build}")
bin=$build/aperture
agent=$build/collectors/jvm/libaperture-jvm-agent.so
for f in "$bin" "$agent"; do
	[ -e "$f" ] || { echo "image.sh: $f is missing: build first (ninja -C $build)" >&2; exit 1; }
done
command -v buildah >/dev/null || { echo "image.sh: buildah is not installed" >&2; exit 1; }

root=$(mktemp -d)
ctr=
cleanup() {
	rm -rf "$root"
	[ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# A file at the same path in the image (libraries resolved through their symlinks).
put() {
	mkdir -p "$root$(dirname "$1")"
	cp -L "$1" "$root$1"
}
libs_of() {
	ldd "$1" | grep -o '/[^ ]*' | sort -u
}

put "$bin"
put "$agent"
multiarch=$(dirname "$(ldd "$bin" | grep -o '/[^ ]*/libc\.so\.6')")
for lib in $( { libs_of "$bin"; libs_of "$agent";
		for m in "$multiarch"/libnss_dns.so.2 "$multiarch"/libnss_files.so.2 \
			 "$multiarch"/libresolv.so.2 "$multiarch"/libgcc_s.so.1; do
			[ -e "$m" ] && echo "$m"
		done; } | sort -u); do
	put "$lib"
done
mkdir -p "$root/usr/bin" "$root/etc" "$root/tmp" "$root/var/lib/aperture"
ln -s "$bin" "$root/usr/bin/aperture"
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
[ -e /etc/ssl/certs/ca-certificates.crt ] && put /etc/ssl/certs/ca-certificates.crt

ctr=$(buildah from scratch)
buildah copy --quiet "$ctr" "$root" / >/dev/null
buildah config --entrypoint '["/usr/bin/aperture"]' \
	--cmd '["mount", "--foreground", "--allow-other", "/var/lib/aperture/tree"]' \
	--label org.opencontainers.image.title=aperture \
	--label "org.opencontainers.image.version=$("$bin" --version | head -1)" \
	--stop-signal TERM "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
ctr=
echo "image.sh: built $image ($(du -sh "$root" | cut -f1) of files)"
