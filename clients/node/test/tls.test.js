'use strict';

// The real tls: listener with verification on: the test CA passes (host name checked
// against the certificate's IP SAN, or a name given as servername), a wrong CA, a wrong
// name and the system CAs fail; a token authenticates over TLS.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { Client, RPCError } = require('..');
const { useServer, closing, BOUNDED } = require('./support');

const TOKEN = 'carol-token-0123456789abcdef';

/**
 * A TLS refusal from Node with this `code`. The server sends its leaf only, so a chain
 * that does not lead to a trusted CA fails at the leaf: UNABLE_TO_VERIFY_LEAF_SIGNATURE.
 */
const tlsRefusal = (code) => (e) => {
  assert.ok(!(e instanceof RPCError), String(e));
  assert.equal(e.code, code, e.message);
  return true;
};

describe('TLS listener', () => {
  const env = useServer({ before, after, afterEach }, { tls: true, principals: [{ name: 'carol', token: TOKEN }] });

  it('the test CA passes, and a token authenticates before the promise resolves', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connectTls({ token: TOKEN }));
    assert.deepEqual(c.authResult, { principal: 'carol', admin: false });
    assert.equal(c.socket.authorized, true);
    assert.equal((await c.call('server.info')).name, 'xhrpcd');
  });

  it('the CA as PEM text and the name as servername pass too; without a token calls are unauthenticated', BOUNDED, async (t) => {
    const ca = fs.readFileSync(env.server.certs.ca, 'utf8');
    const c = await closing(t, env.server.connectTls({ ca, servername: 'localhost' }));
    await assert.rejects(c.call('server.info'), (e) => e instanceof RPCError && e.reason === 'unauthenticated');
    assert.deepEqual(await c.call('auth', { token: TOKEN }), { principal: 'carol', admin: false });
  });

  it('a wrong CA is refused', BOUNDED, async () => {
    await assert.rejects(env.server.connectTls({ caFile: env.server.certs.untrusted_ca, token: TOKEN }),
      tlsRefusal('UNABLE_TO_VERIFY_LEAF_SIGNATURE'));
  });

  it("the system's CAs (no ca given) refuse the test certificate", BOUNDED, async () => {
    await assert.rejects(Client.connectTls('127.0.0.1', env.server.tlsPort, { token: TOKEN }),
      tlsRefusal('UNABLE_TO_VERIFY_LEAF_SIGNATURE'));
  });

  it('a name the certificate does not hold is refused', BOUNDED, async () => {
    await assert.rejects(env.server.connectTls({ servername: 'wrong.example', token: TOKEN }),
      tlsRefusal('ERR_TLS_CERT_ALTNAME_INVALID'));
  });
});
