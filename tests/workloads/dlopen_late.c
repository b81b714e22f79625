/* dlopen_late SECONDS_BEFORE [SECONDS_AFTER]
 *
 * Ground truth: burns in main -> early for SECONDS_BEFORE, then loads libcall.so (next to
 * it) with dlopen and burns in main -> lib_call -> late until SECONDS_AFTER more have passed
 * (0 or absent: until killed). late is this program's, called back from lib_call in the
 * library loaded late, which keeps no frame pointers: only its CFI leads back to main. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>
#include "burn.h"

__attribute__((noinline)) void early(void) { burn(burn_chunk); }
__attribute__((noinline)) void late(void) { burn(burn_chunk); }

int main(int argc, char **argv)
{
	double before = arg_seconds(argc, argv, 1), after = arg_seconds(argc, argv, 2);
	double deadline = now_s() + before;
	char exe[PATH_MAX], lib[PATH_MAX + 16];
	void (*lib_call)(void (*)(void));
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h;

	if (n < 0)
		return 1;
	exe[n] = '\0';
	snprintf(lib, sizeof(lib), "%s/libcall.so", dirname(exe));
	while (now_s() < deadline)
		early();
	h = dlopen(lib, RTLD_NOW);
	lib_call = h ? (void (*)(void (*)(void)))dlsym(h, "lib_call") : NULL;
	if (!lib_call) {
		fprintf(stderr, "dlopen_late: %s\n", dlerror());
		return 1;
	}
	deadline = now_s() + after;
	while (!after || now_s() < deadline)
		lib_call(late);
	return 0;
}
