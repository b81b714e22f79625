#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/tokens.h"

struct token {
	char *secret;
	char *node;      /* a node token's node */
	bool all;        /* read * */
	char **nodes, **services; /* a scoped read token's */
	size_t nnodes, nservices;
};

struct tokens {
	struct token *v;
	size_t n;
};

static void token_clear(struct token *k)
{
	free(k->secret);
	free(k->node);
	for (size_t i = 0; i < k->nnodes; i++)
		free(k->nodes[i]);
	for (size_t i = 0; i < k->nservices; i++)
		free(k->services[i]);
	free(k->nodes);
	free(k->services);
}

void tokens_free(struct tokens *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		token_clear(&t->v[i]);
	free(t->v);
	free(t);
}

static int push(char ***v, size_t *n, const char *s, size_t len)
{
	char **bigger = realloc(*v, (*n + 1) * sizeof(**v));

	if (!bigger)
		return -ENOMEM;
	*v = bigger;
	bigger[*n] = strndup(s, len);
	if (!bigger[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* "node:a,service:b,..." */
static int parse_scope(struct token *k, const char *s)
{
	int err = 0;

	while (!err && *s) {
		size_t len = strcspn(s, ",");

		if (len > 5 && !strncmp(s, "node:", 5))
			err = push(&k->nodes, &k->nnodes, s + 5, len - 5);
		else if (len > 8 && !strncmp(s, "service:", 8))
			err = push(&k->services, &k->nservices, s + 8, len - 8);
		else
			return -EINVAL;
		s += len + (s[len] == ',');
	}
	return err;
}

static int parse_line(struct token *k, char *line)
{
	char *secret, *role, *arg, *extra, *save;

	secret = strtok_r(line, " \t", &save);
	role = strtok_r(NULL, " \t", &save);
	arg = strtok_r(NULL, " \t", &save);
	extra = strtok_r(NULL, " \t", &save);
	if (!secret || !role || !arg || extra)
		return -EINVAL;
	k->secret = strdup(secret);
	if (!k->secret)
		return -ENOMEM;
	if (!strcmp(role, "node")) {
		k->node = strdup(arg);
		return k->node ? 0 : -ENOMEM;
	}
	if (strcmp(role, "read"))
		return -EINVAL;
	if (!strcmp(arg, "*")) {
		k->all = true;
		return 0;
	}
	return parse_scope(k, arg);
}

int tokens_load(const char *path, struct tokens **out, char *why, size_t why_size)
{
	struct tokens *t = calloc(1, sizeof(*t));
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	int err = 0;

	if (!t || !f) {
		err = t ? -errno : -ENOMEM;
		snprintf(why, why_size, "%s: %s", path, strerror(-err));
		goto out;
	}
	while (!err && getline(&line, &cap, f) > 0) {
		char *p = line + strspn(line, " \t");
		struct token *bigger;

		lineno++;
		p[strcspn(p, "#\r\n")] = 0;
		if (!p[strspn(p, " \t")])
			continue;
		bigger = realloc(t->v, (t->n + 1) * sizeof(*t->v));
		if (!bigger) {
			err = -ENOMEM;
			break;
		}
		t->v = bigger;
		memset(&t->v[t->n], 0, sizeof(t->v[t->n]));
		err = parse_line(&t->v[t->n], p);
		t->n++;
		if (err)
			snprintf(why, why_size, "%s:%u: expected `TOKEN node NAME`, `TOKEN read *` "
				 "or `TOKEN read node:N,service:S...`", path, lineno);
	}
out:
	free(line);
	if (f)
		fclose(f);
	if (err) {
		tokens_free(t);
		return err;
	}
	*out = t;
	return 0;
}

char *secret_file_read(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL, *s, *e;
	size_t len = 0;

	if (!f)
		return NULL;
	if (getdelim(&buf, &len, 0, f) < 0) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (!buf)
		return NULL;
	for (s = buf; *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'; s++)
		;
	for (e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' ||
					  e[-1] == '\t'); e--)
		;
	memmove(buf, s, e - s);
	buf[e - s] = 0;
	return buf;
}

/* Compares every byte whatever the first difference, so timing tells nothing. */
static bool same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return !d;
}

const struct token *tokens_find(const struct tokens *t, const char *bearer)
{
	const struct token *found = NULL;

	for (size_t i = 0; t && bearer && i < t->n; i++)
		if (same_secret(t->v[i].secret, bearer))
			found = &t->v[i];
	return found;
}

const char *token_node(const struct token *k)
{
	return k->node;
}

bool token_reads_all(const struct token *k)
{
	return k->all;
}

static bool listed(char *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], name))
			return true;
	return false;
}

bool token_reads_node(const struct token *k, const char *node)
{
	if (k->node)
		return !strcmp(k->node, node);
	return k->all || listed(k->nodes, k->nnodes, node);
}

bool token_reads_service(const struct token *k, const char *service)
{
	return k->all || listed(k->services, k->nservices, service);
}
