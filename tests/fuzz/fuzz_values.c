/* Everything a user writes to a control file goes through these parsers, and /proc text
 * through the identity parsers: any bytes must give a value or a clean error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/proc_identity.h"
#include "daemon/value.h"

static const char *const words[] = { "fp", "dwarf", "auto", NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct proc_identity id;
	char quoted[64], *text;
	uint64_t v, d;
	pid_t tgid;
	int on;

	value_parse_uint((const char *)data, len, 1, 10000, &v);
	value_parse_enable((const char *)data, len, &on, &d);
	if (!value_parse_word((const char *)data, len, words, &v) && v > 2)
		abort();
	value_parse_window((const char *)data, len, 600, &on, &v);
	value_quote((const char *)data, len, quoted, sizeof(quoted));
	if (strlen(quoted) >= sizeof(quoted))
		abort();

	text = malloc(len + 1);
	if (!text)
		return 0;
	memcpy(text, data, len);
	text[len] = '\0';
	proc_identity_parse_stat(text, &id);
	proc_identity_parse_status(text, &tgid, &id);
	free(text);
	return 0;
}
