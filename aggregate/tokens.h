/* Who may upload and read: the tokens file.
 *
 *   # comment
 *   <token> node <node-name>                  uploads only as that node, reads that node
 *   <token> read *                            reads everything
 *   <token> read node:<n>[,service:<s>...]    reads only those nodes and services
 */
#ifndef APERTURE_AGGREGATE_TOKENS_H
#define APERTURE_AGGREGATE_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

struct token;
struct tokens;

/* The whole of a file holding a secret (a token, a TLS key), whitespace around it trimmed;
 * NULL (errno set) when unreadable. The caller frees it. */
char *secret_file_read(const char *path);

/* Loads path; on a bad line -EINVAL with why saying which. */
int tokens_load(const char *path, struct tokens **out, char *why, size_t why_size);
void tokens_free(struct tokens *t);

/* The token a bearer value names, or NULL. */
const struct token *tokens_find(const struct tokens *t, const char *bearer);

/* The node a token uploads as, or NULL for a read token. */
const char *token_node(const struct token *k);
bool token_reads_all(const struct token *k);
bool token_reads_node(const struct token *k, const char *node);
bool token_reads_service(const struct token *k, const char *service);

#endif
