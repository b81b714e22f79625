#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/batch_names.h"

uint64_t agg_fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

bool agg_has_lines(const Aperture__Sync__V1__Stack *st)
{
	for (size_t j = 0; j < st->n_lines; j++)
		if (st->lines[j])
			return true;
	return false;
}

uint64_t agg_lines_hash(uint64_t h, const Aperture__Sync__V1__Stack *st)
{
	if (!agg_has_lines(st))
		return h;
	h = agg_fnv1a(h, "lines", 6);
	return agg_fnv1a(h, st->lines, st->n_lines * sizeof(*st->lines));
}

void agg_service_of(const Aperture__Sync__V1__Target *t, char *out, size_t size)
{
	const char *name = t->comm[0] ? t->comm : "unknown";

	for (size_t i = 0; i < t->n_labels; i++)
		if (!strcmp(t->labels[i]->key, "service") && t->labels[i]->value[0])
			name = t->labels[i]->value;
	snprintf(out, size, "%s%s", !strcmp(name, ".") || !strcmp(name, "..") ? "_" : "", name);
	for (char *p = out; *p; p++)
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '_';
}

char *agg_labels_text(const Aperture__Sync__V1__Target *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (size_t i = 0; i < t->n_labels; i++)
		fprintf(f, "%s%s=%s", i ? "," : "", t->labels[i]->key, t->labels[i]->value);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *agg_stack_text(const WireBatch *b, uint32_t i)
{
	const Aperture__Sync__V1__Stack *st = b->stacks[i];
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (size_t j = 0; j < st->n_frames; j++)
		fprintf(f, "%s%s", j ? ";" : "", b->strings[b->frames[st->frames[j]]->name]);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

void agg_target_texts(const Aperture__Sync__V1__Target *t, const char *out[TREE_TEXT_NR])
{
	for (int k = 0; k < TREE_TEXT_NR; k++)
		out[k] = NULL;
	out[TREE_TEXT_STATUS] = t->status;
	out[TREE_TEXT_JVM_STATUS] = t->jvm_status;
	out[TREE_TEXT_THREADS_DUMP] = t->threads_dump;
	out[TREE_TEXT_DEADLOCKS] = t->deadlocks;
	out[TREE_TEXT_DEADLOCKS_JSON] = t->deadlocks_json;
	out[TREE_TEXT_THREADS_BUSY] = t->threads_busy;
}
