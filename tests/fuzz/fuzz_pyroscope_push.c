/* The push RPC's body (Grafana Alloy's pyroscope.write) is the aggregator's untrusted input:
 * any bytes must decode into series whose profiles hold only what they said, or fail with a
 * reason. The decode needs no aggregator; its only tie to the tree is the profiles' units
 * (tree_units.c). */
#include <stdint.h>
#include <stdlib.h>
#include "aggregate/pyroscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct pyro_push_request rq;
	char why[400];

	if (pyro_push_decode(data, len, 1700000000, &rq, why, sizeof(why))) {
		if (!why[0])
			abort(); /* every refusal says why */
		return 0;
	}
	for (size_t i = 0; i < rq.n; i++) {
		struct profile_snapshot *s;

		if (!rq.series[i].s.app || !rq.series[i].s.app[0])
			abort(); /* a series has its service */
		for (int t = 0; t < TARGET_PROFILE_NR; t++)
			if (rq.series[i].push.p[t] && !profile_snapshot(rq.series[i].push.p[t], 0, &s))
				profile_snapshot_free(s);
	}
	pyro_push_request_free(&rq);
	return 0;
}
