"""Issue 19, deployment: the Debian packages built by CPack from the build
tree (ppl-storage, ppl-compute, ppl-tools) installed with dpkg on this
machine, reinstalled and upgraded; every shipped unit through `systemd-analyze
verify`; then the stack run from the INSTALLED files only, by the shipped
units' command lines: ppl-pool@.service makes the pool, ppl-storage.service
checks the configuration and runs ganesha.nfsd with the FSAL from Ganesha's
plugin directory, ppl-mount@.service mounts the export, and mariadbd runs as
mariadb.service with the ppl drop-in runs it (as mysql, LD_PRELOAD of the
installed libcatcher, /etc/mysql/mariadb.conf.d/90-ppl.cnf). Only private
directories and ports differ from a real node, and they reach the units the
way a real node's would: through private copies of the EnvironmentFile=
files, a private copy of /etc/ppl/ganesha.conf with ports and paths
replaced, and instance names. A short write load must be elided, /metrics
must parse; then everything is stopped by pid and the packages are removed
and purged, leaving the pool and the data as they were and nothing of
ours in /usr, /lib or /etc.

Every process is a direct child of the test, stopped by pid. systemd is
not PID 1 here, so tests/lib/units.py reads the units and runs their
commands. The packages are purged by the module fixture's finalizer even
when a test fails."""
import glob
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from lib import paths
from lib.ganesha import Ganesha, GaneshaError, free_port
from lib.mariadb import MariaDB
from lib.openmetrics import families, scrape, value
from lib.stack import catcher_stats, mount_class, require_stack
from lib.units import Unit, escape_path, private_env_file, read_env_file

sys.path.insert(0, os.path.join(paths.REPO, "scripts"))
import pplnode  # noqa: E402  (the example's renderer, applied to the installed configuration)

PACKAGES = ("ppl-storage", "ppl-compute", "ppl-tools")
UNITS = "/lib/systemd/system"
ETC = "/etc/ppl"
CNF = "/etc/mysql/mariadb.conf.d/90-ppl.cnf"
BUMP = "+deploytest1"


def dpkg(*args, check=True):
    r = subprocess.run(["dpkg", *args], capture_output=True, text=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if check and r.returncode != 0:
        raise AssertionError(f"dpkg {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def installed_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", pkg], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    status, _, version = r.stdout.rpartition(" ")
    return version if status.startswith("install ok installed") else None


def package_state(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "not known"


def cpack(build, out, *extra):
    r = subprocess.run(["cpack", "-G", "DEB", "-B", out, *extra], cwd=build, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = {}
    for deb in glob.glob(os.path.join(out, "*.deb")):
        name = subprocess.run(["dpkg-deb", "-f", deb, "Package"], capture_output=True, text=True,
                              check=True).stdout.strip()
        debs[name] = deb
    assert set(debs) == set(PACKAGES), debs
    return debs


def deb_files(deb):
    """The paths a package installs (files and symlinks, not directories)."""
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    files = []
    for line in out.splitlines():
        fields = line.split(None, 5)
        if fields[0].startswith("d"):
            continue
        files.append(fields[5].split(" -> ")[0].lstrip("."))
    return files


def snapshot(*roots):
    """{path: (size, sha256)} of every file under roots."""
    out = {}
    for root in roots:
        for d, _dirs, files in os.walk(root):
            for name in files:
                p = os.path.join(d, name)
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[p] = (os.path.getsize(p), h.hexdigest())
    return out


def conf_value(text, key):
    m = re.search(rf"^\s*{key} = ([^;\n]*);$", text, re.M)
    assert m, f"no {key} in the installed ganesha.conf"
    return m.group(1).strip().strip('"')


def purge_all():
    present = [p for p in PACKAGES if package_state(p) != "not known" and not package_state(p).startswith("un")]
    if present:
        dpkg("--purge", *present, check=False)


@pytest.fixture(scope="module")
def node():
    """Builds the packages, installs them (the same version twice, then a
    bumped one), and yields what the tests share. Purges the packages and
    removes its directories at the end, whatever happened."""
    if shutil.which("dpkg") is None:
        pytest.skip("dpkg is not available: the packages are Debian packages")
    build = paths.build_dir()
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        cache = f.read()
    if "PPL_SANITIZE:BOOL=ON" in cache or "PPL_TSAN:BOOL=ON" in cache or "PPL_FUZZ:BOOL=ON" in cache:
        pytest.fail(f"{build} is an instrumented build: packages are made from the normal one (PPL_BUILD_DIR=build)")
    for p in PACKAGES:
        assert package_state(p) in ("not known", "un"), (
            f"{p} is already on this machine ({package_state(p)}): this test installs and purges it; "
            f"remove it first (dpkg --purge {p})")
    # /tmp, not pytest's tmp_path: mysqld runs as mysql and must reach its
    # datadir, socket and stats directories, under a 0700 pytest-of-root.
    base = tempfile.mkdtemp(prefix="ppl-deploy-", dir="/tmp")
    os.chmod(base, 0o755)
    shm = pplnode.tmpfs_dir() or base
    pool_dir = tempfile.mkdtemp(prefix="ppl-deploy-pool-", dir=shm)
    try:
        v1 = cpack(build, os.path.join(base, "pkgs"))
        version = subprocess.run(["dpkg-deb", "-f", v1["ppl-storage"], "Version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        v2 = cpack(build, os.path.join(base, "pkgs-bumped"), "-D", f"CPACK_PACKAGE_VERSION={version}{BUMP}")
        yield {"base": base, "pool_dir": pool_dir, "v1": v1, "v2": v2, "version": version}
    finally:
        purge_all()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(pool_dir, ignore_errors=True)


def test_install_reinstall_upgrade(node):
    v1, v2, version = node["v1"], node["v2"], node["version"]
    dpkg("-i", *v1.values())
    for p in PACKAGES:
        assert installed_version(p) == version, package_state(p)
    # An administrator's edit of a conffile survives a reinstall and an
    # upgrade (the packaged file did not change, so dpkg keeps it silently).
    with open(f"{ETC}/ppl-mount.env", "a") as f:
        f.write("# edited by test_packages\n")
    dpkg("-i", *v1.values())
    dpkg("-i", *v2.values())
    for p in PACKAGES:
        assert installed_version(p) == version + BUMP, package_state(p)
    with open(f"{ETC}/ppl-mount.env") as f:
        assert "# edited by test_packages" in f.read()

    # Standard paths: tools in /usr/bin, the FSAL beside Debian's FSAL_VFS,
    # libcatcher in the multiarch library directory, units in systemd's.
    vfs = [f for f in subprocess.run(["dpkg", "-L", "nfs-ganesha-vfs"], capture_output=True, text=True,
                                     check=True).stdout.splitlines() if f.endswith("/libfsalvfs.so")]
    plugins = os.path.dirname(vfs[0])
    expected = {
        "ppl-storage": [f"{plugins}/libfsalppl.so", "/usr/bin/ppl-inspect", f"{ETC}/ganesha.conf",
                        f"{ETC}/storage.env", f"{UNITS}/ppl-storage.service", f"{UNITS}/ppl-pool@.service",
                        "/usr/share/doc/ppl-storage/deploy.md"],
        "ppl-compute": ["/usr/lib/x86_64-linux-gnu/ppl/libcatcher.so", "/usr/bin/ppl-mount", f"{ETC}/libcatcher.env",
                        f"{ETC}/ppl-mount.env", CNF, f"{UNITS}/ppl-mount@.service",
                        f"{UNITS}/mariadb.service.d/ppl.conf", "/usr/share/doc/ppl-compute/mnt-ppl.mount.example"],
        "ppl-tools": ["/usr/bin/ppl-replay"],
    }
    for pkg, files in expected.items():
        listed = set(deb_files(v2[pkg]))
        for path in files:
            assert path in listed, (pkg, path, sorted(listed))
            assert os.path.exists(path), path
    conffiles = subprocess.run(["dpkg-query", "-W", "-f=${Conffiles}", "ppl-compute"], capture_output=True,
                               text=True, check=True).stdout
    for path in (f"{ETC}/libcatcher.env", f"{ETC}/ppl-mount.env", CNF):
        assert path in conffiles, conffiles
    assert oct(os.stat(f"{ETC}/ganesha.conf").st_mode & 0o777) == "0o600"   # it holds the token

    # Nothing installed refers to the build tree: no RPATH/RUNPATH at all,
    # no path of the source or build directory in the binaries.
    build, src = paths.build_dir(), paths.REPO
    for pkg in PACKAGES:
        for path in deb_files(v2[pkg]):
            with open(path, "rb") as f:
                data = f.read()
            if not data.startswith(b"\x7fELF"):
                continue
            dyn = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
            assert "RPATH" not in dyn and "RUNPATH" not in dyn, (path, dyn)
            assert src.encode() not in data, f"{path} names the source or build tree {src}"
    # The installed tools run from anywhere (no library looked up in the tree)
    for tool in ("/usr/bin/ppl-inspect", "/usr/bin/ppl-replay", "/usr/bin/ppl-mount"):
        r = subprocess.run(["ldd", tool], capture_output=True, text=True)
        assert "not found" not in r.stdout and build not in r.stdout, (tool, r.stdout)
    r = subprocess.run(["/usr/bin/ppl-mount", "--version"], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr


def test_units_verify(node):
    """systemd-analyze verify on every shipped unit as installed (it also
    checks that each Exec binary exists); templates with an instance, and
    Debian's mariadb.service with the drop-in."""
    assert installed_version("ppl-storage"), "installed by test_install_reinstall_upgrade"
    work = os.path.join(node["base"], "verify")
    os.makedirs(work, exist_ok=True)
    shipped = [f for pkg in PACKAGES for f in deb_files(node["v2"][pkg]) if f.startswith(UNITS + "/")]
    assert sorted(os.path.basename(f) for f in shipped) == [
        "ppl-mount@.service", "ppl-pool@.service", "ppl-storage.service", "ppl.conf"], shipped
    targets = []
    for f in shipped:
        name = os.path.basename(f)
        if name == "ppl.conf":
            targets.append(f"{UNITS}/mariadb.service")        # loads mariadb.service.d/ppl.conf
        elif name.endswith("@.service"):
            # verify wants an instance; a copy named for one, beside the units
            inst = os.path.join(work, name.replace("@.", "@" + escape_path("/mnt/ppl") + "."))
            shutil.copyfile(f, inst)
            targets.append(inst)
        else:
            targets.append(f)
    for t in targets:
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", t], capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr.strip(), f"systemd-analyze verify {t}:\n{r.stdout}{r.stderr}"
    # the drop-in is what verify loaded for mariadb.service
    r = subprocess.run(["systemd-analyze", "cat-config", "systemd/system/mariadb.service.d/ppl.conf"],
                       capture_output=True, text=True)
    assert "LD_PRELOAD" in r.stdout, r.stdout + r.stderr


def storage_env(node, d):
    return private_env_file(f"{ETC}/storage.env", os.path.join(d, "storage.env"), {
        "PPL_GANESHA_CONF": os.path.join(d, "ganesha", "ganesha.conf"),
        "PPL_GANESHA_LOG": os.path.join(d, "ganesha", "ganesha.log"),
        "PPL_GANESHA_PIDFILE": os.path.join(d, "ganesha", "ganesha.pid"),
    })


def write_conf(g, pool, token, metrics_port, path=None):
    """The installed /etc/ppl/ganesha.conf with private ports, paths and
    token; its Plugins_Dir (Ganesha's), pool size and the rest as shipped."""
    with open(f"{ETC}/ganesha.conf") as f:
        shipped = f.read()
    text = pplnode.render_ganesha_conf(
        g, pool, conf_value(shipped, "Pool_Size"), g.elision_port, token, None,
        conf_value(shipped, "Stats_Interval"), source=f"{ETC}/ganesha.conf",
        extra={"Metrics_Port": str(metrics_port)})
    os.makedirs(g.base, exist_ok=True)
    os.makedirs(g.recovery, exist_ok=True)
    with open(path or g.conf, "w") as f:
        f.write(text)
    return text


def storage_node(node, d, export, pool, token):
    """A Ganesha run by ppl-storage.service's command lines: ExecStartPre
    (the configuration check) then ExecStart, with the private env file."""
    unit = Unit(f"{UNITS}/ppl-storage.service")
    assert set(unit.get("Unit", "Requires")) >= {"rpcbind.service"} and "rpcbind.service" in " ".join(
        unit.get("Unit", "After")), unit.entries
    env = unit.environment({f"{ETC}/storage.env": storage_env(node, d)})
    metrics_port = free_port()
    g = Ganesha(os.path.join(d, "ganesha"), export, pseudo="/ppl",
                config=lambda g: write_conf(g, pool, token, metrics_port),
                command=lambda g: start_command(unit, env, g))
    g.elision_port = free_port()
    g.metrics_port = metrics_port
    g.unit_env = env
    # Fixed ports: the configuration exists before ganesha.nfsd starts, for
    # ppl-pool@.service (Ganesha.start keeps them).
    g.port, g.mnt_port = free_port(), free_port()
    write_conf(g, pool, token, metrics_port)
    return g


def start_command(unit, env, g):
    argv = unit.command("ExecStartPre", env)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise GaneshaError(f"ExecStartPre {' '.join(argv)} refused ({r.returncode}):\n{r.stdout}{r.stderr}")
    argv = unit.command("ExecStart", env)
    assert argv[1:] == ["-F", "-L", g.log, "-f", g.conf, "-N", "NIV_EVENT", "-p", g.pidfile], argv
    return argv


def make_pool(node, d, pool):
    """ppl-pool@<pool>.service: its condition, then its ExecStart."""
    unit = Unit(f"{UNITS}/ppl-pool@.service", instance=escape_path(pool))
    assert unit.one("Unit", "ConditionPathExists") == "!%f"
    env = unit.environment({f"{ETC}/storage.env": os.path.join(d, "storage.env")})
    assert not os.path.exists(pool)
    argv = unit.command("ExecStart", env)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return unit, argv


def test_storage_unit_refuses_a_pool_of_another_export(node):
    """The FSAL refuses such an export but ganesha.nfsd stays up without it;
    the unit's ExecStartPre refuses to start at all, saying why."""
    assert installed_version("ppl-storage"), "installed by test_install_reinstall_upgrade"
    d = os.path.join(node["base"], "foreign")
    os.makedirs(d)
    mine, other = os.path.join(d, "export"), os.path.join(d, "other")
    os.makedirs(mine)
    os.makedirs(other)
    pool = os.path.join(node["pool_dir"], "foreign.pool")
    subprocess.run(["/usr/bin/ppl-inspect", "pool", "create", pool, "--identity", other, "--size", "16M"],
                   check=True, capture_output=True)
    g = storage_node(node, d, mine, pool, "foreign-test-token")
    with pytest.raises(GaneshaError) as e:
        g.start()
    msg = str(e.value)
    assert "ExecStartPre" in msg and "belongs to" in msg and other in msg, msg
    assert g.proc is None
    # What the check spares: the FSAL's refusal, with ganesha.nfsd running on.
    g.command = None
    try:
        g.start(expect_export=False)
        line = g.wait_log(r"PPL: export \S+ refused: [^\n]*", timeout=20)
        assert line and "belongs to" in line.group(0), g.tail_log()
        assert g.proc.poll() is None
    finally:
        g.stop()
    os.unlink(pool)


def test_stack_from_installed_units(node):
    require_stack()
    assert installed_version("ppl-compute"), "installed by test_install_reinstall_upgrade"
    d = os.path.join(node["base"], "stack")
    mysql = pwd.getpwnam("mysql")
    export = os.path.join(d, "export")
    os.makedirs(export)
    pool = os.path.join(node["pool_dir"], "ppl.pool")
    token = os.urandom(16).hex()
    g = storage_node(node, d, export, pool, token)
    node.update(export=export, pool=pool)

    # ppl-pool@: made once; a second start is skipped by its condition, and
    # its command refuses the existing pool, leaving it as it is.
    unit, argv = make_pool(node, d, pool)
    before = snapshot(node["pool_dir"])
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode != 0 and "never overwritten" in r.stderr, r.stdout + r.stderr
    assert snapshot(node["pool_dir"]) == before

    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    compute = os.path.join(d, "compute")
    os.makedirs(compute)
    token_file = os.path.join(compute, "elision.token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    os.chown(token_file, 0, mysql.pw_gid)
    os.chmod(token_file, 0o640)
    stats_dir = os.path.join(compute, "stats")      # StateDirectory=mysql-ppl's stand-in
    db_base = os.path.join(compute, "mariadb")
    for p in (stats_dir, db_base):
        os.makedirs(p)
        os.chown(p, mysql.pw_uid, mysql.pw_gid)

    db = mount = munit = menv = None
    try:
        g.start()
        assert g.wait_log(r"PPL: export \S+ over FSAL VFS", timeout=10), g.tail_log()
        # the FSAL came from Ganesha's plugin directory, as installed
        with open(f"/proc/{g.pid}/maps") as f:
            maps = f.read()
        assert re.search(r" /usr/lib/x86_64-linux-gnu/ganesha/libfsalppl\.so$", maps, re.M), maps[-2000:]

        # ppl-mount@<mnt>.service
        munit = Unit(f"{UNITS}/ppl-mount@.service", instance=escape_path(mnt))
        menv = munit.environment({f"{ETC}/ppl-mount.env": private_env_file(
            f"{ETC}/ppl-mount.env", os.path.join(d, "ppl-mount.env"), {"PPL_MOUNT_URL": g.url()})})
        argv = munit.command("ExecStart", menv)
        assert argv[:4] == ["/usr/bin/ppl-mount", g.url(), mnt, "-f"], argv
        assert "--hard" in argv and "--direct-io" in argv and "allow_other" in argv, argv
        mount = mount_class()(argv[0], argv[1], argv[2], options=argv[4:], log=os.path.join(d, "ppl-mount.log"))
        mount.start()
        r = subprocess.run(munit.command("ExecStartPost", menv), capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr

        # mariadb.service with the drop-in
        dunit = Unit(f"{UNITS}/mariadb.service")
        assert f"{UNITS}/mariadb.service.d/ppl.conf" in dunit.dropin_paths
        catcher_env = private_env_file(f"{ETC}/libcatcher.env", os.path.join(d, "libcatcher.env"), {
            "LIBCATCHER_SERVER": f"127.0.0.1:{g.elision_port}", "LIBCATCHER_TOKEN_FILE": token_file,
            "LIBCATCHER_DATADIR": os.path.join(mnt, "data"),
            "LIBCATCHER_STATS_FILE": os.path.join(stats_dir, "libcatcher.%p.json")})
        denv = dunit.environment({f"{ETC}/libcatcher.env": catcher_env})
        assert denv["LD_PRELOAD"] == "/usr/lib/x86_64-linux-gnu/ppl/libcatcher.so", denv
        assert "LIBCATCHER_TOKEN" not in denv and denv["LIBCATCHER_MODE"] == "elide", denv
        assert "exec /usr/sbin/mariadbd $MYSQLD_OPTS" in dunit.one("Service", "ExecStart")
        user = dunit.one("Service", "User")
        assert "MYSQLD_OPTS" not in denv   # Debian's ExecStart then runs plain mariadbd, reading my.cnf

        class Service(MariaDB):
            """mariadbd as the unit runs it: Debian's defaults (which include
            90-ppl.cnf), the unit's user; private datadir and socket."""
            def common_args(self):
                return [f"--datadir={self.datadir}", f"--user={user}"]

        db = Service(db_base, datadir=os.path.join(mnt, "data"), env=denv)
        db.install()
        db.start()
        assert db.sql("SELECT @@innodb_doublewrite, @@innodb_flush_method, @@innodb_log_file_size").split() == [
            "0", "O_DIRECT", str(96 << 20)], "90-ppl.cnf is not in force"
        assert db.sql("SELECT USER()").strip()   # answers
        with open(f"/proc/{db.proc.pid}/status") as f:
            assert re.search(rf"^Uid:\s+{mysql.pw_uid}\s", f.read(), re.M), "mariadbd does not run as mysql"

        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=2, table_size=5000)
        db.sysbench("oltp_write_only", "run", "--time=8", tables=2, table_size=5000)
        # page writes now, not only at shutdown: the page cleaner flushes all
        db.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0.001, GLOBAL innodb_max_dirty_pages_pct = 0")
        for _ in range(60):
            dirty = int(db.sql("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                               "WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_PAGES_DIRTY'"))
            if dirty < 10:
                break
            time.sleep(0.5)
        stats = catcher_stats(db, os.path.join(stats_dir, f"libcatcher.{db.proc.pid}.json"))
        assert stats["total"]["elided"] > 0, stats["total"]
        live = subprocess.run(["/usr/bin/ppl-inspect", "live", pool, "stats", "--json"], capture_output=True,
                              text=True, timeout=30)
        assert live.returncode == 0, live.stderr
        fams = families(scrape(g.metrics_port))
        assert value(fams, "ppl_elision_answers", verdict="ack") > 0
        assert value(fams, "ppl_ingest_bytes") > 0
        assert value(fams, "ppl_rebuild_failures") == 0
        assert db.sql("CHECK TABLE sbtest.sbtest1, sbtest.sbtest2").count("OK") == 2
        kept = pool_info(pool)["pages"]
        checksums = db.sql("CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2")
    finally:
        if db:
            db.stop()
        if mount:
            subprocess.run(munit.command("ExecStop", menv), capture_output=True, timeout=30)
            mount.stop()
        code = g.stop(timeout=120)
    assert code == 0, g.tail_log()
    log = g.log_text()
    assert "redo ingest stopped" not in log and "divergence" not in log, g.tail_log()

    # Drain and roll back (docs/deploy.md): after MariaDB's clean stop, the
    # storage node's clean stop wrote every page it kept into its file; the
    # pool holds none, and the export is a plain datadir that mariadbd
    # without libcatcher, reading the files directly, finds consistent.
    assert kept > 0, "the load left no page in the pool: the drain below proves nothing"
    assert pool_info(pool)["pages"] == 0, (kept, pool_info(pool))
    plain = Service(os.path.join(compute, "plain"), datadir=os.path.join(export, "data"))
    os.makedirs(plain.base)
    os.chown(plain.base, mysql.pw_uid, mysql.pw_gid)
    plain.start()
    try:
        assert plain.sql("CHECK TABLE sbtest.sbtest1, sbtest.sbtest2").count("OK") == 2
        assert plain.sql("CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2") == checksums
    finally:
        plain.stop()


def pool_info(pool):
    r = subprocess.run(["/usr/bin/ppl-inspect", "pool", "info", pool, "--json"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_remove_and_purge_keep_pool_and_data(node):
    """dpkg -r, then --purge: the pool and the datadir stay byte for byte;
    the packages' files and the purged conffiles are gone."""
    assert installed_version("ppl-storage"), "installed by test_install_reinstall_upgrade"
    keep = [node["pool_dir"]] + ([node["export"]] if "export" in node else [])
    before = snapshot(*keep)
    assert before, keep
    files = {pkg: deb_files(node["v2"][pkg]) for pkg in PACKAGES}
    dpkg("-r", *PACKAGES)
    assert snapshot(*keep) == before
    for pkg in PACKAGES:
        assert package_state(pkg) in ("rc", "un", "not known"), package_state(pkg)
    assert os.path.exists(f"{ETC}/ganesha.conf") and os.path.exists(CNF)   # conffiles until purge
    dpkg("--purge", *PACKAGES)
    assert snapshot(*keep) == before
    left = [f for pkg in PACKAGES for f in files[pkg] if os.path.lexists(f)]
    assert not left, left
    assert not os.path.exists(ETC), os.listdir(ETC)
    for pattern in ("/usr/bin/ppl-*", "/usr/lib/x86_64-linux-gnu/ppl", "/usr/lib/x86_64-linux-gnu/ganesha/libfsalppl*",
                    "/usr/share/doc/ppl-*", f"{UNITS}/ppl-*", f"{UNITS}/mariadb.service.d/ppl.conf"):
        assert not glob.glob(pattern), pattern
    for pkg in PACKAGES:
        assert package_state(pkg) in ("un", "not known"), package_state(pkg)
