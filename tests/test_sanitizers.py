"""The unit tests and the end-to-end suite again, against a build with AddressSanitizer (leaks
included) and UndefinedBehaviorSanitizer: a race between FUSE threads or a leak that the
plain run survives shows up here. Runs last (tests/conftest.py), after tests/run's build of
build-asan/ beside the plain run, or builds it itself.

What the rerun leaves to the plain run, by what a test drives of our C code:
- modules whose subject is a server or tool of someone else's (ClickHouse, Chromium,
  Prometheus, podman, the Kubernetes schema): NOT_UNDER_ASAN below. What they drive of ours
  (ingest, queries, the tree) the fleet tests that stay drive under the sanitizers.
- tests marked `slow` (tests/conftest.py): long, and every line of ours they run is run here
  by another test, so what they add is the accuracy of someone else's code or a second store
  behind the same node code. A test that is the only one to drive some C code of ours (a
  parser, a collector, a store, a view, a failure path) is never marked slow: it stays here."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASAN_BUILD = ROOT / "build-asan"
NOT_UNDER_ASAN = ("test_clickhouse.py", "test_web.py", "test_metrics.py", "test_pyroscope.py",
                  "test_containers.py", "test_manifests.py")


def sh(*cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


def test_everything_under_asan_and_ubsan(tmp_path, capsys):
    if not (ASAN_BUILD / "build.ninja").exists():
        r = sh("meson", "setup", str(ASAN_BUILD), "-Db_sanitize=address,undefined")
        assert r.returncode == 0, r.stdout[-3000:]
    # After tests/run's own build of it, if that is still running (it holds the lock).
    r = sh("flock", str(ASAN_BUILD / "build.lock"), "ninja", "-C", str(ASAN_BUILD))
    assert r.returncode == 0, r.stdout[-3000:]

    logs = tmp_path / "san"
    env = dict(os.environ, APERTURE_BUILD=str(ASAN_BUILD),
               ASAN_OPTIONS=f"detect_leaks=1:log_path={logs}/asan",
               UBSAN_OPTIONS=f"print_stacktrace=1:halt_on_error=1:log_path={logs}/ubsan")
    logs.mkdir()
    ignore = [f"--ignore=tests/e2e/{name}" for name in NOT_UNDER_ASAN]
    r = sh(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=25",
           "-m", "not slow", "tests/test_unit.py", "tests/e2e", *ignore, env=env, timeout=1800)
    # The rerun's slowest tests and its summary in the outer run's output, whatever the
    # outcome: where the rerun's time goes. Its failures come before them.
    at = r.stdout.find(" slowest ")
    at = r.stdout.rfind("\n", 0, at) + 1 if at >= 0 else len(r.stdout)
    with capsys.disabled():
        print("\n" + r.stdout[at:], flush=True)
    reports = "".join(p.read_text()[:4000] for p in sorted(logs.iterdir()))
    assert not reports, f"sanitizer reports:\n{reports}"
    assert r.returncode == 0, r.stdout[:at][-6000:]
