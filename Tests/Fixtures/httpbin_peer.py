#!/usr/bin/env python3
"""httpbin (PyPI) under waitress (PyPI), a real WSGI server, on loopback.

    python3 Tests/Fixtures/httpbin_peer.py [--host 127.0.0.1]

Listens on a port the OS picks, prints exactly one line ``READY <port>`` and serves
until stdin reaches end of file or SIGTERM/SIGINT, then exits 0. Eight worker threads,
so a slow endpoint (``/drip``, ``/delay``) does not hold up the others. The endpoints
are httpbin's own (https://httpbin.org documents them): ``/anything``,
``/basic-auth/U/P``, ``/digest-auth/qop/U/P``, ``/cookies``, ``/drip``, ``/range/N``, …
"""

import argparse
import os
import sys
import warnings
from peer_process import announce_ready, stop_on_signal_or_end_of_stdin  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()

    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)  # httpbin's note that flasgger is missing
    import httpbin
    import waitress

    server = waitress.create_server(httpbin.app, host=args.host, port=0, threads=8,
                                    ident="httpbin", channel_timeout=60)

    def stop(*_):
        # waitress's loop is not thread-safe to close; the process just ends. The
        # open connections go with it, which is what a stopped server does.
        os._exit(0)

    stop_on_signal_or_end_of_stdin(stop)
    announce_ready(int(server.effective_port))
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
