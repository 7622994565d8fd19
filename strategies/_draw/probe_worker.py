"""The child process of an isolated device probe (``strategies._draw.probe._probe_isolated``):
``python -m strategies._draw.probe_worker DEVICE EXAMPLES [PRELUDE]``, the (row, dtype) items as JSON on
stdin, one line of JSON per event on stdout."""

import sys

from strategies._draw.probe import serve_probe

if __name__ == "__main__":
    serve_probe(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
