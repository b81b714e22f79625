/* The pure parts of the container support: NSpid, cgroup paths and what they name, and
 * labels. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "daemon/cgroup_id.h"
#include "daemon/pidns.h"
#include "daemon/rules.h"

#define ID64 "0a1a6335c15e2632e697c5a5ea33515aa3ad4e1d4e3becd071157a9ce709ac05"

static void test_nspid(void **state)
{
	pid_t pid = 0;

	assert_int_equal(pidns_parse_nspid("Name:\tx\nNStgid:\t3609\t1\nNSpid:\t3609\t1\n"
					   "NSpgid:\t3609\t1\n", &pid), 0);
	assert_int_equal(pid, 1);
	assert_int_equal(pidns_parse_nspid("Name:\tx\nNSpid:\t42\n", &pid), 0);
	assert_int_equal(pid, 42);
	assert_int_equal(pidns_parse_nspid("Name:\tx\nPid:\t42\n", &pid), -ENOENT);
}

static void test_cgroup_path_pick(void **state)
{
	char out[256];

	cgroup_path_pick("12:cpu:/x\n0::/system.slice/a.service\n", out, sizeof(out));
	assert_string_equal(out, "/system.slice/a.service");
	/* Hybrid: the unified path is "/", a controller's says where it runs. */
	cgroup_path_pick("9:name=systemd:/\n4:memory:/libpod_parent/libpod-" ID64 "\n0::/\n",
			 out, sizeof(out));
	assert_string_equal(out, "/libpod_parent/libpod-" ID64);
	cgroup_path_pick("1:cpu:/\n0::/\n", out, sizeof(out));
	assert_string_equal(out, "/");
}

static void test_cgroup_id(void **state)
{
	struct cgroup_id id;

	cgroup_id_parse("/kubepods/burstable/pod1b2c3d4e-0000-1111-2222-333344445555/" ID64,
			&id);
	assert_string_equal(id.container_id, ID64);
	assert_string_equal(id.pod_uid, "1b2c3d4e-0000-1111-2222-333344445555");
	assert_string_equal(id.qos_class, "Burstable");
	cgroup_id_parse("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-"
			"pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-" ID64 ".scope",
			&id);
	assert_string_equal(id.container_id, ID64);
	assert_string_equal(id.pod_uid, "1b2c3d4e-0000-1111-2222-333344445555");
	assert_string_equal(id.qos_class, "BestEffort");
	cgroup_id_parse("/kubepods/pod1b2c3d4e-0000-1111-2222-333344445555/crio-" ID64, &id);
	assert_string_equal(id.qos_class, "Guaranteed");
	cgroup_id_parse("/system.slice/docker-" ID64 ".scope", &id);
	assert_string_equal(id.container_id, ID64);
	assert_string_equal(id.pod_uid, "");
	assert_null(id.qos_class);
	cgroup_id_parse("/user.slice/user-1000.slice/session-2.scope", &id);
	assert_string_equal(id.container_id, "");
	/* 63 or 65 hex digits are no container id. */
	cgroup_id_parse("/x/libpod-" ID64 "0", &id);
	assert_string_equal(id.container_id, "");
}

static void test_labels(void **state)
{
	char why[200], labels[64] = "a=1 service=web";

	assert_int_equal(labels_check("cluster=prod zone=eu-1 app.kubernetes.io/name=x", why,
				      sizeof(why)), 0);
	assert_int_equal(labels_check("zone", why, sizeof(why)), -EINVAL);
	assert_int_equal(labels_check("=x", why, sizeof(why)), -EINVAL);
	assert_int_equal(labels_check("a=b;c", why, sizeof(why)), -EINVAL);
	assert_int_equal(labels_merge(labels, sizeof(labels), "service=checkout b=2"), 0);
	assert_string_equal(labels, "a=1 service=checkout b=2");
	/* A key is whole: "a" does not replace "ab". */
	assert_int_equal(labels_merge(labels, sizeof(labels), "ab=3"), 0);
	assert_string_equal(labels, "a=1 service=checkout b=2 ab=3");
	assert_int_equal(labels_merge(labels, 16, "c=4"), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nspid),
		cmocka_unit_test(test_cgroup_path_pick),
		cmocka_unit_test(test_cgroup_id),
		cmocka_unit_test(test_labels),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
