"""Loaded at start-up by the proxy processes of test_proxy_responsive.py
(through PYTHONPATH), including the analysis pool's spawned workers: the
analysis of a query text that holds the marker below takes as long as the
marker says (and, when CORGIPILE_TEST_ANALYSIS_STARTED names a file, creates
it first).  The tests then never depend on how fast this machine parses
SQL (a text that took 8 s to analyse here once took 2 s after the
translator got faster, and the proxy then ran its 32,000 trainings).

The wrapper replaces corgipile.proxy.rewrite.analyze wherever it was
bound, under the same module and name, so the pool pickles it by
reference and the workers find the same wrapper.
"""

import os
import re
import sys
import time

_MARKER = re.compile(r"/\* test: analysis takes ([0-9.]+) s \*/")


def _patch() -> None:
    from corgipile.proxy import rewrite

    analyze = rewrite.analyze

    def slow_analyze(text, single):
        m = _MARKER.search(text)
        if m:
            started = os.environ.get("CORGIPILE_TEST_ANALYSIS_STARTED")
            if started:  # the event a test waits for
                open(started, "w").close()
            time.sleep(float(m.group(1)))
        return analyze(text, single)

    slow_analyze.__module__ = analyze.__module__
    slow_analyze.__qualname__ = analyze.__qualname__
    slow_analyze.__name__ = analyze.__name__
    # corgipile.proxy's package imports modules that bound the original
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("corgipile") \
                and getattr(module, "analyze", None) is analyze:
            module.analyze = slow_analyze


_patch()
