/* The JVM agent's replies come from inside the target JVM, which its owner controls: any
 * bytes must parse or fail cleanly, and whatever parses must render (deadlock cycles are
 * followed through owner ids the text chooses). The first byte picks thread records or event
 * records. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/jvm/jvm.h"
#include "collectors/jvm/jvm_internal.h"
#include "store/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct jvm_task_cpu tasks[2] = { { 1, "spinner", 5 }, { 2, "java", 7 } };
	char *text;
	FILE *out;

	if (len < 1)
		return 0;
	text = malloc(len);
	if (!text)
		return 0;
	memcpy(text, data + 1, len - 1);
	if (data[0] & 1) {
		struct jvm_profiles p = { profile_new("bytes"), profile_new("samples"),
					  profile_new("microseconds") };
		struct jvm_java_stacks java = { 0 };
		struct jvm_drain d = {0};

		jvm_events_add(text, len - 1, &p, 1000, &d, &java);
		jvm_java_stacks_free(&java);
		profile_unref(p.alloc);
		profile_unref(p.alloc_objects);
		profile_unref(p.monitors);
		free(text);
		return 0;
	}
	struct jvm_threads t;

	if (jvm_threads_parse(text, len - 1, &t)) {
		free(text);
		return 0;
	}
	jvm_threads_match(&t, tasks, 2);
	out = fopen("/dev/null", "w");
	jvm_render_dump(&t, 1, out);
	jvm_render_deadlocks(&t, out);
	jvm_render_deadlocks_json(&t, 1, out);
	struct thread_info ti[2] = { { .tid = 1, .name = "spinner", .recent_us = 9 },
				     { .tid = 2, .name = "java", .recent_us = 3 } };
	const struct thread_info *order[2] = { &ti[0], &ti[1] };
	struct thread_list l = { .pid = 1, .v = ti, .n = 2, .interval_us = 10,
				 .from_history = true };

	/* The same records stand for both the thread list and the busiest threads' stacks. */
	jvm_render_busy(&t, &t, &l, order, out);
	fclose(out);
	jvm_threads_free(&t);
	return 0;
}
