#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <cmocka.h>
#include "daemon/proc_identity.h"

static void test_stat_odd_comm(void **state)
{
	/* A comm with ") (" and spaces must not shift the fields. */
	const char *text = "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 "
			   "987654 1000 100 18446744073709551615\n";
	struct proc_identity id = {0};

	assert_int_equal(proc_identity_parse_stat(text, &id), 0);
	assert_string_equal(id.comm, "a) (b c");
	assert_int_equal(id.start_time, 987654);
	assert_int_equal(proc_identity_parse_stat("4242 noparen S", &id), -EINVAL);
	assert_int_equal(proc_identity_parse_stat("4242 (x) S 1 2", &id), -EINVAL);
}

static void test_status(void **state)
{
	const char *text = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t100\nNgid:\t0\n"
			   "Pid:\t101\nPPid:\t1\nUid:\t1000\t1001\t1002\t1003\nGid:\t50\t51\t52\t53\n";
	struct proc_identity id = {0};
	pid_t tgid;

	assert_int_equal(proc_identity_parse_status(text, &tgid, &id), 0);
	assert_int_equal(tgid, 100);
	assert_int_equal(id.ruid, 1000);
	assert_int_equal(id.euid, 1001);
	assert_int_equal(id.suid, 1002);
	assert_int_equal(id.rgid, 50);
	assert_int_equal(proc_identity_parse_status("Name:\tx\n", &tgid, &id), -EINVAL);
}

static void test_read_self(void **state)
{
	struct proc_identity a = {0}, b = {0};
	pid_t tgid;

	assert_int_equal(proc_identity_read(getpid(), &a), 0);
	assert_int_equal(a.ruid, getuid());
	assert_string_equal(a.comm, "test_proc_ident"); /* comm is cut at 15 characters */
	assert_int_equal(proc_identity_read(getpid(), &b), 0);
	assert_true(proc_identity_same(&a, &b));
	assert_int_equal(proc_identity_read(0, &a), -ENOENT);
	tgid = 0;
	assert_int_equal(proc_tgid(getpid(), &tgid), 0);
	assert_int_equal(tgid, getpid());
	assert_int_equal(proc_tgid(4194304 + 1, &tgid), -ENOENT);
	assert_int_equal(proc_identity_read(4194304 + 1, &a), -ENOENT);
}

static void *report_tgid(void *arg)
{
	pid_t *tgid = arg;

	if (proc_tgid(gettid(), tgid))
		*tgid = -1;
	return NULL;
}

/* fuse_ctx's pid is a thread id: another thread of a process maps to the process. */
static void test_thread_tgid(void **state)
{
	pthread_t th;
	pid_t tgid = 0;

	assert_int_equal(pthread_create(&th, NULL, report_tgid, &tgid), 0);
	pthread_join(th, NULL);
	assert_int_equal(tgid, getpid());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_odd_comm),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_read_self),
		cmocka_unit_test(test_thread_tgid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
