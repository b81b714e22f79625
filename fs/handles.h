/* Open files and directories, by the id FUSE hands back as fh.
 *
 * The kernel may send RELEASE while a READ of the same file is still being answered (the
 * reader was interrupted, then closed the file), and libfuse runs them on two threads. So fh
 * is never a pointer: it is an id, and a request takes a reference for as long as it uses
 * the object. A request whose handle is already released finds nothing and answers EBADF,
 * which nobody is waiting for any more. */
#ifndef APERTURE_FS_HANDLES_H
#define APERTURE_FS_HANDLES_H

#include <stdatomic.h>
#include <stdint.h>
#include <uthash.h>

struct handle {
	uint64_t id;
	atomic_int refs;
	void (*destroy)(struct handle *h);
	UT_hash_handle hh;
};

struct handle_table;

int handle_table_new(struct handle_table **out);
/* Destroys every handle still in the table. */
void handle_table_free(struct handle_table *t);

/* Adds h (refs 1, owned by the table from now on) and returns its id, never 0. */
uint64_t handle_add(struct handle_table *t, struct handle *h, void (*destroy)(struct handle *));
/* The handle with this id, referenced, or NULL if it is gone. */
struct handle *handle_get(struct handle_table *t, uint64_t id);
void handle_put(struct handle *h);
/* Takes the handle out of the table and drops the table's reference. */
void handle_remove(struct handle_table *t, uint64_t id);

#endif
