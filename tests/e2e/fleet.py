"""The aggregator for end-to-end tests: starting a real one on loopback, building batches
(sync/batch.proto, compiled with protoc at import time) and talking HTTP to it."""
import gzip
import http.client
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from helpers import APERTURE, REPO, mounted, wait_for

_PB_DIR = tempfile.mkdtemp(prefix="aperture-pb-")
subprocess.run(["protoc", f"--python_out={_PB_DIR}", f"-I{REPO / 'sync'}",
                str(REPO / "sync" / "batch.proto")], check=True)
sys.path.insert(0, _PB_DIR)
import batch_pb2  # noqa: E402

HEADERS = {"Content-Type": "application/x-aperture-batch", "Content-Encoding": "gzip",
           "X-Aperture-Batch-Version": "1"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def batch(node, boot_id, seq, targets, created=None, node_status=None, version=1):
    """A Batch. targets: dicts with pid, start_time, comm, labels ({k: v}), profiles
    {type: {sec: {(frame, ...): count}}}, sys [{kind, a, b, addr, holder, stack, count,
    total_ns, max_ns, hist}], blocking [{time_ns, dur_us, tid, thread, stack: (frames)}], and
    the text fields (status, deadlocks, ...) by name."""
    b = batch_pb2.Batch(version=version, node=node, boot_id=boot_id, seq=seq,
                        created_unix=created or int(time.time()), part=0, parts=1)
    strings, frames, stacks = {"": 0}, {}, {}
    b.strings.append("")

    def string(s):
        if s not in strings:
            strings[s] = len(b.strings)
            b.strings.append(s)
        return strings[s]

    def frame(name):
        if name not in frames:
            frames[name] = len(b.frames)
            b.frames.add(name=string(name), module=string("/usr/bin/" + name.split(";")[0]))
        return frames[name]

    def stack(names):
        if names not in stacks:
            stacks[names] = len(b.stacks)
            b.stacks.add(frames=[frame(n) for n in names])
        return stacks[names]

    for t in targets:
        pt = b.targets.add(pid=t["pid"], start_time=t.get("start_time", 1000),
                           comm=t.get("comm", "app"), state=t.get("state", "enabled"),
                           kernel_boot_id=t.get("kernel_boot_id", "k1"))
        for k, v in t.get("labels", {}).items():
            pt.labels.add(key=k, value=v)
        for field in ("status", "deadlocks", "deadlocks_json", "threads_dump", "threads_busy",
                      "exe", "jvm_status", "has_jvm", "runtime"):
            if field in t:
                setattr(pt, field, t[field])
        if "sys" in t:
            pt.sys.SetInParent()
            for row in t["sys"]:
                row = dict(row)
                for key in ("holder", "stack"):
                    if key in row:
                        row[key] = string(row[key])
                pt.sys.rows.add(**row)
        for ev in t.get("blocking", []):
            ev = dict(ev)
            ev["stack"] = stack(tuple(ev["stack"]))
            pt.blocking.add(**ev)
        for ptype, secs in t.get("profiles", {}).items():
            pr = pt.profiles.add(type=ptype, unit="samples",
                                 period_ns=10101010 if ptype == "cpu" else 0)
            for sec, counts in sorted(secs.items()):
                s = pr.seconds.add(sec=sec)
                for names, n in counts.items():
                    s.stacks.append(stack(tuple(names)))
                    s.counts.append(n)
    if node_status:
        b.node_status.CopyFrom(batch_pb2.NodeStatus(**node_status))
    return b


def encode(b):
    return gzip.compress(b.SerializeToString())


class Aggregator:
    """`aperture aggregate` on 127.0.0.1 with its own tokens file and store: its own SQLite
    file unless given a store URL (clickhouse://...)."""

    def __init__(self, workdir, tokens=None, extra=(), mount=None, store=None):
        self.dir = Path(workdir)
        self.db = self.dir / "agg.db"
        self.store = store or f"sqlite:{self.db}"
        self.tokens = self.dir / "tokens"
        self.port = free_port()
        self.mount = mount
        self.extra = list(extra)
        self.log = self.dir / "agg.log"
        self.proc = None
        if tokens is not None:
            self.tokens.write_text(tokens)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, extra=()):
        args = [str(APERTURE), "aggregate", "--listen", f"127.0.0.1:{self.port}",
                "--store", self.store]
        args += ["--tokens", str(self.tokens)] if self.tokens.exists() else ["--insecure"]
        if self.mount:
            args += ["--mount", str(self.mount)]
        args += self.extra + list(extra)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "ab"))
        wait_for(self._ready, 10, "the aggregator to answer")
        if self.mount:
            wait_for(lambda: mounted(self.mount), 10, "the aggregator's mount")
        return self

    def _ready(self):
        assert self.proc.poll() is None, self.log.read_text()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def request(self, method, path, body=None, token=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = dict(headers or {})
        if token:
            h["Authorization"] = f"Bearer {token}"
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, r

    def post(self, body, token, headers=HEADERS):
        if not isinstance(body, (bytes, bytearray)):
            body = encode(body)
        return self.request("POST", "/v1/batches", body, token, headers)[:2]

    def get(self, path, token):
        status, data, _ = self.request("GET", path, token=token)
        return status, data

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=15)
        if self.mount and mounted(self.mount):
            subprocess.run(["umount", "-l", str(self.mount)], check=False)


def folded(text):
    """Folded text into {stack: count}."""
    out = {}
    for line in text.decode().splitlines() if isinstance(text, bytes) else text.splitlines():
        if line.strip():
            stack, n = line.rsplit(" ", 1)
            out[stack] = out.get(stack, 0) + int(n)
    return out

