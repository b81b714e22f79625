// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "symbols/procmaps.h"

/* Lines as kernels print them, with the cases that break naive parsers. */
static const char sample_maps[] =
	"55a28836e000-55a28836f000 r-xp 00001000 fe:00 10953006                   /tmp/exp/v\n"
	"55a2a597d000-55a2a599e000 rw-p 00000000 00:00 0                          [heap]\n"
	"7fa1ef127000-7fa1ef12a000 rw-p 00000000 00:00 0 \n"
	"7fa1ef12b000-7fa1ef12c000 rw-p 00000000 00:00 0\n"
	"7fa1ef150000-7fa1ef2a6000 r-xp 00026000 fe:00 332835                     /usr/lib/My Lib/lib c.so.6\n"
	"7fa1ef2a6000-7fa1ef2f9000 r-xp 0017c000 103:02 18446744073709551615      /tmp/gone.so (deleted)\n"
	"7fa1ef31f000-7fa1ef321000 r-xp 00000000 00:00 0                          [vdso]\n"
	"7fa1ef400000-7fa1ef401000 rw-p 00000000 00:00 0                          [anon:jit cache]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

static void test_parse_sample(void **state)
{
	struct procmaps m;

	assert_int_equal(procmaps_parse(sample_maps, strlen(sample_maps), &m), 0);
	assert_int_equal(m.n, 9);

	assert_int_equal(m.maps[0].start, 0x55a28836e000);
	assert_int_equal(m.maps[0].end, 0x55a28836f000);
	assert_string_equal(m.maps[0].perms, "r-xp");
	assert_int_equal(m.maps[0].pgoff, 0x1000);
	assert_int_equal(m.maps[0].dev_major, 0xfe);
	assert_int_equal(m.maps[0].dev_minor, 0);
	assert_int_equal(m.maps[0].inode, 10953006);
	assert_string_equal(m.maps[0].path, "/tmp/exp/v");
	assert_false(m.maps[0].deleted);
	assert_true(procmap_is_exec(&m.maps[0]));
	assert_false(procmap_is_pseudo(&m.maps[0]));

	assert_string_equal(m.maps[1].path, "[heap]");
	assert_true(procmap_is_pseudo(&m.maps[1]));
	assert_false(procmap_is_exec(&m.maps[1]));

	/* Anonymous, with and without the trailing space older kernels print. */
	assert_string_equal(m.maps[2].path, "");
	assert_string_equal(m.maps[3].path, "");
	assert_int_equal(m.maps[3].start, 0x7fa1ef12b000);

	assert_string_equal(m.maps[4].path, "/usr/lib/My Lib/lib c.so.6");
	assert_int_equal(m.maps[4].pgoff, 0x26000);

	assert_string_equal(m.maps[5].path, "/tmp/gone.so");
	assert_true(m.maps[5].deleted);
	assert_int_equal(m.maps[5].dev_major, 0x103);
	assert_int_equal(m.maps[5].dev_minor, 2);
	assert_true(m.maps[5].inode == UINT64_MAX);

	assert_string_equal(m.maps[6].path, "[vdso]");
	assert_true(procmap_is_exec(&m.maps[6]));
	assert_string_equal(m.maps[7].path, "[anon:jit cache]");

	assert_true(m.maps[8].start == 0xffffffffff600000);
	assert_string_equal(m.maps[8].perms, "--xp");
	assert_true(procmap_is_exec(&m.maps[8]));
	procmaps_free(&m);
	assert_null(m.maps);
	assert_int_equal(m.n, 0);
}

static void test_parse_rejects_garbage(void **state)
{
	static const char *const bad[] = {
		"",
		"hello world",
		"1000-2000 r-xp 00000000 fe:00",		/* no inode */
		"1000 r-xp 00000000 fe:00 1 /x",		/* no end */
		"2000-1000 r-xp 00000000 fe:00 1 /x",		/* end before start */
		"1000-2000 r-x 00000000 fe:00 1 /x",		/* short perms */
		"1000-2000 r-xp 00000000 fe00 1 /x",		/* no ':' in dev */
		"1000-2000 r-xp 00000000 fe:00 12x /x",		/* junk after inode */
		"1000-10000000000000000 r-xp 0 0:0 1 /x",	/* overflows 64 bits */
	};
	static const char one_bad[] = "1000-2000 r-xp 0 0:0 1 /x\nbad\n";
	struct procmap pm;
	struct procmaps m;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(procmaps_parse_line(bad[i], strlen(bad[i]), &pm), -EINVAL);
		assert_null(pm.path);
	}
	/* One bad line fails the whole text and leaves nothing behind. */
	assert_int_equal(procmaps_parse(one_bad, strlen(one_bad), &m), -EINVAL);
	assert_null(m.maps);
	assert_int_equal(m.n, 0);
	/* An empty text is zero mappings, as for a zombie. */
	assert_int_equal(procmaps_parse("", 0, &m), 0);
	assert_int_equal(m.n, 0);
	procmaps_free(&m);
}

__attribute__((noinline)) void procmaps_test_marker(void)
{
	__asm__ volatile("" ::: "memory");
}

static const struct procmap *find_addr(const struct procmaps *m, uint64_t addr)
{
	for (size_t i = 0; i < m->n; i++) {
		if (addr >= m->maps[i].start && addr < m->maps[i].end)
			return &m->maps[i];
	}
	return NULL;
}

static void test_read_self(void **state)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const struct procmap *pm;
	struct procmaps m;

	assert_true(len > 0);
	exe[len] = '\0';
	assert_int_equal(procmaps_read(getpid(), &m), 0);
	assert_true(m.n > 5);

	pm = find_addr(&m, (uintptr_t)procmaps_test_marker);
	assert_non_null(pm);
	assert_string_equal(pm->path, exe);
	assert_true(procmap_is_exec(pm));

	pm = find_addr(&m, getauxval(AT_SYSINFO_EHDR));
	assert_non_null(pm);
	assert_string_equal(pm->path, "[vdso]");
	assert_int_equal(pm->start, getauxval(AT_SYSINFO_EHDR));

	pm = find_addr(&m, (uintptr_t)&len);
	assert_non_null(pm);
	assert_string_equal(pm->path, "[stack]");
	procmaps_free(&m);
}

static void test_read_missing_process(void **state)
{
	struct procmaps m;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	/* Reaped a moment ago: pids are handed out in order, so it is not yet reused. */
	assert_int_equal(procmaps_read(pid, &m), -ESRCH);
	assert_null(m.maps);
}

/* Waits up to 5 s for pid's stat state to be state. */
static bool wait_state(pid_t pid, char state)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] && p[2] == state)
			return true;
		usleep(10000);
	}
	return false;
}

static void *sleep_on(void *arg)
{
	pause();
	return NULL;
}

/* main left with pthread_exit while a thread runs on: the leader's own maps are empty, the
 * address space is read through the live thread. */
static void test_read_through_a_live_thread(void **state)
{
	struct procmaps m;
	pid_t reader, pid = fork();
	pthread_t t;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (pthread_create(&t, NULL, sleep_on, NULL))
			_exit(1);
		pthread_exit(NULL);
	}
	assert_true(wait_state(pid, 'Z'));
	assert_int_equal(procmaps_read(pid, &m), 0);
	assert_true(m.n > 5);
	assert_int_not_equal(m.reader, pid);
	assert_int_equal(m.unreadable, 0);
	procmaps_free(&m);
	assert_int_equal(procmaps_reader(pid, &reader), 0);
	assert_int_equal(reader, m.reader);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* Exited, not yet reaped: no thread is left to read through. */
static void test_read_zombie(void **state)
{
	struct procmaps m;
	pid_t reader, pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_true(wait_state(pid, 'Z'));
	assert_int_equal(procmaps_read(pid, &m), -ESRCH);
	assert_int_equal(procmaps_reader(pid, &reader), -ESRCH);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_sample),
		cmocka_unit_test(test_parse_rejects_garbage),
		cmocka_unit_test(test_read_self),
		cmocka_unit_test(test_read_missing_process),
		cmocka_unit_test(test_read_through_a_live_thread),
		cmocka_unit_test(test_read_zombie),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
