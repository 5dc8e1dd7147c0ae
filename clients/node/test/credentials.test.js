'use strict';

// Client#credentialsSet, #credentialsList, #credentialsRemove against the real xhrpcd and
// the fixture upstream's /basic-auth and /digest-auth: a stored credential answers the
// challenge of its own protection space (attempt 2 of the same request), and no other.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { useServer, closing, BOUNDED } = require('./support');

describe('Client credentials', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true });

  it('sets, lists without passwords, answers Basic and Digest challenges, and removes', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const port = Number(new URL(env.upstream.url('/')).port);
    const url = env.upstream.url('/basic-auth/nu/n-s3cret');
    assert.equal((await c.fetch(url)).status, 401);
    await c.credentialsSet({ host: '127.0.0.1', port, scheme: 'http', realm: 'xhrpc', user: 'nu', password: 'n-s3cret' });
    await c.credentialsSet({ host: 'Example.org', user: 'other', password: 'x', auth: 'DIGEST' });
    const listed = await c.credentialsList();
    assert.deepEqual(listed, [
      { scheme: 'http', host: '127.0.0.1', port, realm: 'xhrpc', auth: null, user: 'nu' },
      { scheme: 'https', host: 'example.org', port: 443, realm: null, auth: 'DIGEST', user: 'other' },
    ]);
    assert.ok(!JSON.stringify(listed).includes('s3cret'));
    assert.deepEqual((await c.fetch(url, { responseType: 'json' })).body, { authenticated: true, user: 'nu' });
    const digest = await c.fetch(env.upstream.url('/digest-auth/nu/n-s3cret?algorithm=SHA-256'), { responseType: 'json' });
    assert.deepEqual([digest.status, digest.body], [200, { authenticated: true, user: 'nu' }]);
    assert.equal(await c.credentialsRemove({ host: '127.0.0.1', port, scheme: 'http' }), false, 'the any-realm entry is another key');
    assert.equal(await c.credentialsRemove({ host: '127.0.0.1', port, scheme: 'http', realm: 'xhrpc' }), true);
    assert.equal((await c.fetch(url)).status, 401);
    await assert.rejects(c.credentialsSet({ host: 'a.test', user: 'u' }), (e) => e.code === -32602);
  });
});
