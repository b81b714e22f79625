"""The off-CPU tests again with the stacks taken at switch-out, for every wait: the method on
kernels without sched_exit_tp (before Linux 6.16), forced here. Totals, minimums, blocking
events and the user stacks of threads away now must come out the same."""
from test_waits import (COLLECTORS, defaults, test_blocking_worker_event,  # noqa: F401
                        test_deadlock_found_with_threads_locks_and_stacks,
                        test_offcpu_min_us_drops_shorter_waits_in_the_kernel,
                        test_offcpu_sleeps_total_one_second, test_short_waits_walk_no_stacks)

DAEMON_ENV = {"APERTURE_OFFCPU_AT_SWITCH_OUT": "1"}


def test_the_stacks_are_taken_at_switch_out(daemon):
    assert daemon.status()["offcpu_stacks_at"] == "switch-out"
