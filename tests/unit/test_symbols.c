// SPDX-License-Identifier: GPL-2.0
/* Names checked against what the test itself knows to be true: addresses of its own
 * functions, of libc's through the dynamic linker, of the vDSO's from its own symbol table,
 * and file offsets from the program headers the dynamic linker reports. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <gelf.h>
#include <cmocka.h>

#include "symbols/file_cache.h"
#include "symbols/symbols.h"

static char name_buf[4096];

static const char *name_of(struct proc_syms *ps, const void *addr, bool is_return)
{
	int err = proc_syms_name(ps, (uintptr_t)addr, is_return, name_buf, sizeof(name_buf));

	if (err)
		snprintf(name_buf, sizeof(name_buf), "(error %d)", err);
	return name_buf;
}

static int setup(void **state)
{
	struct symbolizer *s;

	if (symbolizer_new(&s))
		return -1;
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	symbolizer_free(*state);
	return 0;
}

__attribute__((noinline)) int symtest_marker(int x)
{
	__asm__ volatile("" : "+r"(x) :: "memory");
	return x * 3 + 1;
}

enum { SYMTEST_INLINED_LINE = __LINE__ + 1 };
static inline __attribute__((always_inline)) int symtest_inlined(int x)
{
	for (int i = 0; i < x; i++)
		__asm__ volatile("" : "+r"(x) :: "memory");
	return x;
}

enum { SYMTEST_INLINER_LINE = __LINE__ + 1 };
__attribute__((noinline)) int symtest_inliner(int x)
{
	return symtest_inlined(x) * 7;
}

static void *libc_symbol(const char *name)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *addr;

	assert_non_null(libc);
	/* Through libc's handle: a sanitizer's interceptor of the same name is not wanted. */
	addr = dlsym(libc, name);
	dlclose(libc);
	assert_non_null(addr);
	return addr;
}

static void test_own_and_libc_functions(void **state)
{
	struct proc_syms *ps;
	void *getpid_addr = libc_symbol("getpid");
	void *libc;

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	assert_string_equal(name_of(ps, symtest_marker, false), "symtest_marker");
	assert_string_equal(name_of(ps, (char *)symtest_marker + 4, false), "symtest_marker");
	assert_string_equal(name_of(ps, libc_symbol("qsort"), false), "qsort");
	assert_string_equal(name_of(ps, (char *)libc_symbol("qsort") + 2, false), "qsort");

	/* getpid has aliases (__getpid, __GI_getpid...): whichever is chosen must be a name the
	 * dynamic linker resolves to the same address, and the one a reader expects. */
	name_of(ps, getpid_addr, false);
	libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	assert_ptr_equal(dlsym(libc, name_buf), getpid_addr);
	dlclose(libc);
	assert_string_equal(name_buf, "getpid");
	proc_syms_free(ps);
}

/* Versions are not part of a name (__libc_start_main@@GLIBC_2.34), and a compat alias
 * (llseek@GLIBC_2.2.5, lseek's address) yields to a default one. */
static void test_versions_and_compat_aliases(void **state)
{
	struct proc_syms *ps;

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	assert_string_equal(name_of(ps, libc_symbol("__libc_start_main"), false),
			    "__libc_start_main");
	assert_string_equal(name_of(ps, libc_symbol("pthread_cond_wait"), false),
			    "pthread_cond_wait");
	assert_string_equal(name_of(ps, libc_symbol("lseek"), false), "lseek");
	proc_syms_free(ps);
}

/* GCC's LTO renames static functions NAME.lto_priv.N, and its IPA passes make other bodies
 * of a function, NAME.isra.N and the like: perf drops the first and keeps the others. */
int symtest_lto(int x) __asm__("symtest_lto.lto_priv.0");
__attribute__((noinline)) int symtest_lto(int x)
{
	return x * 5 + 2;
}

int symtest_isra(int x) __asm__("symtest_isra.isra.0");
__attribute__((noinline)) int symtest_isra(int x)
{
	return x * 7 + 3;
}

static void test_compiler_suffixes(void **state)
{
	struct proc_syms *ps;

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	assert_string_equal(name_of(ps, (void *)symtest_lto, false), "symtest_lto");
	assert_string_equal(name_of(ps, (void *)symtest_isra, false), "symtest_isra.isra.0");
	proc_syms_free(ps);
}

__attribute__((noinline)) int symtest_plt_caller(void)
{
	return getppid() + 1;
}

/* Where symtest_plt_caller's first call or jump (e8/e9 rel32) goes: getppid's PLT stub. */
static const uint8_t *first_call_target(const uint8_t *code)
{
	for (int i = 0; i < 64; i++) {
		int32_t rel;

		if (code[i] != 0xe8 && code[i] != 0xe9)
			continue;
		memcpy(&rel, code + i + 1, sizeof(rel));
		return code + i + 5 + rel;
	}
	return NULL;
}

/* A PLT stub is named after the function it calls, as perf names it. */
static void test_plt_stub(void **state)
{
	const uint8_t *stub = first_call_target((const uint8_t *)symtest_plt_caller);
	struct proc_syms *ps;

	assert_non_null(stub);
	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	assert_string_equal(name_of(ps, stub, false), "getppid@plt");
	assert_string_equal(name_of(ps, stub + 6, false), "getppid@plt");
	proc_syms_free(ps);
}

/* The inlined helper's code lies in symtest_inliner's: some byte of it is both functions,
 * each with the file and line where it is defined, the module and its build id. */
static void test_inlined_frames_and_where(void **state)
{
	struct sym_frames fr;
	struct proc_syms *ps;
	bool seen = false;

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	for (int off = 0; off < 64 && !seen; off++) {
		assert_int_equal(proc_syms_frames(ps, (uintptr_t)symtest_inliner + off, false, &fr),
				 0);
		assert_string_equal(fr.f[0].name, "symtest_inliner");
		assert_non_null(fr.f[0].file);
		assert_non_null(strstr(fr.f[0].file, "test_symbols.c"));
		assert_int_equal(fr.f[0].line, SYMTEST_INLINER_LINE);
		assert_non_null(fr.module);
		assert_non_null(strstr(fr.module, "test_symbols"));
		assert_true(strlen(fr.build_id) >= 16);
		if (fr.n < 2)
			continue;
		assert_int_equal(fr.n, 2);
		assert_string_equal(fr.f[1].name, "symtest_inlined_[i]");
		assert_int_equal(fr.f[1].line, SYMTEST_INLINED_LINE);
		seen = true;
	}
	assert_true(seen);
	proc_syms_free(ps);
}

static jmp_buf escape_jmp;
static void *volatile escape_return;

__attribute__((noinline, noreturn)) void symtest_escape(void)
{
	escape_return = __builtin_return_address(0);
	longjmp(escape_jmp, 1);
}

/* Its last instruction is the call, so the return address is the first byte after it. */
__attribute__((noinline)) void symtest_calls_noreturn(void)
{
	symtest_escape();
}

__attribute__((noinline)) void symtest_after(void)
{
	__asm__ volatile("" ::: "memory");
}

static void test_return_address(void **state)
{
	struct proc_syms *ps;

	if (!setjmp(escape_jmp))
		symtest_calls_noreturn();
	assert_non_null(escape_return);
	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	assert_string_equal(name_of(ps, escape_return, true), "symtest_calls_noreturn");
	/* Without the adjustment the same address is not the caller: the test means something. */
	assert_string_not_equal(name_of(ps, escape_return, false), "symtest_calls_noreturn");
	proc_syms_free(ps);
	symtest_after();
}

/* The vDSO's own dynamic symbol table, read here independently of symbols/. */
static uint64_t vdso_symbol(const char *want)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR), found = 0, load_vaddr = 0;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(uintptr_t)base;
	size_t size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	Elf_Scn *scn = NULL;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)(uintptr_t)base, size);
	assert_non_null(elf);
	for (size_t i = 0; i < eh->e_phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD) {
			load_vaddr = ph.p_vaddr;
			break;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;

			if (gelf_getsym(data, i, &sym) &&
			    !strcmp(elf_strptr(elf, sh.sh_link, sym.st_name), want))
				found = base + sym.st_value - load_vaddr;
		}
	}
	elf_end(elf);
	return found;
}

static void test_vdso(void **state)
{
	uint64_t fn = vdso_symbol("__vdso_clock_gettime");
	struct proc_syms *ps;
	struct timespec ts;

	if (!getauxval(AT_SYSINFO_EHDR))
		skip();
	assert_true(fn != 0);
	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	/* __vdso_clock_gettime and its alias clock_gettime: the plain one is chosen. */
	assert_string_equal(name_of(ps, (void *)(uintptr_t)fn, false), "clock_gettime");
	assert_string_equal(name_of(ps, (void *)(uintptr_t)(fn + 16), true), "clock_gettime");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	proc_syms_free(ps);
}

struct find_offset {
	const char *suffix;
	uintptr_t addr;
	uint64_t offset;
	bool found;
};

static int find_offset_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_offset *fo = arg;
	size_t len = strlen(info->dlpi_name), slen = strlen(fo->suffix);

	if (len < slen || strcmp(info->dlpi_name + len - slen, fo->suffix))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && fo->addr >= start && fo->addr < start + ph->p_filesz) {
			fo->offset = fo->addr - start + ph->p_offset;
			fo->found = true;
			return 1;
		}
	}
	return 0;
}

static void test_stripped_library(void **state)
{
	void *lib = dlopen(SYMBOLS_FIXTURE_LIB, RTLD_NOW);
	struct find_offset fo = { .suffix = "/libsymfixture.so" };
	void *(*hidden_addr)(void);
	void *exported, *hidden;
	struct proc_syms *ps;
	char want[128];

	if (!lib)
		fail_msg("%s: %s (build everything: ninja -C build)", SYMBOLS_FIXTURE_LIB, dlerror());
	exported = dlsym(lib, "symfixture_exported");
	hidden_addr = (void *(*)(void))dlsym(lib, "symfixture_hidden_fn_addr");
	assert_non_null(exported);
	assert_non_null(hidden_addr);
	hidden = hidden_addr();
	fo.addr = (uintptr_t)hidden;
	dl_iterate_phdr(find_offset_cb, &fo);
	assert_true(fo.found);
	snprintf(want, sizeof(want), "libsymfixture.so+0x%" PRIx64, fo.offset);

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	/* .dynsym survives stripping; the static function has no symbol left at all. */
	assert_string_equal(name_of(ps, exported, false), "symfixture_exported");
	assert_string_equal(name_of(ps, hidden, false), want);
	/* A return address is named by its call: the byte before it, as perf does. */
	assert_string_equal(name_of(ps, (char *)hidden + 1, true), want);
	proc_syms_free(ps);
	dlclose(lib);
}

static void test_debuglink_library(void **state)
{
	void *lib = dlopen(SYMBOLS_FIXTURE_DEBUGLINK_LIB, RTLD_NOW);
	void *(*hidden_addr)(void);
	struct proc_syms *ps;
	void *hidden;

	if (!lib)
		fail_msg("%s: %s (build everything: ninja -C build)", SYMBOLS_FIXTURE_DEBUGLINK_LIB,
			 dlerror());
	hidden_addr = (void *(*)(void))dlsym(lib, "symfixture_hidden_fn_addr");
	assert_non_null(hidden_addr);
	hidden = hidden_addr();
	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	/* Only the debug file next to the library knows this static function. */
	assert_string_equal(name_of(ps, hidden, false), "hidden_fn");
	assert_string_equal(name_of(ps, dlsym(lib, "symfixture_exported"), false),
			    "symfixture_exported");
	proc_syms_free(ps);
	dlclose(lib);
}

static void test_anon_unmapped_and_refresh(void **state)
{
	struct proc_syms *ps;
	void *heap = malloc(16);
	size_t page = sysconf(_SC_PAGESIZE);
	char *jit, want[64], small[8];

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	jit = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(jit != MAP_FAILED);
	/* Mapped after the table was read: not known until a refresh. */
	assert_int_equal(proc_syms_name(ps, (uintptr_t)jit, false, want, sizeof(want)), -ENOENT);
	assert_int_equal(proc_syms_refresh(ps), 0);
	snprintf(want, sizeof(want), "[anon]+0x%" PRIxPTR, (uintptr_t)(jit + 8));
	assert_string_equal(name_of(ps, jit + 8, false), want);

	/* Memory that is not executable, or not mapped at all. */
	assert_int_equal(proc_syms_name(ps, (uintptr_t)heap, false, want, sizeof(want)), -ENOENT);
	assert_int_equal(proc_syms_name(ps, 0x1000, false, want, sizeof(want)), -ENOENT);
	assert_int_equal(proc_syms_name(ps, 0, true, want, sizeof(want)), -ENOENT);

	assert_int_equal(proc_syms_name(ps, (uintptr_t)symtest_marker, false, small,
					sizeof(small)), -ENOSPC);
	assert_int_equal(proc_syms_name(ps, (uintptr_t)jit, false, small, sizeof(small)),
			 -ENOSPC);
	proc_syms_free(ps);
	munmap(jit, page);
	free(heap);
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

static void test_names_after_exit(void **state)
{
	struct symbolizer *s = *state;
	struct proc_syms *self, *child_ps;
	size_t files;
	pid_t child;

	assert_int_equal(proc_syms_new(s, getpid(), &self), 0);
	files = symbolizer_cached_files(s);
	assert_true(files >= 3);	/* this binary, libc, the dynamic linker at least */

	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	assert_int_equal(proc_syms_new(s, child, &child_ps), 0);
	/* The child maps the very same files: none is cached twice. */
	assert_int_equal(symbolizer_cached_files(s), files);
	kill_and_reap(child);

	assert_int_equal(proc_syms_refresh(child_ps), -ESRCH);
	assert_int_equal(proc_syms_new(s, child, &(struct proc_syms *){ NULL }), -ESRCH);
	/* The child shared our layout; its files were opened while it lived. */
	assert_string_equal(name_of(child_ps, symtest_marker, false), "symtest_marker");
	assert_string_equal(name_of(child_ps, (char *)libc_symbol("qsort") + 1, true), "qsort");
	proc_syms_free(child_ps);
	proc_syms_free(self);
}

static pid_t spawn_target(const char *path, uint64_t *marker)
{
	int fds[2];
	FILE *out;
	pid_t pid;
	int n;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	out = fdopen(fds[0], "r");
	assert_non_null(out);
	n = fscanf(out, "%" SCNx64, marker);
	fclose(out);
	if (n != 1) {
		kill_and_reap(pid);
		fail_msg("%s printed no address (build everything: ninja -C build)", path);
	}
	return pid;
}

static void check_target(struct symbolizer *s, const char *path)
{
	struct proc_syms *self, *target;
	uint64_t marker;
	size_t files;
	pid_t pid;

	assert_int_equal(proc_syms_new(s, getpid(), &self), 0);
	files = symbolizer_cached_files(s);
	pid = spawn_target(path, &marker);
	assert_int_equal(proc_syms_new(s, pid, &target), 0);
	/* Only the target's own binary is new; its libc is ours. */
	assert_int_equal(symbolizer_cached_files(s), files + 1);
	assert_string_equal(name_of(target, (void *)(uintptr_t)marker, false),
			    "symbols_target_marker");
	kill_and_reap(pid);
	assert_string_equal(name_of(target, (void *)(uintptr_t)(marker + 1), true),
			    "symbols_target_marker");
	proc_syms_free(target);
	proc_syms_free(self);
}

static void test_pie_target(void **state)
{
	check_target(*state, SYMBOLS_TARGET_PIE);
}

static void test_non_pie_target(void **state)
{
	check_target(*state, SYMBOLS_TARGET_NOPIE);
}

static int open_or_fail(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		fail_msg("%s: %s", path, strerror(errno));
	return fd;
}

/* Files nothing uses stay cached up to the bound, least recently released go first. */
static void test_file_cache_refs_and_idle_bound(void **state)
{
	struct cached_file *exe, *libc, *again;
	struct file_cache *c;
	Dl_info info;

	assert_true(dladdr(libc_symbol("qsort"), &info));
	assert_int_equal(file_cache_new(1, &c), 0);
	assert_int_equal(file_cache_get(c, open_or_fail("/proc/self/exe"), "exe", &exe), 0);
	assert_int_equal(file_cache_get(c, open_or_fail(info.dli_fname), "libc", &libc), 0);
	assert_int_equal(file_cache_count(c), 2);
	/* Same file again: a reference to the cached one, not a second parse. */
	assert_int_equal(file_cache_get(c, open_or_fail("/proc/self/exe"), "exe", &again), 0);
	assert_ptr_equal(again, exe);
	assert_int_equal(file_cache_count(c), 2);
	file_cache_put(c, again);

	file_cache_put(c, exe);		/* idle: 1, within the bound */
	assert_int_equal(file_cache_count(c), 2);
	assert_int_equal(file_cache_get(c, open_or_fail("/proc/self/exe"), "exe", &again), 0);
	assert_ptr_equal(again, exe);	/* revived from the idle list */
	file_cache_put(c, again);
	file_cache_put(c, libc);	/* idle: 2, over the bound: exe goes */
	assert_int_equal(file_cache_count(c), 1);
	assert_int_equal(file_cache_get(c, open_or_fail(info.dli_fname), "libc", &again), 0);
	assert_ptr_equal(again, libc);
	file_cache_put(c, again);

	/* Not ELF: refused, and the fd is consumed either way. */
	assert_int_equal(file_cache_get(c, open_or_fail("/proc/self/maps"), "maps", &again),
			 -ENOEXEC);
	assert_int_equal(file_cache_count(c), 1);
	file_cache_free(c);
}

/* Dropping the idle files frees those nothing references and leaves the others. */
static void test_file_cache_drop_idle(void **state)
{
	struct cached_file *exe, *libc, *again;
	struct file_cache *c;
	Dl_info info;

	assert_true(dladdr(libc_symbol("qsort"), &info));
	assert_int_equal(file_cache_new(8, &c), 0);
	assert_int_equal(file_cache_get(c, open_or_fail("/proc/self/exe"), "exe", &exe), 0);
	assert_int_equal(file_cache_get(c, open_or_fail(info.dli_fname), "libc", &libc), 0);
	file_cache_put(c, exe);
	file_cache_drop_idle(c);
	assert_int_equal(file_cache_count(c), 1);
	assert_int_equal(file_cache_get(c, open_or_fail(info.dli_fname), "libc", &again), 0);
	assert_ptr_equal(again, libc);	/* still the one referenced */
	file_cache_put(c, again);
	file_cache_put(c, libc);
	file_cache_drop_idle(c);
	assert_int_equal(file_cache_count(c), 0);
	file_cache_free(c);
}

struct namer {
	struct proc_syms *ps;
	int failures;
};

static void *namer_thread(void *arg)
{
	struct namer *n = arg;
	char buf[128];

	for (int i = 0; i < 20000; i++) {
		if (proc_syms_name(n->ps, (uintptr_t)symtest_marker, false, buf, sizeof(buf)) ||
		    strcmp(buf, "symtest_marker"))
			n->failures++;
	}
	return NULL;
}

static void test_name_while_refreshing(void **state)
{
	struct namer namers[4];
	pthread_t threads[4];
	struct proc_syms *ps;

	assert_int_equal(proc_syms_new(*state, getpid(), &ps), 0);
	for (int i = 0; i < 4; i++) {
		namers[i] = (struct namer){ .ps = ps };
		assert_int_equal(pthread_create(&threads[i], NULL, namer_thread, &namers[i]), 0);
	}
	for (int i = 0; i < 50; i++)
		assert_int_equal(proc_syms_refresh(ps), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(threads[i], NULL);
		assert_int_equal(namers[i].failures, 0);
	}
	proc_syms_free(ps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_own_and_libc_functions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_return_address, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inlined_frames_and_where, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vdso, setup, teardown),
		cmocka_unit_test_setup_teardown(test_versions_and_compat_aliases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plt_stub, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compiler_suffixes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stripped_library, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuglink_library, setup, teardown),
		cmocka_unit_test_setup_teardown(test_anon_unmapped_and_refresh, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_after_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pie_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_non_pie_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_while_refreshing, setup, teardown),
		cmocka_unit_test(test_file_cache_refs_and_idle_bound),
		cmocka_unit_test(test_file_cache_drop_idle),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
