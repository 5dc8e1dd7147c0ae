"""How a fixture peer process ends and says it is ready, in one place.

A peer runs until SIGTERM, SIGINT, or the end of its stdin (the test that started it
went away), and prints ``READY <port>`` once it accepts connections; support.Upstream
waits for that line.
"""

import os
import signal
import sys
import threading


def stop_on_signal_or_end_of_stdin(stop):
    """Calls ``stop()`` on SIGTERM or SIGINT, or when stdin ends."""
    def watch_stdin():
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        stop()

    signal.signal(signal.SIGTERM, lambda *_: stop())
    signal.signal(signal.SIGINT, lambda *_: stop())
    threading.Thread(target=watch_stdin, daemon=True).start()


def announce_ready(port):
    """The line support.Upstream waits for."""
    sys.stdout.write("READY %d\n" % port)
    sys.stdout.flush()
