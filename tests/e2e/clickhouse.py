"""A real ClickHouse server for tests and benches: Debian's clickhouse-server started on a
loopback port with a throwaway data directory and a config written here, stopped at the end.
log_queries=True keeps system.query_log (the bench reads where a query's time went)."""
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from fleet import free_port

SERVER = shutil.which("clickhouse-server") or "/usr/sbin/clickhouse-server"

CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>{dir}/log/server.log</log>
        <errorlog>{dir}/log/server.err.log</errorlog>
        <size>10M</size>
        <count>2</count>
    </logger>
    <http_port>{http}</http_port>
    <tcp_port>{tcp}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <path>{dir}/data/</path>
    <tmp_path>{dir}/tmp/</tmp_path>
    <user_files_path>{dir}/user_files/</user_files_path>
    <format_schema_path>{dir}/format_schemas/</format_schema_path>
    <users_config>{dir}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
    <query_log>
        <database>system</database>
        <table>query_log</table>
        <flush_interval_milliseconds>500</flush_interval_milliseconds>
    </query_log>
</yandex>
"""

USERS = """<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>4000000000</max_memory_usage>
        <log_queries>{log_queries}</log_queries></default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
"""


class ClickHouse:
    """clickhouse-server on 127.0.0.1 (HTTP port self.http) with its data in a temp dir."""

    def __init__(self, workdir=None, log_queries=False, prefix=()):
        """prefix: a command the server and its queries run under (nsenter --net=...), for
        an aggregator in a network namespace of its own."""
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="aperture-ch-"))
        self.http = free_port()
        self.tcp = free_port()
        self.proc = None
        self.prefix = list(prefix)
        for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "config.xml").write_text(CONFIG.format(dir=self.dir, http=self.http,
                                                           tcp=self.tcp))
        (self.dir / "users.xml").write_text(USERS.format(log_queries=int(log_queries)))

    def url(self, db):
        return f"clickhouse://127.0.0.1:{self.http}/{db}"

    def start(self, timeout=60):
        self.proc = subprocess.Popen(self.prefix + [SERVER,
                                                    f"--config-file={self.dir / 'config.xml'}"],
                                     cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=open(self.dir / "log" / "stderr", "ab"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("clickhouse-server exited: " + self.errors())
            try:
                if self.query("SELECT 1") == "1\n":
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("clickhouse-server did not answer: " + self.errors())

    def errors(self):
        out = ""
        for name in ("stderr", "server.err.log"):
            p = self.dir / "log" / name
            if p.exists():
                out += p.read_text(errors="replace")[-2000:]
        return out

    def query(self, sql, timeout=30):
        """The answer to sql as text (TabSeparated); raises on an HTTP error."""
        url = f"http://127.0.0.1:{self.http}/?" + urllib.parse.urlencode({"query": sql})
        if self.prefix:
            out = subprocess.run(self.prefix + ["curl", "-sS", "-f", "-m", str(timeout), "-d",
                                                "", url], capture_output=True)
            if out.returncode:
                raise OSError(f"{sql}: {out.stderr.decode(errors='replace')}")
            return out.stdout.decode()
        req = urllib.request.Request(url, data=b"", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.read().decode()
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{sql}: {e.code} {e.read().decode(errors='replace')}")

    def query_body(self, sql, data, timeout=300):
        """An INSERT named in the URL with its rows (text) as the body."""
        url = f"http://127.0.0.1:{self.http}/?" + urllib.parse.urlencode({"query": sql})
        req = urllib.request.Request(url, data=data.encode(), method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read().decode()

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
