/* Threads that do slow work (rendering views) off the FUSE worker threads, so one slow render
 * never stalls a `cat enable` elsewhere in the tree. Jobs reply to FUSE themselves. */
#ifndef APERTURE_FS_RENDER_POOL_H
#define APERTURE_FS_RENDER_POOL_H

struct render_pool;

int render_pool_new(unsigned nthreads, struct render_pool **out);
/* Runs every job still queued, then joins the threads. */
void render_pool_free(struct render_pool *p);
/* Queues fn(arg). -EAGAIN when the queue is full (the caller answers EAGAIN). */
int render_pool_submit(struct render_pool *p, void (*fn)(void *arg), void *arg);

#endif
