// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "symbols/kallsyms.h"
#include "symbols/symbols.h"

/* Shaped like /proc/kallsyms: aliases at one address, a data symbol ending text, a module. */
static const char sample[] =
	"0000000000000000 A fixed_percpu_data\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81000000 t __pfx_startup\n"
	"ffffffff81000100 T startup_64\n"
	"ffffffff81000200 t local_fn\n"
	"ffffffff81000200 W weak_alias\n"
	"ffffffff81000300 T __do_thing\n"
	"ffffffff81000300 t do_thing\n"
	"ffffffff81000400 D some_data\n"
	"ffffffff81001000 T after_data\n"
	"ffffffffc0001000 t mod_fn\t[mymod]\n";

/* The name kallsyms_name gives addr, or NULL. */
static const char *name_at(const struct kallsyms *k, uint64_t addr, bool *stale)
{
	static char buf[512];

	return kallsyms_name(k, addr, buf, sizeof(buf), stale) ? NULL : buf;
}

static void test_parse_sample(void **state)
{
	struct kallsyms *k;

	assert_int_equal(kallsyms_parse(sample, strlen(sample), &k), 0);
	/* one name per text address */
	assert_int_equal(kallsyms_count(k), 6);

	assert_null(name_at(k, 0xffffffff80ffffff, NULL));
	assert_string_equal(name_at(k, 0xffffffff81000000, NULL), "_text");
	assert_string_equal(name_at(k, 0xffffffff810000ff, NULL), "_text");
	assert_string_equal(name_at(k, 0xffffffff81000100, NULL), "startup_64");
	assert_string_equal(name_at(k, 0xffffffff81000150, NULL), "startup_64");
	/* weak beats local; fewer leading underscores beat a global binding */
	assert_string_equal(name_at(k, 0xffffffff81000210, NULL), "weak_alias");
	assert_string_equal(name_at(k, 0xffffffff810003ff, NULL), "do_thing");
	/* past the end of text, up to the next text symbol */
	assert_null(name_at(k, 0xffffffff81000400, NULL));
	assert_null(name_at(k, 0xffffffff81000fff, NULL));
	assert_string_equal(name_at(k, 0xffffffff81001000, NULL), "after_data");
	/* the module tag is not part of the name */
	assert_string_equal(name_at(k, 0xffffffffc0001010, NULL), "mod_fn");
	/* nothing ends the last symbol, so it is not stretched without bound */
	assert_null(name_at(k, 0xffffffffc1001000, NULL));
	kallsyms_free(k);
}

/* Answers that code loaded since may have made wrong: in BPF's pages, or in no symbol. */
static void test_stale_answers(void **state)
{
	static const char text[] =
		"ffffffff81000000 T schedule\n"
		"ffffffff81000400 D some_data\n"
		"ffffffffc0001000 t mod_fn\t[mymod]\n"
		"ffffffffc0201000 t bpf_prog_0123456789abcdef_old\t[bpf]\n"
		"ffffffffc0201800 t bpf_prog_fedcba9876543210_other\t[bpf]\n";
	struct kallsyms *k;
	bool stale;

	assert_int_equal(kallsyms_parse(text, strlen(text), &k), 0);
	assert_string_equal(name_at(k, 0xffffffff81000010, &stale), "schedule");
	assert_false(stale);
	assert_string_equal(name_at(k, 0xffffffffc0001010, &stale), "mod_fn");
	assert_false(stale);
	assert_null(name_at(k, 0xffffffff81000410, &stale));
	assert_true(stale);
	assert_string_equal(name_at(k, 0xffffffffc0201100, &stale),
			    "bpf_prog_0123456789abcdef_old");
	assert_true(stale);
	assert_string_equal(name_at(k, 0xffffffffc0201900, &stale),
			    "bpf_prog_fedcba9876543210_other");
	assert_true(stale);
	assert_null(name_at(k, 0xffffffffc1201900, &stale));
	assert_true(stale);
	kallsyms_free(k);
}

static void test_parse_hidden_addresses(void **state)
{
	static const char hidden[] =
		"0000000000000000 T _stext\n"
		"0000000000000000 T schedule\n";
	struct kallsyms *k;

	assert_int_equal(kallsyms_parse(hidden, strlen(hidden), &k), 0);
	assert_int_equal(kallsyms_count(k), 0);
	assert_null(name_at(k, 0, NULL));
	assert_null(name_at(k, 0xffffffff81000000, NULL));
	kallsyms_free(k);
}

/* A __pfx_ symbol right before the function it pads is no entry of its own, yet names its
 * bytes and ends the function before it; one that pads nothing stays itself. */
static void test_padding_symbols_folded(void **state)
{
	static const char text[] =
		"ffffffff81000000 T before\n"
		"ffffffff81000100 t __pfx_padded\n"
		"ffffffff81000110 T padded\n"
		"ffffffff81000200 T __pfx_lonely\n"
		"ffffffff81000300 T other\n";
	struct kallsyms *k;
	char small[8];

	assert_int_equal(kallsyms_parse(text, strlen(text), &k), 0);
	assert_int_equal(kallsyms_count(k), 4);
	assert_string_equal(name_at(k, 0xffffffff810000ff, NULL), "before");
	assert_string_equal(name_at(k, 0xffffffff81000100, NULL), "__pfx_padded");
	assert_string_equal(name_at(k, 0xffffffff8100010f, NULL), "__pfx_padded");
	assert_string_equal(name_at(k, 0xffffffff81000110, NULL), "padded");
	assert_string_equal(name_at(k, 0xffffffff81000210, NULL), "__pfx_lonely");
	assert_string_equal(name_at(k, 0xffffffff81000300, NULL), "other");
	assert_int_equal(kallsyms_name(k, 0xffffffff81000100, small, sizeof(small), NULL),
			 -ENOSPC);
	kallsyms_free(k);
}

static void test_parse_rejects_garbage(void **state)
{
	static const char *const bad[] = {
		"ffffffff81000000\n",
		"ffffffff81000000 T\n",
		"ffffffff81000000 T \n",
		"zzzz T foo\n",
		"11ffffffff81000000 T too_long\n",
		"ffffffff81000000 TT foo\n",
	};
	struct kallsyms *k;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(kallsyms_parse(bad[i], strlen(bad[i]), &k), -EINVAL);
}

/* The address of a symbol as /proc/kallsyms lists it, 0 if absent. */
static uint64_t kallsyms_address(const char *want)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[1024], name[512], type;
	uint64_t addr, found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 " %c %511s", &addr, &type, name) == 3 &&
		    (type == 'T' || type == 't') && !strcmp(name, want)) {
			found = addr;
			break;
		}
	}
	fclose(f);
	return found;
}

static void test_real_kernel(void **state)
{
	uint64_t sched = kallsyms_address("schedule");
	struct symbolizer *s;
	char buf[256];

	if (!sched)
		skip();	/* kallsyms hidden from us: nothing real to check against */
	assert_int_equal(symbolizer_new(&s), 0);
	assert_int_equal(symbolizer_kernel_name(s, sched, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "schedule");
	/* a return address inside schedule */
	assert_int_equal(symbolizer_kernel_name(s, sched + 5, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "schedule");
	/* below the kernel: not covered */
	assert_int_equal(symbolizer_kernel_name(s, 0x1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "[kernel]+0x1000");
	assert_int_equal(symbolizer_kernel_name(s, sched, buf, 8), -ENOSPC);
	assert_int_equal(symbolizer_kernel_name(s, 0x1000, buf, 8), -ENOSPC);
	symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_sample),
		cmocka_unit_test(test_stale_answers),
		cmocka_unit_test(test_parse_hidden_addresses),
		cmocka_unit_test(test_padding_symbols_folded),
		cmocka_unit_test(test_parse_rejects_garbage),
		cmocka_unit_test(test_real_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
