/* The aggregator's Prometheus metrics: counters kept as it works, latency histograms, and
 * the store's size read when scraped. GET /metrics and the tree's metrics file. */
#ifndef APERTURE_AGGREGATE_METRICS_H
#define APERTURE_AGGREGATE_METRICS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

/* Upper bounds in seconds: 1 ms .. 10 s, Prometheus' default spread. */
#define AGG_LATENCY_BUCKETS 12

struct agg_latency {
	_Atomic uint64_t le[AGG_LATENCY_BUCKETS]; /* not cumulative: the bucket it fell in */
	_Atomic uint64_t count, sum_ns;
};

struct aggregator;

/* CLOCK_MONOTONIC nanoseconds, for a start to pass to agg_latency_observe. */
int64_t agg_clock_ns(void);
/* Counts the time since start_ns (from agg_clock_ns) in h. */
void agg_latency_observe(struct agg_latency *h, int64_t start_ns);

/* Every metric of the aggregator in Prometheus text exposition format 0.0.4. */
int agg_metrics_render(struct aggregator *g, FILE *out);

#endif
