"""The suite's one marker, registered where every run of tests/ (tests/run, the sanitizer
rerun, a single file) finds it."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long, and its subject is not our memory safety: "
        "the plain run checks it once; the sanitizer rerun skips it (tests/test_sanitizers.py "
        "says which tests and why). `tests/run -m \"not slow\"` runs the fast set.")


def pytest_collection_modifyitems(session, config, items):
    """The sanitizer rerun last: tests/run builds build-asan/ meanwhile, beside the plain run."""
    items.sort(key=lambda item: item.path.name == "test_sanitizers.py")
