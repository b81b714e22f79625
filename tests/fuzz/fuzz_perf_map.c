/* A perf map is written by the target: anything must parse or be skipped, and names handed
 * out must be strings of the input, cut to the buffer. */
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "symbols/perf_map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct perf_map *m;
	char name[64];
	uint64_t addr = 0;

	if (perf_map_from_text((const char *)data, len, &m))
		return 0;
	if (len >= sizeof(addr))
		memcpy(&addr, data, sizeof(addr));
	if (!perf_map_name(m, addr, name, sizeof(name)) && strlen(name) > len)
		__builtin_trap();
	perf_map_name(m, 0, name, sizeof(name));
	perf_map_name(m, UINT64_MAX, name, sizeof(name));
	perf_map_free(m);
	return 0;
}
