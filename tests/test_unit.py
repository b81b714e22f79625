"""Every cmocka binary meson built in build/tests/unit, as one pytest test each."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "e2e"))
from helpers import BUILD  # noqa: E402

UNIT = BUILD / "tests" / "unit"
BINARIES = sorted(p for p in UNIT.glob("test_*") if p.is_file() and os.access(p, os.X_OK))


@pytest.mark.parametrize("binary", BINARIES, ids=[p.name for p in BINARIES])
def test_unit(binary):
    r = subprocess.run([binary], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{binary.name} exited {r.returncode}:\n{r.stdout}{r.stderr}"


def test_unit_tests_were_built():
    assert BINARIES, f"no unit test binaries in {UNIT}: is cmocka installed?"
