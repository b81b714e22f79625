/* /proc/kallsyms differs by kernel, config and kptr_restrict: anything must parse or fail
 * cleanly, and lookups in whatever parsed must stay in bounds. */
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "symbols/kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct kallsyms *k = NULL;
	char name[600];
	uint64_t addr = 0;
	bool stale;

	if (kallsyms_parse((const char *)data, len, &k))
		return 0;
	if (len >= sizeof(addr))
		memcpy(&addr, data, sizeof(addr));
	/* A name handed out must be a string from the input (or __pfx_ and one). */
	if (!kallsyms_name(k, addr, name, sizeof(name), &stale) && strlen(name) > len + 6)
		__builtin_trap();
	kallsyms_name(k, 0, name, sizeof(name), NULL);
	kallsyms_name(k, UINT64_MAX, name, 1, NULL);
	kallsyms_free(k);
	return 0;
}
