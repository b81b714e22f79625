// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <elfutils/libdwfl.h>

#include "symbols/debug_file.h"
#include "symbols/procmaps.h"
#include "symbols/unwind.h"

/* DWARF register numbers of the x86-64 psABI. */
#define DWARF_RBP 6
#define DWARF_RSP 7
#define DWARF_RIP 16
/* Walks that pass a return address outside every module read the mappings again at once
 * this many times, then once a second at most: a process enabled as it starts can have its
 * mappings read before the loader mapped its libraries, and one may dlopen a library that
 * calls back into code known before. */
#define UNWIND_EARLY_REPORTS 4

struct unwinder {
	Dwfl *dwfl;
	pid_t pid;
	pid_t reader; /* whose /proc/<id>/ shows pid's address space (procmaps_reader) */
	int64_t reported_at; /* CLOCK_MONOTONIC second the mappings were last read */
	int early_reports;   /* read again for a walk ending outside them, before the limit */
	/* The sample being unwound. */
	const struct unwind_regs *regs;
	const struct unwind_stack *stack;
	bool read_past_copy;
};

struct walk {
	uint64_t *pcs;
	int n, max;
	bool full;
};

/* The file mapped at low in pid, opened through map_files: -1 if none starts there. */
static int open_mapped(pid_t pid, Dwarf_Addr low)
{
	char path[320];
	struct dirent *d;
	DIR *dir;
	int fd = -1;

	snprintf(path, sizeof(path), "/proc/%d/map_files", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while (fd < 0 && (d = readdir(dir))) {
		if (strtoull(d->d_name, NULL, 16) != low || !strchr(d->d_name, '-'))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/map_files/%s", (int)pid, d->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	closedir(dir);
	return fd;
}

/* A module's file as the process maps it. The path in its maps means something else, or
 * nothing, here when the process has a mount namespace of its own (a container): map_files
 * opens the very file mapped, whatever its path. Others as libdwfl finds them. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct unwinder *u = *userdata;
	Dwarf_Addr low;
	int fd;

	if (u && name[0] == '/' &&
	    dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL) &&
	    (fd = open_mapped(u->reader, low)) >= 0) {
		*elfp = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		*file_name = *elfp ? strdup(name) : NULL;
		if (*elfp && *file_name)
			return fd;
		elf_end(*elfp);
		*elfp = NULL;
		close(fd);
	}
	return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
}

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = debug_file_find,
};

static int own_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		      void *arg)
{
	*userdata = arg;
	return DWARF_CB_OK;
}

static int64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* Threads are never enumerated: dwfl_getthread_frames asks for one by id. */
static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp)
{
	return 0;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp)
{
	*thread_argp = dwfl_arg;
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg)
{
	struct unwinder *u = dwfl_arg;
	uint64_t sp = u->regs->sp;

	if (addr < sp || addr - sp + sizeof(*result) > u->stack->len) {
		/* Above the copy: the stack goes on beyond what was copied. */
		if (addr >= sp)
			u->read_past_copy = true;
		return false;
	}
	memcpy(result, (const char *)u->stack->data + (addr - sp), sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	struct unwinder *u = thread_arg;
	Dwarf_Word regs[2] = { u->regs->bp, u->regs->sp }, ip = u->regs->ip;

	/* rip as a register too: the CFA of a PLT entry is computed from it (ld's CFI for
	 * .plt: rsp + 8, plus 8 more past the entry's push). */
	return dwfl_thread_state_registers(thread, DWARF_RBP, 2, regs) &&
	       dwfl_thread_state_registers(thread, DWARF_RIP, 1, &ip) &&
	       (dwfl_thread_state_register_pc(thread, u->regs->ip), true);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* Tells the Dwfl about the process's mappings now; modules already known stay. */
static int report(struct unwinder *u)
{
	int err;

	err = procmaps_reader(u->pid, &u->reader);
	if (err)
		return err;
	dwfl_report_begin_add(u->dwfl);
	err = dwfl_linux_proc_report(u->dwfl, u->reader);
	/* Maps we may not read: no module is known, and each walk stops at its first frame. */
	if (err == EACCES || err == EPERM)
		err = 0;
	if (dwfl_report_end(u->dwfl, NULL, NULL) && !err)
		err = -EINVAL;
	/* find_elf learns the pid from each module. */
	dwfl_getmodules(u->dwfl, own_module, u, 0);
	u->reported_at = mono_now();
	/* dwfl_linux_proc_report: -1 if a module could not be reported, else an errno. */
	if (err == -1)
		err = -EINVAL;
	else if (err > 0)
		err = -err;
	return err == -ENOENT ? -ESRCH : err;
}

int unwinder_new(pid_t pid, struct unwinder **out)
{
	struct unwinder *u;
	int err;

#ifndef __x86_64__
	return -EOPNOTSUPP;
#endif
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->pid = pid;
	u->dwfl = dwfl_begin(&proc_callbacks);
	if (!u->dwfl) {
		err = -ENOMEM;
		goto fail;
	}
	err = report(u);
	if (err)
		goto fail;
	/* The id libdwfl reads /proc/<id>/mem through, for the vDSO. */
	if (!dwfl_attach_state(u->dwfl, NULL, u->reader, &thread_callbacks, u)) {
		err = -EOPNOTSUPP;
		goto fail;
	}
	*out = u;
	return 0;
fail:
	unwinder_free(u);
	return err;
}

void unwinder_free(struct unwinder *u)
{
	if (!u)
		return;
	if (u->dwfl)
		dwfl_end(u->dwfl);
	free(u);
}

static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;

	if (!dwfl_frame_pc(state, &pc, NULL) || pc == 0)
		return DWARF_CB_ABORT;
	if (w->n == w->max) {
		w->full = true;
		return DWARF_CB_ABORT;
	}
	w->pcs[w->n++] = pc;
	return DWARF_CB_OK;
}

static void walk(struct unwinder *u, pid_t tid, struct walk *w)
{
	w->n = 0;
	w->full = false;
	u->read_past_copy = false;
	dwfl_getthread_frames(u->dwfl, tid, on_frame, w);
}

/* The walk passed a return address in no module known (past it, libdw guessed from frame
 * pointers, or stopped), and the mappings may be read again for it. */
static bool passed_unmapped(struct unwinder *u, const struct walk *w)
{
	int i = 1;

	while (i < w->n && dwfl_addrmodule(u->dwfl, w->pcs[i] - 1))
		i++;
	if (i >= w->n)
		return false;
	if (u->early_reports < UNWIND_EARLY_REPORTS) {
		u->early_reports++;
		return true;
	}
	return mono_now() > u->reported_at;
}

int unwinder_unwind(struct unwinder *u, pid_t tid, const struct unwind_regs *regs,
		    const struct unwind_stack *stack, uint64_t *pcs, int max, bool *truncated)
{
	struct walk w = { .pcs = pcs, .max = max };

	u->regs = regs;
	u->stack = stack;
	/* A pc outside every module: something was mapped since (dlopen). Once a second at
	 * most, so code that is not in a file (JIT) does not re-read maps on every sample. */
	if (!dwfl_addrmodule(u->dwfl, regs->ip) && mono_now() > u->reported_at)
		report(u);
	walk(u, tid, &w);
	/* Without that library's CFI every later walk would go wrong there too. */
	if (passed_unmapped(u, &w)) {
		report(u);
		walk(u, tid, &w);
	}
	*truncated = w.full || u->read_past_copy;
	return w.n;
}
