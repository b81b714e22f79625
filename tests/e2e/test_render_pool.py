"""A slow render must not stall the rest of the tree: views render in a pool, off the FUSE
worker threads. The daemon's test hook makes every view render take 3 s; 12 readers of a
view then hold more threads than libfuse has workers (10), so without the pool `cat enable`
would wait about 3 s for a free worker."""
import subprocess
import time

from helpers import parse_folded, read, write

DELAY_S = 3
DAEMON_ENV = {"APERTURE_TEST_RENDER_DELAY_MS": str(DELAY_S * 1000)}
READERS = 12


def test_slow_render_does_not_stall_enable(daemon, workloads):
    busy = workloads.start("cpu_split").pid
    other = workloads.start("/bin/sleep", 60).pid
    write(daemon.target(busy) / "enable", "1")
    daemon.wait_samples(busy, 50)
    write(daemon.target(busy) / "enable", "0")

    readers = [subprocess.Popen(["cat", str(daemon.target(busy) / "cpu.folded")],
                                stdout=subprocess.PIPE) for _ in range(READERS)]
    try:
        time.sleep(0.5)  # every reader is now inside its open(), waiting on a render
        assert all(r.poll() is None for r in readers), "a render was not slow"
        start = time.monotonic()
        assert read(daemon.target(other) / "enable") == "0\n"
        took = time.monotonic() - start
        # Without the pool it takes ~2.5 s (tried); 1 s leaves room for a loaded machine.
        assert took < 1, f"`cat enable` took {took:.2f} s behind slow renders"
        outputs = [r.communicate(timeout=READERS * DELAY_S + 10)[0] for r in readers]
    finally:
        for r in readers:
            r.kill()
            r.wait()
    assert all(r.returncode == 0 for r in readers)
    for out in outputs:
        stacks = parse_folded(out.decode())
        assert stacks and all(f[0] == "cpu_split" for f in stacks)
