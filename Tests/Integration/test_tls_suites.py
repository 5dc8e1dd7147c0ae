"""The TLS listener's cipher suites for TLS 1.2 (docs/operations/listeners-and-principals.md, TLS listener: "on 1.2 only ECDHE
suites with AES-GCM or ChaCha20"): a client that offers only suites without forward
secrecy (RSA key exchange) or without an AEAD cipher (CBC with HMAC) is refused with a
handshake_failure alert, while the same hand-built hello with the allowed suites gets a
ServerHello (``test_tls.Handshakes.test_the_hand_built_hello_is_valid_as_tls_1_2``), so
the refusal is for the suites alone. Python's ssl module would pick among its own
suites; the hello is built by hand (``test_tls.client_hello``) to offer exactly these.
"""

import unittest

from support import ServerTestCase
from test_tls import TLS_1_2, TLSServer, client_hello, first_tls_answer

HANDSHAKE_FAILURE = 40

# ECDHE-ECDSA and ECDHE-RSA with AES-CBC and HMAC-SHA256/384 or SHA-1: forward secret,
# but not AEAD.
CBC_SUITES = (0xC023, 0xC024, 0xC027, 0xC028, 0xC009, 0xC00A, 0xC013, 0xC014)
# RSA key exchange with AES-GCM: AEAD, but no forward secrecy.
RSA_KEY_EXCHANGE_SUITES = (0x009C, 0x009D)


class TLS12Suites(TLSServer, ServerTestCase):

    def assertRefused(self, suites, what):
        s = self.raw_tcp()
        s.sendall(client_hello(TLS_1_2, suites))
        self.assertEqual(first_tls_answer(s, 10), ("alert", 2, HANDSHAKE_FAILURE),
                         "a TLS 1.2 hello offering only %s is answered with a fatal handshake_failure" % what)
        self.assertStillServing()

    def test_suites_without_an_aead_cipher_are_refused(self):
        self.assertRefused(CBC_SUITES, "CBC suites")

    def test_suites_without_forward_secrecy_are_refused(self):
        self.assertRefused(RSA_KEY_EXCHANGE_SUITES, "RSA key exchange")


if __name__ == "__main__":
    unittest.main()
