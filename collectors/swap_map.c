#include <errno.h>
#include <stdbool.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "collectors/swap_map.h"

int swap_map_create(const struct swap_map_spec *spec, const char *name)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = spec->flags);
	int fd = bpf_map_create(spec->type, name, spec->key_size, spec->value_size,
				spec->max_entries, &opts);

	return fd < 0 ? -errno : fd;
}

int swap_map_set(struct bpf_map *outer, int fd)
{
	__u32 zero = 0;

	return bpf_map_update_elem(bpf_map__fd(outer), &zero, &fd, 0) ? -errno : 0;
}

int swap_map_init(struct swap_map *s, struct bpf_map *outer, const struct swap_map_spec *spec,
		  const char *name)
{
	s->outer = outer;
	s->spec = *spec;
	s->live = 0;
	s->fds[0] = swap_map_create(spec, name);
	s->fds[1] = s->fds[0] < 0 ? -1 : swap_map_create(spec, name);
	if (s->fds[1] < 0) {
		int err = s->fds[0] < 0 ? s->fds[0] : s->fds[1];

		swap_map_fini(s);
		return err;
	}
	return bpf_map__set_inner_map_fd(outer, s->fds[0]);
}

int swap_map_install(struct swap_map *s)
{
	return swap_map_set(s->outer, s->fds[s->live]);
}

int swap_map_swap(struct swap_map *s, int *old)
{
	int err = swap_map_set(s->outer, s->fds[!s->live]);

	if (err)
		return err;
	*old = s->fds[s->live];
	s->live = !s->live;
	return 0;
}

void swap_map_fini(struct swap_map *s)
{
	for (int i = 0; i < 2; i++) {
		if (s->fds[i] >= 0)
			close(s->fds[i]);
		s->fds[i] = -1;
	}
}

int swap_map_take_all(int fd, void *keys, void *values, uint32_t cap,
		      int (*each)(void *ctx, const void *keys, const void *values, uint32_t n),
		      void *ctx)
{
	__u64 in = 0, out = 0;
	bool first = true;
	int err, first_err = 0;

	for (;;) {
		__u32 got = cap;

		err = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &out, keys, values,
						      &got, NULL);
		if (err && err != -ENOENT)
			return err;
		if (got) {
			int cb_err = each(ctx, keys, values, got);

			if (cb_err && !first_err)
				first_err = cb_err;
		}
		if (err == -ENOENT)
			return first_err;
		in = out;
		first = false;
	}
}
