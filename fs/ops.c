/* The FUSE low-level operations. The low-level API lets a request be answered later from
 * another thread: slow renders go to the render pool and free the FUSE worker at once. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "daemon/pidns.h"
#include "daemon/aperture.h"
#include "daemon/proc_identity.h"
#include "fs/fs_internal.h"

/* Directories change only when processes come and go; a file's size changes with every
 * render, so its attributes are never cached. */
#define DIR_TIMEOUT_S 1.0

/* The longest value a control file takes, newline included. A write() longer than FUSE's
 * max_write (128 KiB and more) reaches us as several WRITE requests; its first is longer than
 * this, so it fails, and the kernel fails the whole write() with its error. */
#define CONTROL_VALUE_MAX 4096

struct open_file {
	struct handle h;
	struct fs *fs;
	struct node_ref ref;
	struct snapshot *snap; /* NULL when opened only for writing */
	pid_t opener;
	/* Where the last value written through this open ended: the offset at which the next
	 * write() of it arrives. */
	_Atomic off_t next_write;
};

struct dir_listing {
	struct handle h;
	char *buf;
	size_t len;
};

static void open_file_destroy(struct handle *h)
{
	struct open_file *of = (struct open_file *)h;

	if (of->snap) {
		snapshot_table_closed(of->fs->snaps, of->ref.ino, of->opener);
		snapshot_unref(of->snap);
	}
	free(of);
}

static void dir_listing_destroy(struct handle *h)
{
	struct dir_listing *l = (struct dir_listing *)h;

	free(l->buf);
	free(l);
}

static struct open_file *open_file_get(struct fs *fs, const struct fuse_file_info *fi)
{
	return (struct open_file *)handle_get(fs->handles, fi->fh);
}

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct caller caller_of(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return (struct caller){ .uid = ctx->uid, .gid = ctx->gid, .tid = ctx->pid };
}

/* Snapshots are handed from a stat to the next open by process: FUSE gives the thread id,
 * and a program may stat in one thread and read in another. */
static pid_t caller_process(const struct caller *c)
{
	pid_t tgid;

	return proc_tgid(c->tid, &tgid) ? c->tid : tgid;
}

static bool is_dir(const struct node_ref *ref)
{
	return S_ISDIR(ref->node->mode);
}

/* Resolves ino for the caller: a reader in another PID namespace than the daemon's sees
 * targets/ through its own view (daemon/pidns.h) and reaches no other view's nodes. */
static int resolve_for(fuse_req_t req, fuse_ino_t ino, struct node_ref *ref)
{
	const struct tree *t = fs_of(req)->tree;
	uint32_t view;
	int err = tree_resolve(t, ino, ref);

	if (err || !t->pidns || (!ref->pid && ref->node->dynamic != NODE_TARGETS))
		return err;
	err = pidns_view_of(t->pidns, fuse_req_ctx(req)->pid, &view);
	if (err)
		return err == -ENOSPC ? err : -ENOENT;
	if (!ref->pid) {
		ref->view = view;
		return 0;
	}
	return tree_check_view(t, ref, view);
}

/* The name of a process or thread directory means another process to a reader in another
 * PID namespace: the kernel must ask again at every path walk. */
static bool named_by_pid(const struct node_ref *ref)
{
	return ref->node == &fs_target_nodes[0] || ref->node == &fs_thread_nodes[0];
}

static int fill_attr(struct fs *fs, const struct node_ref *ref, const struct snapshot *snap,
		     struct stat *st)
{
	int err;

	memset(st, 0, sizeof(*st));
	err = access_owner(ref, &st->st_uid, &st->st_gid);
	if (err)
		return err;
	st->st_ino = ref->ino;
	st->st_mode = ref->node->mode;
	st->st_nlink = is_dir(ref) ? 2 : 1;
	st->st_blksize = 4096;
	if (snap) {
		st->st_size = snap->len;
		st->st_blocks = (snap->len + 511) / 512;
		st->st_mtim = st->st_ctim = st->st_atim = snap->when;
	} else {
		st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec = fs->tree->started;
	}
	return 0;
}

static int render(struct fs *fs, const struct node_ref *ref, struct snapshot **out)
{
	char *data;
	size_t len;
	int err = tree_render(fs->tree, ref, &data, &len);

	if (err)
		return err;
	*out = snapshot_new(data, len);
	return *out ? 0 : -ENOMEM;
}

static void reply_entry(fuse_req_t req, struct fs *fs, const struct node_ref *ref)
{
	struct fuse_entry_param e = { .ino = ref->ino };
	int err = fill_attr(fs, ref, NULL, &e.attr);

	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	e.entry_timeout = named_by_pid(ref) ? 0 : DIR_TIMEOUT_S;
	e.attr_timeout = is_dir(ref) ? DIR_TIMEOUT_S : 0;
	fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct caller c = caller_of(req);
	struct node_ref dir, ref;
	int err;

	err = resolve_for(req, parent, &dir);
	if (!err && !S_ISDIR(dir.node->mode))
		err = -ENOTDIR;
	if (!err && (dir.pid || dir.scope))
		err = access_check(&c, &dir, X_OK);
	if (!err)
		err = tree_lookup(fs->tree, &dir, name, &ref);
	if (err)
		fuse_reply_err(req, -err);
	else
		reply_entry(req, fs, &ref);
}

static void reply_attr_of(fuse_req_t req, struct fs *fs, const struct node_ref *ref,
			  const struct snapshot *snap)
{
	struct stat st;
	int err = fill_attr(fs, ref, snap, &st);

	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, is_dir(ref) ? DIR_TIMEOUT_S : 0);
}

/* Work a render-pool thread does for a request, then answers it. */
struct render_job {
	struct fs *fs;
	fuse_req_t req;
	struct node_ref ref;
	pid_t process;
	bool for_open;
	struct fuse_file_info fi; /* a copy: libfuse's lives on its worker's stack */
};

/* The kernel's idea of the file's size becomes at least this open's: sendfile() and splice()
 * (busybox cat, cp) read through the page cache up to that size even from a FOPEN_DIRECT_IO
 * file, before the kernel fix "fuse: use copy_splice_read for FOPEN_DIRECT_IO" (2026; 6.5 to
 * 6.18 lack it), and a lookup without a stat said 0. Storing the last byte sets it (a store
 * of none does not); a larger size left by an earlier open shrinks to len at the first short
 * read. Pages are read through op_read with this open's handle: this open's snapshot. */
static void tell_size(struct fs *fs, fuse_ino_t ino, const struct snapshot *snap)
{
	struct fuse_bufvec last = FUSE_BUFVEC_INIT(1);

	if (!snap->len)
		return;
	last.buf[0].mem = snap->data + snap->len - 1;
	(void)fuse_lowlevel_notify_store(fs->se, ino, snap->len - 1, &last, 0);
}

static void finish_open(struct fs *fs, fuse_req_t req, struct fuse_file_info *fi,
			const struct node_ref *ref, pid_t opener, struct snapshot *snap)
{
	struct open_file *of = calloc(1, sizeof(*of));

	if (!of) {
		snapshot_unref(snap);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	of->fs = fs;
	of->ref = *ref;
	of->snap = snap;
	of->opener = opener;
	/* Every read comes to us and is served from this open's snapshot: the page cache is
	 * per inode and would mix two readers' snapshots. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (snap) {
		snapshot_table_opened(fs->snaps, ref->ino, opener, snap);
		tell_size(fs, ref->ino, snap);
	}
	fi->fh = handle_add(fs->handles, &of->h, open_file_destroy);
	/* An interrupted opener gets no file: no release will come for this open. */
	if (fuse_reply_open(req, fi))
		handle_remove(fs->handles, fi->fh);
}

static void run_render_job(void *arg)
{
	struct render_job *job = arg;
	struct snapshot *snap = NULL;
	int err;

	/* The test delay stands in for a slow view: fast files (enable, status) stay fast. */
	if (job->fs->render_delay_ms && job->ref.node->slow)
		usleep(job->fs->render_delay_ms * 1000);
	err = render(job->fs, &job->ref, &snap);
	if (err) {
		fuse_reply_err(job->req, -err);
	} else if (job->for_open) {
		finish_open(job->fs, job->req, &job->fi, &job->ref, job->process, snap);
	} else {
		snapshot_table_stash(job->fs->snaps, job->ref.ino, job->process, snap);
		reply_attr_of(job->req, job->fs, &job->ref, snap);
		snapshot_unref(snap);
	}
	free(job);
}

/* Renders ref for a getattr (for_open false) or an open, in the pool when slow. Answers req
 * in every case. */
static void render_then_reply(fuse_req_t req, const struct node_ref *ref, pid_t process,
			      bool for_open, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct render_job *job = calloc(1, sizeof(*job));
	int err;

	if (!job) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*job = (struct render_job){ .fs = fs, .req = req, .ref = *ref, .process = process,
				    .for_open = for_open };
	if (fi)
		job->fi = *fi;
	if (!ref->node->slow) {
		run_render_job(job);
		return;
	}
	err = render_pool_submit(fs->pool, run_render_job, job);
	if (err) {
		free(job);
		fuse_reply_err(req, -err);
	}
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct caller c = caller_of(req);
	struct snapshot *snap;
	struct node_ref ref;
	int err;

	err = resolve_for(req, ino, &ref);
	if (!err && ref.pid && !is_dir(&ref))
		err = access_check(&c, &ref, 0);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (is_dir(&ref) || !ref.node->render) {
		reply_attr_of(req, fs, &ref, NULL);
		return;
	}
	/* fstat() arrives without the file handle: find the caller's open by its process. */
	snap = NULL;
	if (fi) {
		struct open_file *of = open_file_get(fs, fi);

		if (of && of->snap)
			snap = snapshot_ref(of->snap);
		if (of)
			handle_put(&of->h);
	}
	if (!snap)
		snap = snapshot_table_reading(fs->snaps, ino, caller_process(&c));
	if (snap) {
		reply_attr_of(req, fs, &ref, snap);
		snapshot_unref(snap);
		return;
	}
	/* A stat before an open: render now, and let this process's next open read this. */
	if (access_check(&c, &ref, R_OK)) {
		reply_attr_of(req, fs, &ref, NULL);
		return;
	}
	render_then_reply(req, &ref, caller_process(&c), false, NULL);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct caller c = caller_of(req);
	struct node_ref ref;
	int err;

	err = resolve_for(req, ino, &ref);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	/* Only the truncation of `echo 1 > file` on kernels without atomic O_TRUNC. */
	if (to_set != FUSE_SET_ATTR_SIZE || attr->st_size != 0 || !ref.node->write) {
		fuse_reply_err(req, EPERM);
		return;
	}
	err = access_check(&c, &ref, W_OK);
	if (err)
		fuse_reply_err(req, -err);
	else
		reply_attr_of(req, fs, &ref, NULL);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct caller c = caller_of(req);
	struct node_ref ref;
	int err;

	err = resolve_for(req, ino, &ref);
	if (!err)
		err = access_check(&c, &ref, mask & (R_OK | W_OK | X_OK));
	fuse_reply_err(req, -err);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct caller c = caller_of(req);
	int acc = fi->flags & O_ACCMODE;
	bool reads = acc != O_WRONLY, writes = acc != O_RDONLY;
	struct snapshot *snap;
	pid_t process;
	struct node_ref ref;
	int err;

	err = resolve_for(req, ino, &ref);
	if (!err && is_dir(&ref))
		err = -EISDIR;
	if (!err)
		err = access_check(&c, &ref, (reads ? R_OK : 0) | (writes ? W_OK : 0));
	if (!err && ((reads && !ref.node->render) || (writes && !ref.node->write)))
		err = -EACCES;
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (!reads) {
		finish_open(fs, req, fi, &ref, 0, NULL);
		return;
	}
	process = caller_process(&c);
	snap = snapshot_table_take(fs->snaps, ino, process);
	if (snap) {
		finish_open(fs, req, fi, &ref, process, snap);
		return;
	}
	render_then_reply(req, &ref, process, true, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct open_file *of = open_file_get(fs_of(req), fi);

	if (!of || !of->snap) {
		fuse_reply_err(req, EBADF);
	} else if (off < 0 || (size_t)off >= of->snap->len) {
		fuse_reply_buf(req, NULL, 0);
	} else {
		if (size > of->snap->len - off)
			size = of->snap->len - off;
		fuse_reply_buf(req, of->snap->data + off, size);
	}
	handle_put(of ? &of->h : NULL);
}

/* 0, or -EFBIG for a value too long to be one, -EINVAL for a piece of a split write(); the
 * live daemon's /status says why, naming the file. */
static int write_fits(struct fs *fs, const struct node_ref *ref, size_t size, off_t off,
		      off_t next_write)
{
	struct aperture *a = fs->tree->a;
	char where[32] = "";

	if (ref->pid)
		snprintf(where, sizeof(where), "targets/%d/", (int)ref->pid);
	if (size > CONTROL_VALUE_MAX) {
		if (a)
			aperture_set_error(a, "%s%s: a value is at most %d bytes", where,
					   ref->node->name, CONTROL_VALUE_MAX);
		return -EFBIG;
	}
	if (off != 0 && off != next_write) {
		if (a)
			aperture_set_error(a, "%s%s: a write at offset %lld is not a whole value",
					   where, ref->node->name, (long long)off);
		return -EINVAL;
	}
	return 0;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct open_file *of = open_file_get(fs, fi);
	int err;

	if (!of) {
		fuse_reply_err(req, EBADF);
		return;
	}
	/* One value per write(): the write itself fails when the value is bad. A WRITE at any
	 * other offset than the start or where the last value ended is a later piece of one
	 * write(), sent (maybe at once, with async direct I/O) beside its refused first. A file
	 * that holds lines (config/rules) takes the later writes of one open as more of its
	 * text. */
	err = write_fits(fs, &of->ref, size, off, atomic_load(&of->next_write));
	of->ref.write_offset = off;
	if (!err)
		err = of->ref.node->write(fs->tree->a, &of->ref, buf, size);
	if (err) {
		fuse_reply_err(req, -err);
	} else {
		atomic_store(&of->next_write, off + size);
		fuse_reply_write(req, size);
	}
	handle_put(&of->h);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	handle_remove(fs_of(req)->handles, fi->fh);
	fuse_reply_err(req, 0);
}

static int listing_add(fuse_req_t req, struct dir_listing *l, const char *name, uint64_t ino,
		       mode_t mode)
{
	struct stat st = { .st_ino = ino, .st_mode = mode };
	size_t need = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
	char *bigger = realloc(l->buf, l->len + need);

	if (!bigger)
		return -ENOMEM;
	l->buf = bigger;
	fuse_add_direntry(req, l->buf + l->len, need, name, &st, l->len + need);
	l->len += need;
	return 0;
}

struct listing_ctx {
	fuse_req_t req;
	struct dir_listing *l;
};

static int listing_add_entry(void *ctx, const char *name, uint64_t ino, mode_t mode)
{
	struct listing_ctx *lc = ctx;

	return listing_add(lc->req, lc->l, name, ino, mode);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct caller c = caller_of(req);
	struct dir_listing *l;
	struct node_ref ref;
	int err;

	err = resolve_for(req, ino, &ref);
	if (!err && !is_dir(&ref))
		err = -ENOTDIR;
	if (!err)
		err = access_check(&c, &ref, R_OK);
	l = err ? NULL : calloc(1, sizeof(*l));
	if (!err && !l)
		err = -ENOMEM;
	/* The listing is made once, at opendir, so a long readdir sees one consistent list. */
	if (!err)
		err = listing_add(req, l, ".", ino, S_IFDIR);
	if (!err) {
		struct listing_ctx lc = { .req = req, .l = l };

		err = listing_add(req, l, "..", tree_parent_ino(fs->tree, &ref), S_IFDIR);
		if (!err)
			err = tree_list(fs->tree, &ref, listing_add_entry, &lc);
	}
	if (err) {
		if (l)
			free(l->buf);
		free(l);
		fuse_reply_err(req, -err);
		return;
	}
	fi->fh = handle_add(fs->handles, &l->h, dir_listing_destroy);
	if (fuse_reply_open(req, fi))
		handle_remove(fs->handles, fi->fh);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dir_listing *l = (struct dir_listing *)handle_get(fs_of(req)->handles, fi->fh);

	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (off < 0 || (size_t)off >= l->len) {
		fuse_reply_buf(req, NULL, 0);
	} else {
		/* A slice may end inside an entry: the kernel drops the partial entry and asks
		 * again from the offset of the last whole one. */
		if (size > l->len - off)
			size = l->len - off;
		fuse_reply_buf(req, l->buf + off, size);
	}
	handle_put(&l->h);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	handle_remove(fs_of(req)->handles, fi->fh);
	fuse_reply_err(req, 0);
}

/* The tree's names are the daemon's: nothing is made, removed or renamed from outside.
 * EPERM, as /sys answers, tells tools (mkdir, rm, mv, ln, touch) it is not allowed, where
 * the default ENOSYS reads as a broken filesystem. */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	fuse_reply_err(req, EPERM);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fuse_reply_err(req, EPERM);
}

static void op_remove(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EPERM);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EPERM);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EPERM);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EPERM);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	fuse_reply_err(req, EPERM);
}

const struct fuse_lowlevel_ops fs_ops = {
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.access = op_access,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_remove,
	.rmdir = op_remove,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.create = op_create,
};
