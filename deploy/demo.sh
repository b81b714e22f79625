#!/bin/bash
# The main job, end to end: mount the tree at /aperture (or $1), profile a demo workload
# with a known call tree for a few seconds, show its profile. The tree stays mounted.
set -euo pipefail
cd "$(dirname "$0")/.."
MNT=${1:-/aperture}
APERTURE=${APERTURE:-./build/aperture}
DEMO=${DEMO:-./build/tests/workloads/cpu_split}

if ! grep -qs " $MNT fuse.aperture " /proc/self/mounts; then
	"$APERTURE" mount "$MNT"
fi
echo "== mounted at $MNT:"
ls "$MNT"

# The demo burns 70 % of its time in main -> a -> b and 30 % in main -> c.
"$DEMO" 8 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
echo 1 > "$MNT/targets/$PID/enable"
echo "== profiling pid $PID for 5 seconds (echo 1 > $MNT/targets/$PID/enable)"
sleep 5

echo "== $MNT/targets/$PID/cpu.folded (flamegraph.pl reads it as is):"
# Heaviest stacks first: the count is the last field.
awk '{print $NF "\t" $0}' "$MNT/targets/$PID/cpu.folded" | sort -rn | cut -f2- | head -n 10
echo
echo "== $MNT/targets/$PID/cpu.top:"
head -n 12 "$MNT/targets/$PID/cpu.top"
echo
echo "== $MNT/targets/$PID/status:"
cat "$MNT/targets/$PID/status"
echo
cp "$MNT/targets/$PID/flame.svg" /tmp/aperture-demo-flame.svg
echo "== the interactive flame graph: /tmp/aperture-demo-flame.svg (open it in a browser)"
cat <<EOT

The tree is at $MNT: cat $MNT/README for every file. Profile any process with
  echo 1 > $MNT/targets/PID/enable
Unmount with: umount $MNT   (or stop the daemon: pkill -TERM -x aperture)
EOT
