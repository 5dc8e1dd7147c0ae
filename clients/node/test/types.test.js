'use strict';

// index.d.ts, the TypeScript declarations, checked with Debian's tsc (node-typescript):
// test/types/usage.ts uses every export under --strict, with no @types/node and no DOM
// library (the declarations must stand alone; package.test.js checks the same program
// against the installed package, through `types` and through `exports`); the same program
// compiled and run against a real xhrpcd with TCP and TLS listeners, so that a declared
// name the JavaScript lacks fails too; and the declared methods, notifications and server
// requests (x-server-requests) are those of api/openrpc.json. A missing tsc fails the
// suite: nothing here is skipped.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { useServer, BOUNDED, REPO } = require('./support');
const { PACKAGE_DIR, tempDir, linkedProject, writeTsconfig, tscOk, runOk } = require('./package-support');

const TYPES_DIR = path.join(__dirname, 'types');

describe('TypeScript declarations', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true, tcp: true, tls: true });
  let dir;
  before(() => {
    dir = linkedProject(tempDir('xhrpc-types-'));
    for (const file of ['usage.ts', 'with-buffer.ts']) fs.copyFileSync(path.join(TYPES_DIR, file), path.join(dir, file));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('usage.ts type-checks with tsc --noEmit --strict', { timeout: 120000 }, async () => {
    writeTsconfig(dir, ['usage.ts']);
    await tscOk(dir, ['-p', 'tsconfig.json', '--noEmit', '--strict']);
  });

  it('bytes are typed as Buffer where @types/node declares it', { timeout: 120000 }, async () => {
    writeTsconfig(dir, ['with-buffer.ts']);
    await tscOk(dir, ['-p', 'tsconfig.json', '--noEmit', '--strict']);
  });

  it('usage.ts, compiled, runs every call it declares against xhrpcd', { timeout: 120000 }, async () => {
    writeTsconfig(dir, ['usage.ts']);
    await tscOk(dir, ['-p', 'tsconfig.json', '--strict']);
    const s = env.server;
    const args = {
      socket: s.socketPath, tcpPort: s.tcpPort, tlsPort: s.tlsPort, caFile: s.certs.ca,
      ca: fs.readFileSync(s.certs.ca, 'utf8'), upstream: env.upstream.base, dir,
    };
    const out = await runOk('the compiled usage.ts', process.execPath, [path.join(dir, 'out', 'usage.js'), JSON.stringify(args)], { cwd: dir });
    assert.equal(out, 'ok\n');
  });

  it('declares every method, notification and server request of api/openrpc.json, and no other', BOUNDED, () => {
    const api = JSON.parse(fs.readFileSync(path.join(REPO, 'api', 'openrpc.json'), 'utf8'));
    const dts = fs.readFileSync(path.join(PACKAGE_DIR, 'index.d.ts'), 'utf8');
    const block = /^export interface Methods \{\n([\s\S]*?)^\}/m.exec(dts);
    assert.ok(block, 'index.d.ts has no `export interface Methods {` block');
    const declared = [...block[1].matchAll(/^ {2}'?([\w.]+)'?: \{/gm)].map((m) => m[1]).sort();
    assert.deepEqual(declared, api.methods.map((m) => m.name).sort());
    const notifications = [...dts.matchAll(/Notification<'([\w.]+)'/g)].map((m) => m[1]).sort();
    assert.deepEqual(notifications, api['x-notifications'].map((n) => n.name).sort());
    const questions = [...dts.matchAll(/ServerRequest<'([\w.]+)'/g)].map((m) => m[1]).sort();
    assert.deepEqual(questions, api['x-server-requests'].map((n) => n.name).sort());
  });
});
