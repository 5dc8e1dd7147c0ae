"""The contract check itself (contract.py): a reply or notification that drifts from
api/openrpc.json fails the test that received it.

A fake server on a socket pair answers the suite's own client, so the drift is exactly
the one each test makes; no daemon is needed.
"""

import asyncio
import json
import socket
import unittest

import support  # noqa: F401  (installs the check)
import contract
from xhrpc import Client


def line(obj):
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


INFO = {"name": "xhrpcd", "version": "0.1.0", "uptimeSeconds": 1.5, "connections": 1}


class FakeServerTest(unittest.TestCase):
    """The suite's client against a peer that answers what each test tells it."""

    def setUp(self):
        contract.take_violations()  # whatever came before is another test's
        self.peer, theirs = socket.socketpair()
        self.peer.settimeout(10)
        self.client = Client(theirs)
        self.addCleanup(self.client.close)
        self.addCleanup(self.peer.close)
        self.peer_in = b""

    def next_call(self):
        while b"\n" not in self.peer_in:
            chunk = self.peer.recv(65536)
            self.assertTrue(chunk, "the client closed")
            self.peer_in += chunk
        first, self.peer_in = self.peer_in.split(b"\n", 1)
        return json.loads(first)

    def answer(self, method, params, reply):
        """``client.request(method)`` answered with ``reply`` (its id filled in)."""
        rid = self.client.next_id()
        self.client.send({"jsonrpc": "2.0", "method": method, "params": params, "id": rid})
        call = self.next_call()
        self.peer.sendall(line(dict(reply, jsonrpc="2.0", id=call["id"])))
        return self.client.wait_response(rid)

    def test_a_conforming_reply_passes(self):
        self.answer("server.info", [], {"result": INFO})
        self.assertEqual(contract.take_violations(), [])

    def test_a_result_missing_a_required_member_is_recorded(self):
        drifted = {k: v for k, v in INFO.items() if k != "connections"}
        self.answer("server.info", [], {"result": drifted})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("reply to server.info", found[0])
        self.assertIn("'connections' is a required property", found[0])

    def test_a_renamed_member_is_recorded(self):
        drifted = dict(INFO, uptime=INFO["uptimeSeconds"])
        del drifted["uptimeSeconds"]
        self.answer("server.info", [], {"result": drifted})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("'uptimeSeconds' is a required property", found[0])
        self.assertIn("'uptime' was unexpected", found[0])

    def test_an_undeclared_optional_member_is_recorded(self):
        # The schemas are read closed: a member the file does not list is drift.
        self.answer("server.info", [], {"result": dict(INFO, pid=4242)})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("'pid' was unexpected", found[0])

    def test_a_wrong_type_is_recorded(self):
        self.answer("getStatus", {"request": "r"}, {"result": "200"})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("'200' is not of type 'integer'", found[0])

    def test_an_undeclared_reason_is_recorded(self):
        self.answer("getStatus", {"request": "r"},
                    {"error": {"code": -32001, "message": "x", "data": {"reason": "no_such_thing"}}})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("'no_such_thing' is not declared", found[0])

    def test_a_reason_with_the_wrong_code_is_recorded(self):
        self.answer("getStatus", {"request": "r"},
                    {"error": {"code": -32002, "message": "x", "data": {"reason": "unknown_handle"}}})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("comes with code -32002, declared -32001", found[0])

    def test_a_reason_the_method_does_not_list_is_recorded(self):
        self.answer("getStatus", {"request": "r"},
                    {"error": {"code": -32011, "message": "x", "data": {"reason": "busy"}}})
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("not among getStatus's declared errors", found[0])

    def test_a_batch_is_checked_by_each_call_s_method(self):
        self.client.send([{"jsonrpc": "2.0", "method": "server.info", "id": "a"},
                          {"jsonrpc": "2.0", "method": "getStatus", "params": {"request": "r"}, "id": "b"}])
        self.next_call()
        self.peer.sendall(line([{"jsonrpc": "2.0", "id": "b", "result": 200},
                                {"jsonrpc": "2.0", "id": "a", "result": 200}]))
        self.client.read_message()
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("reply to server.info (id 'a')", found[0])

    def test_a_drifted_notification_is_recorded(self):
        self.peer.sendall(line({"jsonrpc": "2.0", "method": "socket.onRead",
                                "params": {"socket": "s", "available": "12"}}))
        self.peer.sendall(line({"jsonrpc": "2.0", "method": "onSomethingNew", "params": {}}))
        self.client.read_message()
        self.client.read_message()
        found = contract.take_violations()
        self.assertEqual(len(found), 2, found)
        self.assertIn("'12' is not of type 'integer'", found[0])
        self.assertIn("'onSomethingNew' is not declared", found[1])

    def test_raw_bytes_sent_in_pieces_are_followed(self):
        self.client.send_raw(b'{"jsonrpc":"2.0","method":"getSta')
        self.client.send_raw(b'tus","params":{"request":"r"},"id":7}\n')
        self.next_call()
        self.peer.sendall(line({"jsonrpc": "2.0", "id": 7, "result": True}))
        self.client.wait_response(7)
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("reply to getStatus (id 7)", found[0])


class AsyncClientChecked(unittest.TestCase):
    """The asyncio client is checked the same way."""

    def test_a_drifted_reply_to_the_async_client_is_recorded(self):
        from xhrpc.aio import AsyncClient
        contract.take_violations()
        peer, theirs = socket.socketpair()
        self.addCleanup(peer.close)
        peer.settimeout(10)

        async def main():
            reader, writer = await asyncio.open_unix_connection(sock=theirs)
            client = AsyncClient(reader, writer)
            try:
                pending = asyncio.ensure_future(client.request("getStatus", {"request": "r"}))
                call = await asyncio.get_running_loop().run_in_executor(None, lambda: json.loads(
                    peer.makefile("rb").readline()))
                peer.sendall(line({"jsonrpc": "2.0", "id": call["id"], "result": "200"}))
                return await asyncio.wait_for(pending, 10)
            finally:
                await client.close()

        got = asyncio.run(main())
        self.assertEqual(got["result"], "200")
        found = contract.take_violations()
        self.assertEqual(len(found), 1, found)
        self.assertIn("reply to getStatus", found[0])
        self.assertIn("'200' is not of type 'integer'", found[0])


class DriftFailsTheTest(unittest.TestCase):
    """The check installed on every TestCase turns a recorded mismatch into a failure."""

    def test_a_test_that_received_a_drifted_reply_fails(self):
        class Inner(unittest.TestCase):
            def test_drift(self):
                contract.record("reply to server.info (id 1)", {"result": {}}, ["drifted"])

            def test_clean(self):
                pass

        result = unittest.TestResult()
        unittest.defaultTestLoader.loadTestsFromTestCase(Inner).run(result)
        self.assertEqual(result.testsRun, 2)
        self.assertEqual([t.id().rsplit(".", 1)[-1] for t, _ in result.failures], ["test_drift"])
        self.assertIn("ContractViolation", result.failures[0][1])
        self.assertIn("drifted", result.failures[0][1])
        self.assertEqual(result.errors, [])

    def test_a_class_with_a_fake_peer_may_say_so(self):
        class Fake(unittest.TestCase):
            CONTRACT_EXEMPT = "fake peer"

            def test_drift(self):
                contract.record("reply to m (id 1)", {"result": 1}, ["undeclared"])

        result = unittest.TestResult()
        unittest.defaultTestLoader.loadTestsFromTestCase(Fake).run(result)
        self.assertEqual((result.testsRun, result.failures, result.errors), (1, [], []))
        self.assertEqual(contract.take_violations(), [])


if __name__ == "__main__":
    unittest.main()
