"""Every parser of outside input (control-file values, /proc/<pid>/maps, /proc/<pid>/stat and
status, /proc/kallsyms, folded files given to `aperture render` and the views after them, the
JVM agent's replies, sync batches, Pyroscope push RPC bodies) fuzzed briefly under ASan and
UBSan: any bytes must parse or fail cleanly. tests/fuzz/run SECONDS runs them longer."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_parsers_survive_fuzzing():
    r = subprocess.run([os.path.join(ROOT, "tests", "fuzz", "run"), "8"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-4000:]
