// templates [SECONDS]
//
// Ground truth for demangling and inlined frames, built by g++ -O2 -g: main calls
// work::Engine<unsigned long>::run(unsigned long) (a template member kept out of line), which
// spends its time in work::mix<unsigned long>(unsigned long), a template helper the compiler
// is made to inline: its code lies inside run's, and only DWARF says it is there.
#include "burn.h"

namespace work {

template <typename T> __attribute__((always_inline)) inline T mix(T x)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

template <typename T> struct Engine {
	__attribute__((noinline)) T run(T seed)
	{
		T x = seed | 1;

		for (unsigned long i = 0; i < burn_chunk; i++)
			x = mix(x);
		return x;
	}
};

} // namespace work

int main(int argc, char **argv)
{
	double seconds = arg_seconds(argc, argv, 1);
	double deadline = seconds > 0 ? now_s() + seconds : 0;
	work::Engine<unsigned long> engine;

	while (!deadline || now_s() < deadline)
		burn_sink = engine.run(burn_sink);
	return 0;
}
