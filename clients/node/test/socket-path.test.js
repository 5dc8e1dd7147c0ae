'use strict';

// The default socket path: the client's rule (defaultSocketPath) as the server's
// (Sources/Service/Listening/ListenAddress.swift), and the proof that they agree: xhrpcd started with
// no --listen is found by Client.connectUnix() with no path, in the same environment.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Client, defaultSocketPath } = require('..');
const { BOUNDED } = require('./support');
const { startOnDefaultSocket, runOk, PACKAGE_DIR } = require('./package-support');

describe('defaultSocketPath', () => {
  it('is $XDG_RUNTIME_DIR/xhrpc.sock when XDG_RUNTIME_DIR is set, joined as the server joins it', () => {
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/1000' }), '/run/user/1000/xhrpc.sock');
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/1000/' }), '/run/user/1000//xhrpc.sock');
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: 'relative' }), 'relative/xhrpc.sock');
  });

  it('is /tmp/xhrpc-<uid>.sock when XDG_RUNTIME_DIR is unset or empty', () => {
    const fallback = `/tmp/xhrpc-${process.getuid()}.sock`;
    assert.equal(defaultSocketPath({}), fallback);
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '' }), fallback);
    assert.equal(defaultSocketPath({ HOME: '/root', XDG_RUNTIME_DIR: undefined }), fallback);
  });

  it('reads process.env when given no environment', () => {
    assert.equal(defaultSocketPath(), defaultSocketPath(process.env));
  });
});

describe('the server on its default socket', () => {
  let server;
  before(async () => {
    server = await startOnDefaultSocket();
  }, { timeout: 60000 });
  after(async () => {
    const code = await server.stop();
    assert.equal(code, 0, `xhrpcd exited with ${code} after SIGTERM\n${server.stderrText()}`);
  }, { timeout: 60000 });

  it('listens at defaultSocketPath() of its environment (the start waited for exactly that path)', () => {
    assert.equal(server.socketPath, path.join(server.dir, 'xhrpc.sock'));
  });

  it('is found by Client.connectUnix() with no path, in a process with the same environment', BOUNDED, async () => {
    const program = `
      const { Client } = require(${JSON.stringify(PACKAGE_DIR)});
      (async () => {
        const c = await Client.connectUnix(undefined, { timeout: 5 });
        const info = await c.call('server.info');
        await c.close();
        process.stdout.write(info.name);
      })().catch((err) => { console.error(err); process.exitCode = 1; });`;
    const out = await runOk('a client on the default socket', process.execPath, ['-e', program], { env: server.env });
    assert.equal(out, 'xhrpcd');
  });

  it('is found by connectUnix() in this process when XDG_RUNTIME_DIR says where', BOUNDED, async (t) => {
    const saved = process.env.XDG_RUNTIME_DIR;
    process.env.XDG_RUNTIME_DIR = server.dir;
    t.after(() => {
      if (saved === undefined) delete process.env.XDG_RUNTIME_DIR;
      else process.env.XDG_RUNTIME_DIR = saved;
    });
    const c = await Client.connectUnix();
    t.after(() => c.close());
    assert.equal((await c.call('server.info')).name, 'xhrpcd');
  });
});
