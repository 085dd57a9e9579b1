"""Runs CloudKitty's own Prometheus collector on a metrics.yml.

Used by crates/agent/tests/operator_kit/cloudkitty.rs with Debian's
interpreter (/usr/bin/python3) and Debian's python3-cloudkitty: the file is
loaded and validated by CloudKitty's loader and schema, and every query is
built by the collector's fetch_all, exactly as cloudkitty-processor would.

    cloudkitty_driver.py METRICS_YML [--prometheus URL] < requests.json

stdin: a JSON list of {"scope": ID, "start": UNIX_S, "end": UNIX_S}.
stdout: one JSON object: "version" and "module" (the CloudKitty imported:
Debian's, or a release's wheel put first on PYTHONPATH), "metrics"
(the validated configuration per metric) and "collected", one entry per
request and metric with the query the collector built and the points it
returned. Without --prometheus the collector talks to a stand-in that
records each query and answers with no data; with it, to that Prometheus
(`prometheus_url` is the API root, as in cloudkitty.conf:
http://HOST:PORT/api/v1).

Exit status 3 when CloudKitty cannot be imported, 4 when it rejects the
file; the message names the cause.
"""

import datetime
import json
import sys

SCOPE_KEY = "tenant_id"
PERIOD = 3600


def fail(status, message):
    sys.stderr.write("cloudkitty_driver: %s\n" % message)
    sys.exit(status)


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--prometheus"):
        fail(2, "usage: cloudkitty_driver.py METRICS_YML [--prometheus URL]")
    metrics_yml = argv[1]
    url = argv[3] if len(argv) == 4 else ""

    try:
        import importlib.metadata

        from oslo_config import cfg

        import cloudkitty
        from cloudkitty.collector import prometheus
        from cloudkitty import utils as ck_utils
    except ImportError as e:
        fail(3, "cannot import CloudKitty (%s): install Debian's python3-cloudkitty "
             "(scripts/setup-operator does)" % e)

    conf = cfg.CONF
    conf([], project="cloudkitty", default_config_files=[])
    conf.set_override("scope_key", SCOPE_KEY, "collect")
    conf.set_override("period", PERIOD, "collect")
    conf.set_override("metrics_conf", metrics_yml, "collect")
    conf.set_override("prometheus_url", url, "collector_prometheus")

    try:
        collector = prometheus.PrometheusCollector(
            period=PERIOD, conf=ck_utils.load_conf(metrics_yml))
    except Exception as e:  # voluptuous errors, a missing key
        fail(4, "CloudKitty rejects %s: %r" % (metrics_yml, e))

    if not url:
        collector._conn = Recorder()

    requests = json.load(sys.stdin)
    collected = []
    for req in requests:
        start = datetime.datetime.fromtimestamp(req["start"], datetime.timezone.utc)
        end = datetime.datetime.fromtimestamp(req["end"], datetime.timezone.utc)
        for name, metric in collector.conf.items():
            if not url:
                collector._conn.queries.clear()
            points = collector.fetch_all(name, start, end, req["scope"])
            entry = {
                "scope": req["scope"],
                "start": req["start"],
                "end": req["end"],
                "metric": name,
                "points": [
                    {
                        "unit": p.unit,
                        "qty": str(p.qty),
                        "groupby": dict(p.groupby),
                        "metadata": dict(p.metadata),
                    }
                    for p in points
                ],
            }
            if not url:
                (query, time), = collector._conn.queries
                entry["query"] = query
                entry["time"] = time
            collected.append(entry)

    json.dump(
        {
            "version": importlib.metadata.version("cloudkitty"),
            "module": cloudkitty.__file__,
            "metrics": {
                name: {
                    "alt_name": m.get("alt_name", name),
                    "unit": m["unit"],
                    "factor": str(m["factor"]),
                    "groupby": m["groupby"],
                    "metadata": m["metadata"],
                    "extra_args": m["extra_args"],
                }
                for name, m in collector.conf.items()
            },
            "collected": collected,
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )


class Recorder:
    """Stands in for CloudKitty's PrometheusClient: records each instant
    query and answers it with an empty result."""

    def __init__(self):
        self.queries = []

    def get_instant(self, query, time=None, timeout=None):
        self.queries.append((query, time))
        return {"status": "success", "data": {"resultType": "vector", "result": []}}


if __name__ == "__main__":
    main(sys.argv)
