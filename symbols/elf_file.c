// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <elfutils/libdwelf.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "symbols/addr_table.h"
#include "symbols/alias.h"
#include "symbols/debug_file.h"
#include "symbols/elf_file.h"

/* How far back a lookup walks for an enclosing sized symbol once the nearest one below does
 * not cover the address. Nesting is rare (assembler labels inside functions); the bound keeps
 * one giant symbol from making every lookup after it linear. */
#define MAX_WALK_BACK 64

struct elf_load {
	uint64_t offset;
	uint64_t filesz;
	uint64_t vaddr;
};

struct elf_sym {
	uint64_t addr;		/* first: see addr_table.h */
	uint64_t end;		/* exclusive; for a sizeless symbol the next symbol or section end */
	uint64_t reach;		/* the largest end of any sized symbol up to this one */
	const char *name;	/* in libelf's string table or in names, alive as long as f */
	bool sized;
	bool compat;		/* a non-default symbol version (name@VERSION, one '@') */
	enum alias_binding bind;
};

/* Names made here (cleaned, or PLT entries'), in blocks that never move. */
struct name_block {
	struct name_block *next;
	size_t used, size;
	char data[];
};

/* Where a compile unit's code is, for files without .debug_aranges. */
struct cu_range {
	uint64_t lo;		/* first: see addr_table.h */
	uint64_t hi;
	Dwarf_Off die;
};

/* One address's DWARF functions, as elf_file_scopes last found them. */
struct scope_memo {
	uint64_t addr_plus1; /* 0: empty */
	int n;
	struct elf_scope s[ELF_SCOPES_MAX];
};

/* Slots of the memo: a hot loop touches a handful of addresses, and a wrong guess costs one
 * walk. A few slots could be anywhere; this many (about 52 KB) is made only for a file whose
 * DWARF is used. */
#define SCOPE_MEMO_SLOTS 256

struct elf_file {
	pthread_mutex_t dwarf_lock; /* DWARF lookups: libdw reads it in lazily; cus and memo */
	/* elf_file_scopes' answers by address: a walk of a large unit's DIEs costs tens of
	 * microseconds, and a drain names the same few addresses in thousands of new stacks. */
	struct scope_memo *memo;
	struct cu_range *cus;	/* sorted by lo; made at the first lookup libdw can't answer */
	size_t ncus;
	bool cus_made;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	struct elf_file_key key;
	struct elf_load *loads;
	size_t nloads;
	struct elf_sym *syms;	/* sorted by addr, one per address */
	size_t nsyms;
	struct name_block *names;
};

/* The file itself is always reported with an fd, so find_elf is never asked. */
static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = debug_file_find,
	.section_address = dwfl_offline_section_address,
};

static int read_loads(struct elf_file *f, Elf *elf)
{
	size_t nphdr, i;

	if (elf_getphdrnum(elf, &nphdr))
		return -ENOEXEC;
	f->loads = calloc(nphdr ? nphdr : 1, sizeof(*f->loads));
	if (!f->loads)
		return -ENOMEM;
	for (i = 0; i < nphdr; i++) {
		GElf_Phdr mem, *ph = gelf_getphdr(elf, i, &mem);

		if (!ph || ph->p_type != PT_LOAD)
			continue;
		f->loads[f->nloads++] = (struct elf_load){
			.offset = ph->p_offset,
			.filesz = ph->p_filesz,
			.vaddr = ph->p_vaddr,
		};
	}
	return 0;
}

static int read_build_id(struct elf_file *f, Elf *elf)
{
	const void *id;
	ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
	uint8_t *copy;

	if (len <= 0)
		return 0;
	/* Copied: the note may live in a buffer libelf frees when the Dwfl goes. */
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, id, len);
	f->key.build_id = copy;
	f->key.build_id_len = len;
	return 0;
}

int elf_file_open(int fd, const char *debug_path, struct elf_file **out)
{
	struct elf_file *f;
	struct stat st;
	GElf_Addr bias;
	Elf *elf;
	int err;

	if (fstat(fd, &st)) {
		err = -errno;
		goto err_close;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		err = -ENOMEM;
		goto err_close;
	}
	pthread_mutex_init(&f->dwarf_lock, NULL);
	f->key.dev = st.st_dev;
	f->key.ino = st.st_ino;
	f->key.size = st.st_size;
	f->key.mtime = st.st_mtim;

	f->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!f->dwfl) {
		err = -ENOMEM;
		goto err_free;
	}
	/* Base 0 with add_p_vaddr: bias 0 for ET_DYN (prelinked or not) and ET_EXEC alike. */
	f->mod = dwfl_report_elf(f->dwfl, debug_path, debug_path, fd, 0, true);
	if (!f->mod) {
		err = -ENOEXEC;
		goto err_free;
	}
	fd = -1;	/* the module owns it now */
	if (dwfl_report_end(f->dwfl, NULL, NULL)) {
		err = -ENOEXEC;
		goto err_free;
	}
	elf = dwfl_module_getelf(f->mod, &bias);
	if (!elf) {
		err = -ENOEXEC;
		goto err_free;
	}
	err = read_loads(f, elf);
	if (err)
		goto err_free;
	err = read_build_id(f, elf);
	if (err)
		goto err_free;
	*out = f;
	return 0;

err_free:
	elf_file_free(f);
err_close:
	if (fd >= 0)
		close(fd);
	return err;
}

void elf_file_free(struct elf_file *f)
{
	if (!f)
		return;
	if (f->dwfl)
		dwfl_end(f->dwfl);
	free((void *)f->key.build_id);
	free(f->loads);
	free(f->syms);
	free(f->cus);
	free(f->memo);
	while (f->names) {
		struct name_block *next = f->names->next;

		free(f->names);
		f->names = next;
	}
	pthread_mutex_destroy(&f->dwarf_lock);
	free(f);
}

const struct elf_file_key *elf_file_key(const struct elf_file *f)
{
	return &f->key;
}

size_t elf_file_symbol_count(const struct elf_file *f)
{
	return f->nsyms;
}

static enum alias_binding binding(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return ALIAS_GLOBAL;
	case STB_WEAK:
		return ALIAS_WEAK;
	default:
		return ALIAS_LOCAL;
	}
}

/* Whether a symbol names code, and where its section ends (module addresses), which bounds a
 * symbol without a size. */
static bool is_code(const GElf_Sym *sym, GElf_Word shndx, Elf *elf, Dwarf_Addr bias,
		    uint64_t *section_end)
{
	int type = GELF_ST_TYPE(sym->st_info);
	GElf_Shdr mem, *sh;
	Elf_Scn *scn;

	if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
		return false;
	if (shndx == SHN_UNDEF || shndx == SHN_ABS || shndx == SHN_COMMON)
		return false;
	scn = elf ? elf_getscn(elf, shndx) : NULL;
	sh = scn ? gelf_getshdr(scn, &mem) : NULL;
	if (!sh) {
		/* Only .dynsym found through the dynamic segment, without sections. */
		*section_end = UINT64_MAX;
		return type != STT_NOTYPE;
	}
	/* NOTYPE is also used for data labels; only those in code count. */
	if (type == STT_NOTYPE && !(sh->sh_flags & SHF_EXECINSTR))
		return false;
	*section_end = sh->sh_addr + sh->sh_size + bias;
	return true;
}

/* By address; at one address a sized symbol first, then one that is not a compat version,
 * then the better alias first, so dedup keeps the first of each address. */
static int sym_cmp(const void *pa, const void *pb)
{
	const struct elf_sym *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->sized != b->sized)
		return a->sized ? -1 : 1;
	if (a->compat != b->compat)
		return a->compat ? 1 : -1;
	return alias_cmp(a->name, a->bind, b->name, b->bind);
}

static void finish_table(struct elf_file *f)
{
	uint64_t reach = 0;
	size_t i, n;

	qsort(f->syms, f->nsyms, sizeof(*f->syms), sym_cmp);
	n = f->nsyms = addr_table_dedup(f->syms, f->nsyms, sizeof(*f->syms));
	for (i = 0; i < n; i++) {
		struct elf_sym *s = &f->syms[i];

		if (!s->sized && i + 1 < n && f->syms[i + 1].addr < s->end)
			s->end = f->syms[i + 1].addr;
		if (s->sized && s->end > reach)
			reach = s->end;
		s->reach = reach;
	}
}

/* A copy of len bytes of name followed by suffix, kept as long as f; NULL without memory. */
static const char *keep_name(struct elf_file *f, const char *name, size_t len,
			     const char *suffix)
{
	size_t need = len + strlen(suffix) + 1;
	struct name_block *b = f->names;
	char *out;

	if (!b || b->size - b->used < need) {
		size_t size = need > 16384 ? need : 16384;

		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->next = f->names;
		b->used = 0;
		b->size = size;
		f->names = b;
	}
	out = b->data + b->used;
	memcpy(out, name, len);
	strcpy(out + len, suffix);
	b->used += need;
	return out;
}

/* A symbol's name as perf shows it: without its version (__libc_start_main@@GLIBC_2.34,
 * llseek@GLIBC_2.2.5: *compat is set for the one-'@' form, a compat alias that yields to a
 * default name at the same address) and without the .lto_priv.N that GCC's LTO gives static
 * functions. .isra.N, .constprop.N, .part.N and .cold stay, as perf keeps them: each is
 * another body of the function. NULL without memory. */
static const char *clean_name(struct elf_file *f, const char *raw, bool *compat)
{
	static const char lto[] = ".lto_priv.";
	const char *at = strchr(raw, '@'), *cut = strstr(raw, lto), *rest = "";
	size_t len = at ? (size_t)(at - raw) : strlen(raw);
	char tail[64];

	*compat = at && at[1] != '@';
	if (cut && (size_t)(cut - raw) < len) {
		rest = cut + sizeof(lto) - 1;
		rest += strspn(rest, "0123456789");
		/* What follows the number (.cold), up to the version. */
		snprintf(tail, sizeof(tail), "%.*s", (int)(raw + len - rest), rest);
		rest = tail;
		len = cut - raw;
	}
	if (!at && !cut)
		return raw;
	return keep_name(f, raw, len, rest);
}

/* x86-64 PLT entries are 16 bytes; .plt begins with one that calls the dynamic linker. */
#define PLT_ENTRY_SIZE 16

static Elf_Scn *find_section(Elf *elf, size_t shstrndx, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (gelf_getshdr(scn, sh) && (n = elf_strptr(elf, shstrndx, sh->sh_name)) &&
		    !strcmp(n, name))
			return scn;
	}
	return NULL;
}

/* Symbols for the PLT entries, as perf synthesizes them: the i-th relocation of .rela.plt
 * names the i-th entry of .plt.sec (IBT builds), else the (i+1)-th of .plt, NAME@plt. A
 * sample in a stub then reads memcpy@plt rather than FILE+0xOFFSET. Returns 0 or -ENOMEM;
 * a file without them is not an error. */
static int add_plt_symbols(struct elf_file *f, Elf *elf)
{
	GElf_Shdr rela_sh, plt_sh, dynsym_sh;
	Elf_Data *rela_data, *dynsym_data;
	Elf_Scn *rela, *plt, *dynsym;
	uint64_t first;
	size_t shstrndx, n, i;
	struct elf_sym *grown;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	rela = find_section(elf, shstrndx, ".rela.plt", &rela_sh);
	plt = find_section(elf, shstrndx, ".plt.sec", &plt_sh);
	first = 0;
	if (!plt) {
		plt = find_section(elf, shstrndx, ".plt", &plt_sh);
		first = PLT_ENTRY_SIZE;
	}
	if (!rela || !plt || rela_sh.sh_type != SHT_RELA || plt_sh.sh_type != SHT_PROGBITS ||
	    !rela_sh.sh_entsize)
		return 0;
	dynsym = elf_getscn(elf, rela_sh.sh_link);
	rela_data = elf_getdata(rela, NULL);
	dynsym_data = dynsym ? elf_getdata(dynsym, NULL) : NULL;
	if (!dynsym_data || !rela_data || !gelf_getshdr(dynsym, &dynsym_sh))
		return 0;
	n = rela_sh.sh_size / rela_sh.sh_entsize;
	if (first + n * PLT_ENTRY_SIZE > plt_sh.sh_size)
		return 0; /* not laid out as this knows */
	grown = reallocarray(f->syms, f->nsyms + n, sizeof(*f->syms));
	if (!grown)
		return -ENOMEM;
	f->syms = grown;
	for (i = 0; i < n; i++) {
		struct elf_sym *s = &f->syms[f->nsyms];
		GElf_Rela r;
		GElf_Sym sym;
		const char *name;

		if (!gelf_getrela(rela_data, i, &r) || !GELF_R_SYM(r.r_info) ||
		    !gelf_getsym(dynsym_data, GELF_R_SYM(r.r_info), &sym) ||
		    !(name = elf_strptr(elf, dynsym_sh.sh_link, sym.st_name)) || !name[0])
			continue;
		s->name = keep_name(f, name, strcspn(name, "@"), "@plt");
		if (!s->name)
			return -ENOMEM;
		s->addr = plt_sh.sh_addr + first + i * PLT_ENTRY_SIZE;
		s->end = s->addr + PLT_ENTRY_SIZE;
		s->sized = true;
		s->compat = false;
		s->bind = ALIAS_LOCAL;
		f->nsyms++;
	}
	return 0;
}

int elf_file_load_symbols(struct elf_file *f)
{
	int nsyms = dwfl_module_getsymtab(f->mod), err;
	GElf_Addr main_bias;
	Elf *main_elf;
	int i;

	f->syms = calloc(nsyms > 0 ? nsyms : 1, sizeof(*f->syms));
	if (!f->syms)
		return -ENOMEM;
	for (i = 0; i < nsyms; i++) {
		struct elf_sym *s = &f->syms[f->nsyms];
		uint64_t section_end;
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Dwarf_Addr bias;
		Elf *elf = NULL;
		const char *name;

		name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, &shndx, &elf, &bias);
		if (!name || !name[0] || !is_code(&sym, shndx, elf, bias, &section_end))
			continue;
		s->addr = addr;
		s->sized = sym.st_size != 0;
		s->end = s->sized ? addr + sym.st_size : section_end;
		s->name = clean_name(f, name, &s->compat);
		if (!s->name)
			return -ENOMEM;
		s->bind = binding(&sym);
		if (s->end <= s->addr)
			continue;
		f->nsyms++;
	}
	/* The stubs are in the file itself; a separate debug file has no .plt contents. */
	main_elf = dwfl_module_getelf(f->mod, &main_bias);
	if (main_elf) {
		err = add_plt_symbols(f, main_elf);
		if (err)
			return err;
	}
	finish_table(f);
	return 0;
}

int elf_file_vaddr(const struct elf_file *f, uint64_t file_offset, uint64_t *vaddr)
{
	for (size_t i = 0; i < f->nloads; i++) {
		const struct elf_load *l = &f->loads[i];

		if (file_offset >= l->offset && file_offset - l->offset < l->filesz) {
			*vaddr = file_offset - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

const char *elf_file_lookup(const struct elf_file *f, uint64_t file_offset)
{
	const struct elf_sym *floor;
	size_t lo, i, steps;
	uint64_t addr;

	if (elf_file_vaddr(f, file_offset, &addr))
		return NULL;
	lo = addr_table_upper_bound(f->syms, f->nsyms, sizeof(*f->syms), addr);
	if (lo == 0)
		return NULL;
	/* A sized symbol that encloses addr wins over a sizeless label, as in libdwfl; among
	 * sized ones the innermost (highest start) wins. */
	for (i = lo, steps = 0; i > 0 && steps < MAX_WALK_BACK; i--, steps++) {
		const struct elf_sym *s = &f->syms[i - 1];

		if (s->reach <= addr)
			break;
		if (s->sized && addr < s->end)
			return s->name;
	}
	floor = &f->syms[lo - 1];
	if (!floor->sized && addr < floor->end)
		return floor->name;
	return NULL;
}

static void describe(Dwarf_Die *die, struct elf_scope *out)
{
	Dwarf_Attribute mem, *attr;
	int line = 0;

	attr = dwarf_attr_integrate(die, DW_AT_linkage_name, &mem);
	if (!attr)
		attr = dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &mem);
	out->name = attr ? dwarf_formstring(attr) : NULL;
	if (!out->name)
		out->name = dwarf_diename(die);
	out->file = dwarf_decl_file(die);
	out->line = dwarf_decl_line(die, &line) ? 0 : line;
	out->at_line = 0;
}

static uint32_t call_line(Dwarf_Die *inlined)
{
	Dwarf_Attribute mem;
	Dwarf_Word line;

	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &mem), &line) ||
	    line > UINT32_MAX)
		return 0;
	return line;
}

/* The line table's line of pc in unit cu, 0 if it has none. */
static uint32_t pc_line(Dwarf_Die *cu, Dwarf_Addr pc)
{
	Dwarf_Line *l = dwarf_getsrc_die(cu, pc);
	int line;

	return l && !dwarf_lineno(l, &line) && line > 0 ? line : 0;
}

/* Walks down from die to the innermost DIE holding pc, describing the functions on the way:
 * the physical nesting is the call chain of inlined calls. dwarf_getscopes is not used: it
 * continues an inlined instance with the scopes of its abstract definition, and finds
 * nothing in GCC's LTO units (<artificial>). Returns the new count, past max when deeper
 * functions did not fit. */
static int walk_scopes(Dwarf_Die *die, Dwarf_Addr pc, struct elf_scope *out, int n, int max)
{
	Dwarf_Die child;

	if (dwarf_child(die, &child))
		return n;
	do {
		int tag = dwarf_tag(&child);

		/* C++ member functions can sit inside their class or namespace. */
		if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
		    tag == DW_TAG_structure_type || tag == DW_TAG_union_type) {
			int deeper = walk_scopes(&child, pc, out, n, max);

			if (deeper != n)
				return deeper;
			continue;
		}
		if (dwarf_haspc(&child, pc) != 1)
			continue;
		if (tag == DW_TAG_subprogram)
			n = 0; /* a nested function (rare): it is the outermost that runs */
		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
			/* What runs in the function around an inlined call is that call. */
			if (tag == DW_TAG_inlined_subroutine && n > 0 && n <= max)
				out[n - 1].at_line = call_line(&child);
			if (n < max)
				describe(&child, &out[n]);
			n++; /* past max too: the caller knows the chain was cut */
		}
		return walk_scopes(&child, pc, out, n, max);
	} while (!dwarf_siblingof(&child, &child));
	return n;
}

/* The functions at pc of unit cu, outermost first, with the lines executing in them: the
 * innermost runs the line table's line of pc; cut at max, the last kept runs its call. */
static int scopes_at(Dwarf_Die *cu, Dwarf_Addr pc, struct elf_scope *out, int max)
{
	int n = walk_scopes(cu, pc, out, 0, max);

	if (n > max)
		return max;
	if (n > 0)
		out[n - 1].at_line = pc_line(cu, pc);
	return n;
}

static int cu_range_cmp(const void *pa, const void *pb)
{
	const struct cu_range *a = pa, *b = pb;

	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The compile units' address ranges, from each unit's DW_AT_ranges or low/high pc. Go writes
 * no .debug_aranges, and libdw (0.188) then finds no unit for any address. Under
 * dwarf_lock. */
static void make_cu_ranges(struct elf_file *f, Dwarf *dw)
{
	Elf *elf = dwarf_getelf(dw);
	Dwarf_Off off = 0, next;
	size_t hsize, cap = 0, shstrndx;
	GElf_Shdr sh;

	f->cus_made = true;
	/* With .debug_aranges libdw knows; an address it did not find is in no unit. */
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) ||
	    find_section(elf, shstrndx, ".debug_aranges", &sh))
		return;
	while (!dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Addr base, start, end;
		ptrdiff_t at = 0;
		Dwarf_Die cu;

		if (!dwarf_offdie(dw, off + hsize, &cu))
			break;
		while ((at = dwarf_ranges(&cu, at, &base, &start, &end)) > 0) {
			if (f->ncus == cap) {
				struct cu_range *grown;

				cap = cap ? 2 * cap : 64;
				grown = reallocarray(f->cus, cap, sizeof(*grown));
				if (!grown)
					return;
				f->cus = grown;
			}
			f->cus[f->ncus++] = (struct cu_range){ start, end, off + hsize };
		}
		off = next;
	}
	if (f->ncus)
		qsort(f->cus, f->ncus, sizeof(*f->cus), cu_range_cmp);
}

/* The unit holding addr (a DWARF address) by its ranges. Under dwarf_lock. */
static Dwarf_Die *cu_by_ranges(struct elf_file *f, uint64_t addr, Dwarf_Die *mem,
			       Dwarf_Addr *bias)
{
	Dwarf *dw = dwfl_module_getdwarf(f->mod, bias);
	size_t lo;

	if (!dw)
		return NULL;
	if (!f->cus_made)
		make_cu_ranges(f, dw);
	addr -= *bias;
	lo = addr_table_upper_bound(f->cus, f->ncus, sizeof(*f->cus), addr);
	/* Ranges of one unit may enclose others' (rare): look back a little. */
	for (size_t i = lo, steps = 0; i > 0 && steps < 8; i--, steps++)
		if (addr < f->cus[i - 1].hi)
			return dwarf_offdie(dw, f->cus[i - 1].die, mem);
	return NULL;
}

int elf_file_scopes(const struct elf_file *f, uint64_t file_offset, struct elf_scope *out,
		    int max)
{
	/* The lock guards libdw's caches, the unit ranges and the memo, not the file's value. */
	struct elf_file *mut = (struct elf_file *)f;
	struct scope_memo *slot = NULL;
	Dwarf_Die mem, *cu;
	Dwarf_Addr bias;
	uint64_t addr;
	int n = 0;

	if (elf_file_vaddr(f, file_offset, &addr))
		return 0;
	pthread_mutex_lock(&mut->dwarf_lock);
	if (!mut->memo)
		mut->memo = calloc(SCOPE_MEMO_SLOTS, sizeof(*mut->memo));
	if (mut->memo) {
		slot = &mut->memo[(addr * 0x9e3779b97f4a7c15ULL) >> 56 & (SCOPE_MEMO_SLOTS - 1)];
		if (slot->addr_plus1 == addr + 1)
			goto found;
	}
	cu = dwfl_module_addrdie(f->mod, addr, &bias);
	if (!cu)
		cu = cu_by_ranges(mut, addr, &mem, &bias);
	if (slot) {
		slot->n = cu ? scopes_at(cu, addr - bias, slot->s, ELF_SCOPES_MAX) : 0;
		slot->addr_plus1 = addr + 1;
		goto found;
	}
	if (cu)
		n = scopes_at(cu, addr - bias, out, max);
	pthread_mutex_unlock(&mut->dwarf_lock);
	return n;
found:
	n = slot->n < max ? slot->n : max;
	memcpy(out, slot->s, n * sizeof(*out));
	pthread_mutex_unlock(&mut->dwarf_lock);
	return n;
}
