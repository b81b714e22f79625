/* What every store derives the same way from a batch: a target's service, its labels as
 * text, a stack's folded text, and the stable 64-bit hash (FNV-1a) keys are made of. */
#ifndef APERTURE_AGGREGATE_BATCH_NAMES_H
#define APERTURE_AGGREGATE_BATCH_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fs/tree.h"
#include "sync/wire.h"

#define AGG_FNV_BASIS 0xcbf29ce484222325ULL

uint64_t agg_fnv1a(uint64_t h, const void *data, size_t len);
/* A stack's hash h (of its frames) continued with its lines, if it has a line that is not 0:
 * a stack without lines keeps the key it had before stacks had lines. */
uint64_t agg_lines_hash(uint64_t h, const Aperture__Sync__V1__Stack *st);
/* Whether a stack of a batch has lines (one per frame, some not 0). */
bool agg_has_lines(const Aperture__Sync__V1__Stack *st);
/* A target's service, as a directory name: its service label, else its comm; '/' and
 * control characters become '_', "." and ".." get a leading '_'. */
void agg_service_of(const Aperture__Sync__V1__Target *t, char *out, size_t size);
/* "k=v,k=v" (malloc'd), or NULL without memory. */
char *agg_labels_text(const Aperture__Sync__V1__Target *t);
/* The folded text of stack i of b (malloc'd), or NULL without memory. */
char *agg_stack_text(const WireBatch *b, uint32_t i);

/* A target's latest-state texts by enum tree_text (NULL or "" = unchanged). */
void agg_target_texts(const Aperture__Sync__V1__Target *t, const char *out[TREE_TEXT_NR]);

#endif
