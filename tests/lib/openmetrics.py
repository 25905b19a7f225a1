"""The strict OpenMetrics parser the metrics tests check text with
(prometheus_client's). Missing, it fails the test instead of skipping it:
the check would be lost silently."""
import pytest

try:
    from prometheus_client.openmetrics import parser
except ImportError:
    parser = None


def strict_parser():
    if parser is None:
        pytest.fail("prometheus_client is missing: scripts/setup.sh installs it")
    return parser
