/* A thread's name is any bytes its process chooses, and /proc/<pid>/task/<tid>/stat holds
 * it; the stack and syscall files are the kernel's: any bytes must parse or fail cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/threads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct thread_info t = {0};
	uint64_t nr, a0, a1, a2;
	char *text = malloc(len + 1), *frames;

	if (!text)
		return 0;
	memcpy(text, data, len);
	text[len] = '\0';
	threads_parse_stat(text, 100, &t);
	threads_parse_syscall(text, &nr, &a0, &a1, &a2);
	frames = threads_parse_kstack(text);
	if (frames && (strchr(frames, '\n') || frames[strlen(frames) - 1] != ']'))
		abort();
	free(frames);
	free(text);
	return 0;
}
