"""The unit tests and the whole end-to-end suite again, against a build with AddressSanitizer
(leaks included) and UndefinedBehaviorSanitizer: a race between FUSE threads or a leak that
the plain run survives shows up here. Builds into build-asan/ first (tests/run does not)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASAN_BUILD = ROOT / "build-asan"
# Tests whose subject is a server or tool of someone else's (ClickHouse, Chromium, Prometheus,
# podman, the Kubernetes schema): the plain run checks them; what they drive of ours (ingest,
# queries, the tree) is driven under the sanitizers by the fleet tests that stay.
NOT_UNDER_ASAN = ("test_clickhouse.py", "test_web.py", "test_metrics.py", "test_pyroscope.py",
                  "test_containers.py", "test_manifests.py")


def sh(*cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


def test_everything_under_asan_and_ubsan(tmp_path):
    if not (ASAN_BUILD / "build.ninja").exists():
        r = sh("meson", "setup", str(ASAN_BUILD), "-Db_sanitize=address,undefined")
        assert r.returncode == 0, r.stdout[-3000:]
    r = sh("ninja", "-C", str(ASAN_BUILD))
    assert r.returncode == 0, r.stdout[-3000:]

    logs = tmp_path / "san"
    env = dict(os.environ, APERTURE_BUILD=str(ASAN_BUILD),
               ASAN_OPTIONS=f"detect_leaks=1:log_path={logs}/asan",
               UBSAN_OPTIONS=f"print_stacktrace=1:halt_on_error=1:log_path={logs}/ubsan")
    logs.mkdir()
    ignore = [f"--ignore=tests/e2e/{name}" for name in NOT_UNDER_ASAN]
    r = sh(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "tests/test_unit.py", "tests/e2e", *ignore, env=env, timeout=1800)
    reports = "".join(p.read_text()[:4000] for p in sorted(logs.iterdir()))
    assert not reports, f"sanitizer reports:\n{reports}"
    assert r.returncode == 0, r.stdout[-6000:]
