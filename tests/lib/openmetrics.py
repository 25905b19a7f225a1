"""The strict OpenMetrics parser the metrics tests check text with
(prometheus_client's). Missing, it fails the test instead of skipping it:
the check would be lost silently. Also the scrape of an endpoint and the
text as families, which the metrics and deployment tests share."""
import urllib.request

import pytest

try:
    from prometheus_client.openmetrics import parser
except ImportError:
    parser = None


def strict_parser():
    if parser is None:
        pytest.fail("prometheus_client is missing: scripts/setup.sh installs it")
    return parser


CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def families(text):
    """{family name: {(sample name, sorted labels): value}}, through the
    strict parser (it raises on anything the format forbids)."""
    out = {}
    for f in strict_parser().text_string_to_metric_families(text):
        out[f.name] = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples}
    return out


def scrape(port, host="127.0.0.1"):
    """GET /metrics: the text, after checking the status and Content-Type."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == CONTENT_TYPE, r.headers["Content-Type"]
        return r.read().decode()


def value(fams, family, sample=None, **labels):
    return fams[family][(sample or family + "_total", tuple(sorted(labels.items())))]
