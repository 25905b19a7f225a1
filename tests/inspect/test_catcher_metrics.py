"""ppl-inspect catcher-metrics: libcatcher's stats file (the JSON it
writes at LIBCATCHER_STATS_FILE) as OpenMetrics text that a strict parser
takes, with each figure under its class (and reason, style) label; a file
that is not one gets a clear message and exit status 2."""
import json
import subprocess


from lib import paths
from lib.openmetrics import strict_parser


STATS = {"pid": 12, "mode": "elide",
         "classes": {"ibd": {"writes": 10, "bytes": 163840, "pages": 10, "elided": 7, "bytes_not_sent": 114688,
                             "errors": 0, "refused_total": 3, "refused": {"nack_lsn_ahead": 2, "timeout": 1}},
                     "redo": {"writes": 5, "bytes": 2048, "pages": 0, "elided": 0, "bytes_not_sent": 0,
                              "errors": 1, "refused_total": 0, "refused": {}}},
         "total": {"writes": 15},
         "styles": {"pwrite": 3, "pwritev": 0, "io_uring": 12, "libaio": 0},
         "elision": {"questions": 10, "bytes_sent": 400, "bytes_received": 200}}


def run(*args):
    return subprocess.run([paths.tool("ppl-inspect"), *args], capture_output=True, text=True, timeout=60)


def test_stats_file_as_metrics(tmp_path):
    path = tmp_path / "catcher.json"
    path.write_text(json.dumps(STATS))
    r = run("catcher-metrics", str(path))
    assert r.returncode == 0, r.stderr
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in strict_parser().text_string_to_metric_families(r.stdout) for s in f.samples}
    assert samples[("ppl_catcher_info", (("mode", "elide"),))] == 1
    assert samples[("ppl_catcher_pages_elided_total", (("class", "ibd"),))] == 7
    assert samples[("ppl_catcher_written_bytes_total", (("class", "redo"),))] == 2048
    assert samples[("ppl_catcher_write_errors_total", (("class", "redo"),))] == 1
    assert samples[("ppl_catcher_pages_refused_total", (("class", "ibd"), ("reason", "nack_lsn_ahead")))] == 2
    assert samples[("ppl_catcher_requests_total", (("style", "io_uring"),))] == 12
    assert samples[("ppl_catcher_elision_sent_bytes_total", ())] == 400
    # "total" is the sum over the classes: not a class of its own
    assert not any(dict(labels).get("class") == "total" for _, labels in samples)


def test_not_a_stats_file(tmp_path):
    r = run("catcher-metrics", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "No such file" in r.stderr and "LIBCATCHER_STATS_FILE" in r.stderr, r.stderr
    other = tmp_path / "other.json"
    other.write_text('{"pool": 1}')
    r = run("catcher-metrics", str(other))
    assert r.returncode == 2 and "is not a libcatcher stats file" in r.stderr, r.stderr
    r = run("catcher-metrics")
    assert r.returncode == 2 and "usage" in r.stderr
