/* /proc/<pid>/maps text is the kernel's, but a parser bug would crash the daemon on one odd
 * mapping name: anything at all must parse or fail cleanly. */
#include <stdint.h>
#include <stddef.h>
#include "symbols/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct procmaps maps = {0};

	if (procmaps_parse((const char *)data, len, &maps) == 0)
		procmaps_free(&maps);
	return 0;
}
