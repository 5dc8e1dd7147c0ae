"""The half of ``test_tcp_keepalive`` that runs inside the network namespace that test
makes (``net.ipv4.tcp_fin_timeout`` 1 s there); not a ``test_*`` module, so discovery
leaves it to that test."""
import json
import socket
import time
import unittest

from support import Upstream, XhrpcServer


def stats(server):
    with server.connect() as c:
        return c.call("server.stats")


def wait_in_flight(server, n, seconds=20):
    """Waits until the server has ``n`` transfers in flight; returns the last count."""
    deadline = time.monotonic() + seconds
    while True:
        count = stats(server)["transfersInFlight"]
        if count == n or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


class InNamespace(unittest.TestCase):
    def setUp(self):
        self.upstream = Upstream().start()
        self.addCleanup(self.upstream.stop)

    def start_server(self, keepalive):
        server = XhrpcServer(tcp=True, args=["--tcp-keepalive", str(keepalive)]).start()
        self.addCleanup(server.stop)
        return server

    def held_fetch(self, server):
        """A TCP client with one fetch the upstream holds, in flight."""
        c = socket.create_connection(("127.0.0.1", server.tcp_port), timeout=30)
        call = {"jsonrpc": "2.0", "id": 1, "method": "fetch", "params": {"url": self.upstream.url("/delay/6000")}}
        c.sendall(json.dumps(call).encode() + b"\n")
        self.assertEqual(wait_in_flight(server, 1), 1)
        return c

    def test_a_client_that_closed_is_let_go_when_its_socket_is_gone(self):
        server = self.start_server(keepalive=1)
        self.held_fetch(server).close()
        # Gone about 1 s (the orphan's FIN_WAIT_2) plus 1 s idle and a probe after its FIN;
        # the fetch itself would run 6 s.
        self.assertEqual(wait_in_flight(server, 0, seconds=4.5), 0)

    def test_without_probes_the_fetch_of_a_closed_client_runs_on(self):
        """The control: with --tcp-keepalive 0 nothing tells the server the client went."""
        server = self.start_server(keepalive=0)
        self.held_fetch(server).close()
        time.sleep(3)
        self.assertEqual(stats(server)["transfersInFlight"], 1)

    def test_a_client_that_only_shut_writing_is_still_answered(self):
        server = self.start_server(keepalive=1)
        c = self.held_fetch(server)
        c.shutdown(socket.SHUT_WR)
        # Its socket answers every probe while the fetch runs (6 s: many probe rounds).
        answer = json.loads(c.makefile("rb").readline())
        c.close()
        self.assertEqual(answer["result"]["status"], 200, answer)

