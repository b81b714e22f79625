/* pyroscope-java's JFR recordings are the aggregator's untrusted input: any bytes must become
 * profiles or a refusal that says why, within the reader's bounds (aggregate/jfr.c). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "aggregate/jfr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct pyro_push ps = {0};
	char why[400] = "";
	int err = jfr_parse(&ps, "app", data, len, 1700000000, why, sizeof(why));

	if ((err == -EINVAL || err == -ENOTSUP) && !why[0])
		abort(); /* every refusal says why */
	for (int t = 0; t < TARGET_PROFILE_NR; t++) {
		struct profile_snapshot *s;

		if (ps.p[t] && !profile_snapshot(ps.p[t], 0, &s))
			profile_snapshot_free(s);
	}
	pyro_push_free(&ps);
	return 0;
}
