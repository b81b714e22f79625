/* Sorted tables of address-keyed entries, shared by the kernel's and ELF files' symbol
 * tables. An entry is any struct whose first member is its uint64_t address. */
#ifndef APERTURE_SYMBOLS_ADDR_TABLE_H
#define APERTURE_SYMBOLS_ADDR_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t addr_table_at(const void *table, size_t size, size_t i)
{
	uint64_t addr;

	memcpy(&addr, (const char *)table + i * size, sizeof(addr));
	return addr;
}

/* How many entries have an address <= addr: entry [result - 1] is the nearest at or below
 * addr, and 0 means none is. */
static inline size_t addr_table_upper_bound(const void *table, size_t n, size_t size,
					    uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr_table_at(table, size, mid) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Keeps the first entry of each address in a sorted table; returns the new count. Sort the
 * preferred entry of an address first. */
static inline size_t addr_table_dedup(void *table, size_t n, size_t size)
{
	char *base = table;
	size_t i, kept = 0;

	for (i = 0; i < n; i++) {
		if (kept && addr_table_at(table, size, kept - 1) == addr_table_at(table, size, i))
			continue;
		if (kept != i)
			memcpy(base + kept * size, base + i * size, size);
		kept++;
	}
	return kept;
}

#endif
