"""A private NFS-Ganesha server for tests.

Debian's ganesha.nfsd runs as a direct child of the test process, on a free
TCP port of 127.0.0.1 (NFS and MOUNT on two explicit ports, no UDP, no NLM,
no RQUOTA), with its config, log, pid file and NFSv4 recovery directory in
a directory the caller owns.  It is stopped by pid, never by name.

NFSv3 makes Ganesha register with rpcbind at start-up and it exits with
"Cannot register NFS V3 on TCP" when rpcbind is not there, so start()
first makes sure one is running on 127.0.0.1:111: an existing rpcbind is
reused and left alone; otherwise `rpcbind -f -w` is started as a direct
child of this process and stopped by pid when the process exits.  (It
listens on the wildcard address: Debian's rpcbind 1.2.6 aborts with a
double free when given -h 127.0.0.1.)
Clients must not rely on rpcbind's answers: every Ganesha re-registers at
start-up and unregisters at exit, so concurrent instances overwrite each
other.  url() therefore names both ports explicitly for libnfs.

API (everything else is internal):

    g = Ganesha(base, export_path, pseudo="/export",
                fsal="FSAL { Name = VFS; }", plugins_dir=None)
    g.start(timeout=30)   # returns once the log says NFS SERVER INITIALIZED,
                          # both ports accept TCP and a MOUNT of the export
                          # succeeds; raises GaneshaError with the log tail if
                          # the server dies or the export does not come up
                          # (the message quotes Ganesha's refusal line);
                          # start(expect_export=False) only waits for the
                          # server itself (for tests of refused exports)
    g.url("dir/file")     # nfs://127.0.0.1/export/dir/file?version=3&nfsport=..&mountport=..
                          # (url(path, version=4): ?version=4&nfsport=..)
    g.log                 # path of Ganesha's log file (g.stderr: its stderr)
    g.log_text()          # its content so far
    g.wait_log(regex, timeout=10)  # the first match (re.Match) or None
    g.stop(timeout=10)    # SIGTERM by pid, SIGKILL by pid after timeout; exit code
    g.kill9()             # SIGKILL by pid (a crash)
    g.reload()            # rewrite the config, SIGHUP by pid, wait for the re-read
    g.restart(timeout=30) # stop(), then start() on the same ports and files
                          # (start() after stop() or kill9() also keeps them)
    g.pid, g.port, g.mnt_port, g.conf

`fsal` is the text of the export's FSAL block; `plugins_dir` defaults to
Debian's FSAL directory.  `core_extra`, `export_extra` and `log_extra` are
raw config lines added to NFS_CORE_PARAM, EXPORT and a LOG block; `env`
adds environment variables for ganesha.nfsd; `config`, a function of the
Ganesha object returning the whole config text, replaces the generated one
(it must use g.port, g.mnt_port, g.export_path, g.pseudo and g.recovery); `wrapper`
is a command that runs ganesha.nfsd in the same process (e.g. valgrind); `command`,
a function of the Ganesha object called once the config is written, returns
the command line instead of the usual one (a systemd unit's ExecStart=; it
must use g.log, g.conf and g.pidfile).  Ganesha's stderr goes to <base>/ganesha.stderr.
Use as a context manager to stop the server on exit.
"""
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import time

GANESHA = shutil.which("ganesha.nfsd") or "/usr/bin/ganesha.nfsd"
RPCBIND = shutil.which("rpcbind") or "/usr/sbin/rpcbind"
DEBIAN_PLUGINS = "/usr/lib/x86_64-linux-gnu/ganesha"
HOST = "127.0.0.1"
READY = "NFS SERVER INITIALIZED"   # logged at NIV_EVENT once all listeners are up
# Ganesha keeps running without an export whose FSAL refused it; these say so.
EXPORT_REFUSED = re.compile(r"Could not create export for.*|No export entries found.*")


class GaneshaError(RuntimeError):
    pass


def _listening(port, host=HOST):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port():
    """A TCP port of 127.0.0.1 that nobody listens on right now.  Another
    process may still take it before Ganesha binds it; start() retries on
    a bind failure with new ports."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


_rpcbind = None  # our own rpcbind child, if we had to start one


def _stop_our_rpcbind():
    global _rpcbind
    p, _rpcbind = _rpcbind, None
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def ensure_rpcbind(timeout=10):
    """Make sure an rpcbind answers on 127.0.0.1:111.  Returns the pid of the
    one this process started, or None when an existing one is reused."""
    global _rpcbind
    if _rpcbind and _rpcbind.poll() is None:
        return _rpcbind.pid
    if _listening(111):
        return None
    _rpcbind = subprocess.Popen([RPCBIND, "-f", "-w"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    atexit.register(_stop_our_rpcbind)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if _listening(111):
            return _rpcbind.pid
        if _rpcbind.poll() is not None:
            err = _rpcbind.stderr.read().decode(errors="replace")
            _rpcbind = None
            if _listening(111):     # another test process won the race
                return None
            raise GaneshaError(f"rpcbind -f -w exited at once: {err.strip()}")
        time.sleep(0.05)
    raise GaneshaError("rpcbind did not listen on 127.0.0.1:111 in time")


class Ganesha:
    def __init__(self, base, export_path, pseudo="/export", fsal="FSAL { Name = VFS; }",
                 plugins_dir=None, export_id=1, core_extra="", export_extra="", log_extra="", env=None,
                 config=None, wrapper=(), command=None):
        self.base = os.path.abspath(base)
        self.export_path = os.path.abspath(export_path)
        self.pseudo = "/" + pseudo.strip("/")
        self.fsal = fsal
        self.plugins_dir = plugins_dir or DEBIAN_PLUGINS
        self.export_id = export_id
        self.core_extra = core_extra
        self.export_extra = export_extra
        self.log_extra = log_extra
        self.env = env
        self.config = config
        self.wrapper = list(wrapper)
        self.command = command
        self.conf = os.path.join(self.base, "ganesha.conf")
        self.log = os.path.join(self.base, "ganesha.log")
        self.pidfile = os.path.join(self.base, "ganesha.pid")
        self.stderr = os.path.join(self.base, "ganesha.stderr")
        self.recovery = os.path.join(self.base, "recovery")
        self.port = None
        self.mnt_port = None
        self.proc = None
        self.last_exit = None  # exit status of a start that died while starting
        self._log_offset = 0

    # -- configuration -------------------------------------------------
    def config_text(self):
        return f"""# Written by tests/lib/ganesha.py for one test server.
NFS_CORE_PARAM {{
    Bind_Addr = {HOST};
    NFS_Port = {self.port};
    MNT_Port = {self.mnt_port};
    NFS_Protocols = 3, 4;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Mount_Path_Pseudo = true;
    Plugins_Dir = "{self.plugins_dir}";
{self.core_extra}
}}
NFSV4 {{
    Graceless = true;
    Only_Numeric_Owners = true;
    RecoveryBackend = fs;
    RecoveryRoot = "{self.recovery}";
}}
NFS_KRB5 {{
    Active_krb5 = false;
}}
LOG {{
{self.log_extra}
}}
EXPORT {{
    Export_Id = {self.export_id};
    Path = "{self.export_path}";
    Pseudo = "{self.pseudo}";
    Protocols = 3, 4;
    Transports = TCP;
    SecType = sys;
    Squash = none;
    Access_Type = None;
    CLIENT {{
        Clients = {HOST};
        Access_Type = RW;
    }}
{self.export_extra}
    {self.fsal}
}}
"""

    def _write_config(self):
        os.makedirs(self.base, exist_ok=True)
        os.makedirs(self.recovery, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(self.config(self) if self.config else self.config_text())

    # -- lifecycle -----------------------------------------------------
    def start(self, timeout=30, expect_export=True):
        """Start the server; with expect_export (the default) also wait until
        the export answers a MOUNT.  Raises GaneshaError on failure."""
        if self.proc and self.proc.poll() is None:
            raise GaneshaError("ganesha already running")
        fixed_ports = self.port is not None
        for attempt in range(3):
            ensure_rpcbind()
            if not fixed_ports:
                self.port = free_port()
                self.mnt_port = free_port()
                while self.mnt_port == self.port:
                    self.mnt_port = free_port()
            try:
                self._start_once(timeout, expect_export)
                return self
            except GaneshaError:
                # Only what this start logged: older starts' lines in the
                # same log must not turn a crash into a retry (a retry with
                # a crash point armed by env starts a second armed server).
                retry = re.search(r"Cannot bind|Address already in use|Cannot register",
                                  self.log_text(since_start=True))
                if not retry or attempt == 2:
                    raise
                # A port taken between free_port() and bind, or rpcbind gone
                # (another test process stopped its own): try again.
                if not fixed_ports:
                    self.port = None
        return self

    def _start_once(self, timeout, expect_export):
        self._write_config()
        try:
            self._log_offset = os.path.getsize(self.log)
        except OSError:
            self._log_offset = 0
        if os.path.exists(self.pidfile):
            os.unlink(self.pidfile)
        # Sanitizer reports (a plugin built with PPL_SANITIZE) go to stderr.
        with open(self.stderr, "ab") as err:
            argv = (self.command(self) if self.command else
                    [GANESHA, "-F", "-L", self.log, "-f", self.conf, "-N", "NIV_EVENT", "-p", self.pidfile])
            self.proc = subprocess.Popen(
                [*self.wrapper, *argv],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=dict(os.environ, **self.env) if self.env else None)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                rc = self.last_exit = self.proc.returncode
                self.proc = None
                raise GaneshaError(f"ganesha.nfsd exited with {rc}:\n{self.tail_log()}")
            log = self.log_text(since_start=True)
            if READY in log and _listening(self.port) and _listening(self.mnt_port):
                if not expect_export:
                    return
                refused = EXPORT_REFUSED.search(log)
                if refused:
                    self.stop()
                    raise GaneshaError(f"ganesha.nfsd refused export {self.pseudo} "
                                       f"({refused.group(0).strip()}):\n{self.tail_log()}")
                if self._export_answers():
                    return
            time.sleep(0.1)
        self.kill9()
        raise GaneshaError(f"ganesha.nfsd did not bring up {self.pseudo} within {timeout}s:\n"
                           + self.tail_log())

    def _export_answers(self):
        """The export is up when a MOUNT of its pseudo path succeeds."""
        r = subprocess.run(["nfs-ls", self.url("")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=20)
        return r.returncode == 0

    def stop(self, timeout=10):
        """SIGTERM by pid, SIGKILL by pid if it has not exited in `timeout`
        seconds.  Returns the exit code (None if it was not running)."""
        p, self.proc = self.proc, None
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def kill9(self):
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def reload(self, timeout=10):
        """Rewrite the config (after changing fsal=... etc.) and send SIGHUP by
        pid: Ganesha re-reads its exports.  Returns once it logged that."""
        offset = os.path.getsize(self.log)
        self._write_config()
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(self.log, errors="replace") as f:
                f.seek(offset)
                if "Reread exports complete" in f.read():
                    return
            time.sleep(0.1)
        raise GaneshaError("ganesha.nfsd did not finish re-reading its exports:\n" + self.tail_log())

    def restart(self, timeout=30, expect_export=True):
        self.stop()
        return self.start(timeout=timeout, expect_export=expect_export)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- clients and logs ----------------------------------------------
    def url(self, path="", version=3):
        """A URL for libnfs (nfs-cp, nfs-cat, nfs-ls, ppl-mount) with the
        ports explicit, so that rpcbind is never asked.  NFSv3 by default;
        version=4 names the NFS port only (no MOUNT protocol).  Note that
        Debian's libnfs 4.0 cannot send NFSv4 WRITEs of 4000 bytes or more."""
        if self.port is None:
            # Without ports libnfs would ask rpcbind, i.e. whichever Ganesha
            # registered last.
            raise GaneshaError("Ganesha.url() before start(): the ports are chosen at start")
        p = self.pseudo.rstrip("/") + "/" + path.lstrip("/")
        if version == 4:
            return f"nfs://{HOST}{p}?version=4&nfsport={self.port}"
        return f"nfs://{HOST}{p}?version=3&nfsport={self.port}&mountport={self.mnt_port}"

    def log_text(self, since_start=False):
        try:
            with open(self.log, errors="replace") as f:
                if since_start:
                    f.seek(self._log_offset)
                return f.read()
        except OSError:
            return ""

    def wait_log(self, regex, timeout=10, since_start=True):
        """The first match of `regex` in the log (since the last start by
        default), waiting up to `timeout` seconds; None if it never shows."""
        pat = re.compile(regex)
        deadline = time.time() + timeout
        while True:
            m = pat.search(self.log_text(since_start=since_start))
            if m or time.time() >= deadline:
                return m
            time.sleep(0.1)

    def tail_log(self, n=40):
        lines = self.log_text().splitlines()
        return "\n".join(lines[-n:]) if lines else "(empty log)"
