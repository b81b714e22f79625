"""deploy/k8s/: the manifests pass the Kubernetes API schema (kubernetes-models' validators,
generated from the API's OpenAPI spec), a broken one does not, and the DaemonSet asks for
what the daemon needs; deploy/image.sh builds the image, and its daemon starts and mounts in
a podman container given the DaemonSet's privileges, mounts and arguments, and its readiness
probe passes."""
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import REPO, mounted, read, wait_for
from podman import PODMAN, RUN, podman_ok, run, shared_parent  # noqa: F401 (fixture)

MANIFESTS = sorted((REPO / "deploy" / "k8s").glob("*.yaml"))
NODE_MODULES = Path("/usr/local/lib/aperture-tests/node_modules")
VALIDATE = Path(__file__).with_name("validate_manifests.cjs")
IMAGE = "localhost/aperture-e2e:latest"


def validate(*files):
    if not (NODE_MODULES / "kubernetes-models").is_dir():
        pytest.fail("kubernetes-models is not installed: run deploy/setup.sh")
    p = subprocess.run(["node", str(VALIDATE), *map(str, files)], capture_output=True,
                       text=True, env=dict(os.environ, NODE_PATH=str(NODE_MODULES)))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def docs():
    return [d for f in MANIFESTS for d in yaml.safe_load_all(f.read_text()) if d]


def find(kind, name=None):
    found = [d for d in docs() if d["kind"] == kind and (not name or
                                                        d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name or ''}: {len(found)} found"
    return found[0]


def test_every_manifest_passes_the_api_schema():
    results = validate(*MANIFESTS)
    assert [r for r in results if r["error"]] == []
    kinds = {r["kind"] for r in results}
    assert {"DaemonSet", "Deployment", "Service", "Secret", "StatefulSet", "Pod",
            "ConfigMap"} <= kinds, kinds


def test_the_validator_rejects_what_the_api_would(tmp_path):
    node = (REPO / "deploy" / "k8s" / "node.yaml").read_text()
    bad = {"propagation": node.replace("mountPropagation: Bidirectional",
                                       "mountPropagation: Sideways"),
           "type": node.replace("hostPID: true", "hostPID: \"yes\""),
           "required": node.replace("- name: aperture\n          image:", "- image:")}
    for what, text in bad.items():
        assert text != node, what
        (tmp_path / f"{what}.yaml").write_text(text)
    results = validate(*sorted(tmp_path.glob("*.yaml")))
    broken = {Path(r["file"]).stem: r["error"] for r in results if r["kind"] == "DaemonSet"}
    assert all(broken.values()) and len(broken) == 3, broken
    assert "mountPropagation" in broken["propagation"]
    assert "hostPID" in broken["type"]


def volume_mounts(pod_spec, container):
    c = next(c for c in pod_spec["containers"] if c["name"] == container)
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    return c, [(m, volumes[m["name"]]) for m in c.get("volumeMounts", [])]


def test_the_daemonset_asks_for_what_the_daemon_needs():
    spec = find("DaemonSet", "aperture-node")["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    c, mounts = volume_mounts(spec, "aperture")
    assert c["securityContext"]["privileged"] is True
    assert c["resources"]["limits"]["cpu"] and c["resources"]["limits"]["memory"]
    by_path = {m["mountPath"]: (m, v) for m, v in mounts}
    parent, vol = by_path["/var/lib/aperture"]
    assert parent["mountPropagation"] == "Bidirectional" and "hostPath" in vol
    assert by_path["/sys/kernel/debug"][1]["hostPath"]["path"] == "/sys/kernel/debug"
    assert by_path["/sys/fs/bpf"][1]["hostPath"]["path"] == "/sys/fs/bpf"
    tree = c["args"][-1]
    assert tree.startswith("/var/lib/aperture/") and c["args"][0] == "mount"
    assert c["readinessProbe"]["exec"]["command"][-2:] == ["status", tree]

    pod = find("Pod")["spec"]
    assert pod["shareProcessNamespace"] is True
    _, mounts = volume_mounts(pod, "profiler")
    m, v = next((m, v) for m, v in mounts if "hostPath" in v)
    assert v["hostPath"]["path"] == "/var/lib/aperture"  # the parent, not the tree
    assert m["mountPropagation"] == "HostToContainer" and not m.get("readOnly")


PROPAGATION = {"Bidirectional": "rshared", "HostToContainer": "rslave", None: "rprivate"}


@pytest.fixture
def node_container(podman_ok, scratch):
    """The image, run as the DaemonSet runs it: its privileges, its hostPath mounts (the
    parent directory in scratch), its ConfigMap and Secret as files, its arguments."""
    p = subprocess.run([str(REPO / "deploy" / "image.sh"), IMAGE], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ds = find("DaemonSet", "aperture-node")["spec"]["template"]["spec"]
    c, mounts = volume_mounts(ds, "aperture")
    parent = scratch / "node-parent"
    undo = shared_parent(parent)
    args = ["--privileged"] if c["securityContext"].get("privileged") else []
    args += ["--pid", "host"] if ds.get("hostPID") else []
    for m, v in mounts:
        if "hostPath" in v:
            src = parent if m["mountPath"] == "/var/lib/aperture" else Path(v["hostPath"]["path"])
            src.mkdir(parents=True, exist_ok=True)
        else:  # a ConfigMap or Secret: its items as files
            src = scratch / f"vol-{v['name']}"
            src.mkdir(exist_ok=True)
            source = v.get("configMap") or v.get("secret")
            kind = "ConfigMap" if "configMap" in v else "Secret"
            obj = find(kind, source.get("name") or source.get("secretName"))
            for key, value in (obj.get("data") or obj.get("stringData")).items():
                (src / key).write_text(value)
        opts = [PROPAGATION[m.get("mountPropagation")]] + (["ro"] if m.get("readOnly") else [])
        args += ["-v", f"{src}:{m['mountPath']}:{','.join(opts)}"]
    env = {e["name"]: "e2e-node" for e in c.get("env", [])}
    cmd = [a.replace("$(NODE_NAME)", env.get("NODE_NAME", "")) for a in c["args"]]
    name = "aperture-e2e-node"
    run(*PODMAN, "rm", "-f", "-t", "0", name, check=False)
    run(*RUN, "-d", "--name", name, *args, IMAGE, *cmd)
    tree = parent / Path(cmd[-1]).relative_to("/var/lib/aperture")
    yield name, tree, c
    run(*PODMAN, "stop", "-t", "15", name, check=False)
    logs = run(*PODMAN, "logs", name, check=False)
    run(*PODMAN, "rm", "-f", "-t", "0", name, check=False)
    if mounted(tree):
        subprocess.run(["umount", "-l", str(tree)], check=False)
    undo()
    print(logs.stdout, logs.stderr)


def test_the_image_runs_the_daemonset_s_daemon(node_container):
    name, tree, c = node_container

    def up():
        state = run(*PODMAN, "inspect", "--format", "{{.State.Status}}", name).stdout.strip()
        assert state == "running", run(*PODMAN, "logs", name, check=False).stderr
        return mounted(tree)
    wait_for(up, 60, "the containerized daemon to mount its tree", interval=0.5)
    # The mount reached the host through the Bidirectional parent.
    status = read(tree / "status")
    assert "uptime_s" in status and "rules: 2" in status, status
    assert "sync_url: http://aperture-aggregator" in status, status
    assert str(os.getpid()) in os.listdir(tree / "targets"), "hostPID: the host's processes"
    probe = c["readinessProbe"]["exec"]["command"]
    p = run(*PODMAN, "exec", name, *probe, check=False)
    assert p.returncode == 0 and "uptime_s" in p.stdout, (shlex.join(probe), p.stderr)
    # SIGTERM to the container's process, as the kubelet stops a pod, unmounts it cleanly.
    # (Not `podman stop`: with --pid host runc signals the whole cgroup through its freezer,
    # which fails on this machine's hybrid cgroups after an exec, and then SIGKILLs.)
    run(*PODMAN, "kill", "--signal", "TERM", name)
    assert run(*PODMAN, "wait", name, timeout=20).stdout.strip() == "0"
    assert not mounted(tree)
