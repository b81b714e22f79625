/* spin [ROUNDS]: a CPU-bound, single-threaded workload with a small fixed call tree
 * (main -> run -> outer -> {mid_a -> {hash, mix}, mid_b -> {mix, divide}}), six frames deep
 * at the leaves. ROUNDS 0 or absent: run until killed (for the daemon-cost runs).
 * With BENCH_GATE set it waits at the gate, then reports its measured phase. */
#include <stdint.h>
#include "bench.h"

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;

NOINLINE static uint64_t mix(uint64_t x)
{
	for (int i = 0; i < 48; i++) {
		x ^= x >> 12;
		x *= 0x9e3779b97f4a7c15ull;
		x ^= x << 25;
	}
	return x;
}

NOINLINE static uint64_t hash(uint64_t x)
{
	for (int i = 0; i < 64; i++)
		x = (x >> 1) ^ (0xedb88320u & -(x & 1));
	return x;
}

NOINLINE static uint64_t divide(uint64_t x)
{
	uint64_t a = x | 1;

	for (int i = 0; i < 10; i++)
		a = a / 7 + (a % 13) * 0x10001 + i;
	return a;
}

NOINLINE static uint64_t mid_a(uint64_t x) { return hash(x) + mix(x ^ 0x55); }
NOINLINE static uint64_t mid_b(uint64_t x) { return mix(x + 3) ^ divide(x); }

NOINLINE static uint64_t outer(uint64_t x)
{
	return x & 1 ? mid_a(x) * 3 : mid_b(x) + 7;
}

NOINLINE static uint64_t run(uint64_t rounds)
{
	uint64_t acc = 1;

	for (uint64_t i = 0; !rounds || i < rounds; i++)
		acc = acc * 31 + outer(acc ^ i);
	return acc;
}

int main(int argc, char **argv)
{
	uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
	double start;

	wait_gate();
	start = mono_s();
	sink = run(rounds);
	report(start);
	return 0;
}
