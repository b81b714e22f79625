/* The JVM agent as a collector (collectors/collector.h): for a HotSpot JVM, attaching the agent
 * in the background; for any other process it does not apply. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/collector.h"
#include "collectors/jvm/jvm.h"

struct jvm_ops {
	struct jvm_collector *jvm;
	const _Atomic uint64_t *attach_on; /* config/jvm_attach */
};

static int ops_create(struct collector_env *env, void **self, char *errbuf, size_t errlen)
{
	struct jvm_ops *o = calloc(1, sizeof(*o));
	int err;

	if (!o)
		return -ENOMEM;
	err = jvm_collector_new(env->jvm_agent, env->jvm_alloc_interval, env->cpu, &o->jvm);
	if (err) {
		snprintf(errbuf, errlen, "%s", strerror(-err));
		free(o);
		return err;
	}
	o->attach_on = env->jvm_attach;
	*self = o;
	return 0;
}

static void ops_destroy(void *self)
{
	struct jvm_ops *o = self;

	jvm_collector_free(o->jvm);
	free(o);
}

/* Whatever becomes of the attach, native profiling goes on, and jvm/status says why. */
static int ops_attach(void *self, const struct collector_target *t, char *errbuf, size_t errlen)
{
	struct jvm_ops *o = self;
	struct jvm_profiles jp = {
		.alloc = t->jvm_alloc,
		.alloc_objects = t->jvm_alloc_objects,
		.monitors = t->jvm_monitors,
	};
	int err;

	if (!t->jvm) {
		snprintf(errbuf, errlen, "not a JVM");
		return -EOPNOTSUPP;
	}
	if (!atomic_load(o->attach_on)) {
		snprintf(errbuf, errlen, "config/jvm_attach is 0");
		return -EOPNOTSUPP;
	}
	err = jvm_collector_enable(o->jvm, t->pid, t->start_time, t->uid, t->gid, &jp);
	if (err)
		snprintf(errbuf, errlen, "could not start attaching: %s", strerror(-err));
	return err;
}

/* The Java frames of the last samples go to the cpu collector before it detaches (the
 * registry detaches in the reverse order of attaching). */
static uint64_t ops_detach(void *self, pid_t pid, int64_t now)
{
	struct jvm_ops *o = self;

	jvm_collector_drain_java(o->jvm, pid);
	jvm_collector_disable(o->jvm, pid);
	return 0;
}

static void ops_forget(void *self, pid_t pid)
{
	struct jvm_ops *o = self;

	jvm_collector_forget(o->jvm, pid);
}

/* The attach's outcome stays readable after a disable, until the record goes. */
static void ops_target_status(void *self, const struct collector_target *t, bool attached,
			      FILE *out)
{
	struct jvm_ops *o = self;

	if (t->jvm)
		jvm_collector_state_line(o->jvm, t->pid, out);
}

const struct collector_ops jvm_collector_ops = {
	.name = "jvm",
	.create = ops_create,
	.destroy = ops_destroy,
	.attach = ops_attach,
	.detach = ops_detach,
	.forget = ops_forget,
	.target_status = ops_target_status,
};

struct jvm_collector *jvm_ops_collector(void *self)
{
	return self ? ((struct jvm_ops *)self)->jvm : NULL;
}
