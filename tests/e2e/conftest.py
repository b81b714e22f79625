"""Fixtures: a mounted daemon per test module, and workloads that never outlive a test."""
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from helpers import APERTURE, WORKLOADS, Daemon, Workloads, mounted


def pytest_configure(config):
    if not APERTURE.exists() or not WORKLOADS.is_dir():
        pytest.exit(f"build first: {APERTURE} or {WORKLOADS} is missing (tests/run does it)")


@pytest.fixture(scope="module")
def scratch():
    """A directory other users can enter (pytest's tmp_path is root-only 0700), for mount
    points the --allow-other tests reach as a non-root user. Removed when nothing is
    mounted in it."""
    base = Path(tempfile.mkdtemp(prefix="aperture-e2e-"))
    os.chmod(base, 0o755)
    yield base
    if not any(mounted(p) for p in base.iterdir()):
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon_mnt(scratch):
    """Where the module's daemon mounts; a module may override it (and daemon_args)."""
    return scratch / "mnt"


@pytest.fixture(scope="module")
def daemon_args():
    return ()


@pytest.fixture(scope="module")
def daemon(scratch, daemon_mnt, daemon_args, request):
    """One daemon for the module's tests (the module's DAEMON_ENV in its environment). Its
    teardown stops it with SIGTERM and asserts that the mount is gone and its BPF programs
    and links are unloaded: every module proves that again."""
    d = Daemon(daemon_mnt, scratch / "daemon.log", getattr(request.module, "DAEMON_ENV", None),
               args=daemon_args)
    d.start()
    # A module whose tests need more than a bare enable's cpu profile says which collectors.
    collectors = getattr(request.module, "COLLECTORS", None)
    if collectors:
        (d.mnt / "config" / "collectors").write_text(collectors)
    yield d
    try:
        assert d.proc.poll() is None, f"daemon died during the module:\n{d.log_text()}"
        d.stop()
    finally:
        d.kill()


@pytest.fixture
def workloads():
    w = Workloads()
    yield w
    w.stop_all()


# Longer than any test takes (the slowest, ~15 s, waits for a few seconds of samples).
TEST_TIMEOUT_S = 90


@pytest.fixture(autouse=True)
def watchdog():
    """A hung daemon would hang its readers for ever (a FUSE request yields only to SIGKILL
    of the reader). Past TEST_TIMEOUT_S, SIGKILL the daemons instead: blocked reads then
    fail with ENOTCONN, the test fails, and teardown clears the stale mount."""
    fired = []

    def fire():
        fired.append(True)
        for d in list(Daemon.live):
            d.proc.kill()
    timer = threading.Timer(TEST_TIMEOUT_S, fire)
    timer.start()
    yield
    timer.cancel()
    assert not fired, f"test ran over {TEST_TIMEOUT_S} s: the daemons were killed"
