"""TCP keep-alive on client connections (``--tcp-keepalive``): a TCP client that closes
while its calls still run is let go once its socket stops answering the server's probes,
and one that only shut its writing side keeps being answered.

A TCP client that closes with a FIN looks to the server exactly like one that shut only
its writing side; the difference shows when the client's socket is gone (an orphaned
``FIN_WAIT_2`` lasts ``net.ipv4.tcp_fin_timeout``, 60 s by default) and a keep-alive
probe is answered with a reset. So these tests run in a network namespace of their own
(``unshare -n``, root only), where that timeout is set to 1 s without touching the
machine's own: ``KeepAlive`` runs ``keepalive_in_namespace`` there, in a child Python.
"""
import os
import subprocess
import sys
import unittest


class KeepAlive(unittest.TestCase):
    def test_in_a_namespace_of_its_own(self):
        setup = "ip link set lo up && sysctl -qw net.ipv4.tcp_fin_timeout=1"
        if subprocess.run(["unshare", "-n", "sh", "-c", setup], capture_output=True).returncode != 0:
            self.skipTest("cannot make a network namespace here (unshare -n needs root)")
        here = os.path.dirname(os.path.abspath(__file__))
        child = subprocess.run(
            ["unshare", "-n", "sh", "-c", setup + ' && exec "$0" -m unittest -v keepalive_in_namespace',
             sys.executable],
            cwd=here, capture_output=True, text=True, timeout=120)
        self.assertEqual(child.returncode, 0, child.stdout + child.stderr)
        self.assertIn("Ran 3 tests", child.stderr)
        self.assertNotIn("skipped", child.stderr)


if __name__ == "__main__":
    unittest.main()
