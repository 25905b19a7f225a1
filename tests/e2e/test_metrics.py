"""The storage node's metrics (issue 19) with the whole stack: MariaDB with
libcatcher eliding, ppl-mount, FSAL_PPL with `Metrics_Port` set. The
endpoint is scraped over HTTP on 127.0.0.1 before and after a sysbench
run; each text must pass prometheus_client's OpenMetrics parser (strict:
TYPE before samples, _total counters, # EOF) and the counters must move
(ingest bytes, elision answers, pages rebuilt). `ppl-inspect live POOL
metrics` gives the same families, and `ppl-inspect catcher-metrics` turns
libcatcher's stats file of the same run into metrics too. A port already
taken leaves the export working, with a WARN that says the endpoint is off
and why."""
import socket
import subprocess

from lib import paths
from lib.openmetrics import families, scrape, value
from lib.ganesha import free_port
from lib.stack import Stack, require_stack


TABLES, TABLE_SIZE = 2, 5000
# A small buffer pool flushed eagerly: pages are written (and elision
# questions asked, reads rebuilt) within a short run.
OPTIONS = ["--innodb-buffer-pool-size=8M", "--innodb-log-file-size=16M", "--innodb-doublewrite=0",
           "--innodb-flush-method=O_DIRECT", "--innodb-flush-log-at-trx-commit=1",
           "--innodb-max-dirty-pages-pct=1", "--innodb-max-dirty-pages-pct-lwm=0.001"]


def test_metrics_move_and_parse(tmp_path):
    require_stack()
    port = free_port()
    s = Stack(tmp_path, options=OPTIONS, fsal_extra=f"Metrics_Port = {port};")
    try:
        s.start()
        assert s.g.wait_log(rf"metrics at http://127\.0\.0\.1:{port}/metrics", timeout=5), s.g.tail_log()
        db = s.db
        db.sql("CREATE DATABASE sbtest")
        db.sysbench("oltp_write_only", "prepare", tables=TABLES, table_size=TABLE_SIZE)
        first = families(scrape(port))
        db.sysbench("oltp_write_only", "run", "--time=8", tables=TABLES, table_size=TABLE_SIZE)
        text = scrape(port)
        second = families(text)

        assert value(second, "ppl_ingest_bytes") > value(first, "ppl_ingest_bytes") > 0
        assert value(second, "ppl_ingest_parsed_lsn", "ppl_ingest_parsed_lsn") > \
            value(first, "ppl_ingest_parsed_lsn", "ppl_ingest_parsed_lsn")
        assert value(second, "ppl_ingest_running", "ppl_ingest_running") == 1
        answered = [sum(v for (_, labels), v in f["ppl_elision_answers"].items()) for f in (first, second)]
        assert answered[1] > answered[0], (answered, text)
        assert value(second, "ppl_elision_answers", verdict="ack") > value(first, "ppl_elision_answers", verdict="ack")
        assert value(second, "ppl_elision_requests") == answered[1]
        # every verdict has its sample, zeros included
        assert len(second["ppl_elision_answers"]) == 13
        assert value(second, "ppl_rebuild_failures") == 0
        hist = second["ppl_rebuild_latency_seconds"]
        assert hist[("ppl_rebuild_latency_seconds_count", ())] == value(second, "ppl_pages_rebuilt")
        used = value(second, "ppl_pool_blocks_used", "ppl_pool_blocks_used")
        free = value(second, "ppl_pool_blocks_free", "ppl_pool_blocks_free")
        assert used + free > 0
        for family in ("ppl_pages_pending", "ppl_materializations", "ppl_checkpoint_gate_waits",
                       "ppl_checkpoint_gate_wait_seconds", "ppl_verify_pages", "ppl_store"):
            assert family in second, family

        # the control socket gives the same families (for a textfile collector)
        r = subprocess.run([paths.tool("ppl-inspect"), "live", s.pool, "metrics"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        assert r.stdout.endswith("# EOF\n")
        assert set(families(r.stdout)) == set(second)

        # libcatcher's stats file of the same run, as metrics
        s.catcher_stats()
        r = subprocess.run([paths.tool("ppl-inspect"), "catcher-metrics", s.stats], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        catcher = families(r.stdout)
        assert value(catcher, "ppl_catcher_pages_elided", **{"class": "ibd"}) > 0, r.stdout
        assert value(catcher, "ppl_catcher_elision_questions") > 0, r.stdout
        s.stop()
        s.assert_storage_clean()
    finally:
        s.stop()


def test_port_taken_leaves_the_export_up(tmp_path):
    require_stack()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    s = Stack(tmp_path, fsal_extra=f"Metrics_Port = {port};")
    try:
        s.g.start()  # the export comes up (start() waits for its MOUNT)
        line = s.g.wait_log(r"the metrics endpoint is off: .*", timeout=5)
        assert line, s.g.tail_log()
        assert "Address already in use" in line.group(0) and "Metrics_Port" in line.group(0), line.group(0)
        assert s.live("stats")["ingest"]  # the control socket answers
    finally:
        s.stop()
        taken.close()
