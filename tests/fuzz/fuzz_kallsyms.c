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
	const char *name;
	uint64_t addr = 0;
	bool stale;

	if (kallsyms_parse((const char *)data, len, &k))
		return 0;
	if (len >= sizeof(addr))
		memcpy(&addr, data, sizeof(addr));
	/* A name handed out must be a readable string. */
	if ((name = kallsyms_lookup(k, addr, &stale)) && strlen(name) > len)
		__builtin_trap();
	kallsyms_lookup(k, 0, NULL);
	kallsyms_lookup(k, UINT64_MAX, NULL);
	kallsyms_free(k);
	return 0;
}
