'use strict';

// The package as npm publishes it: `npm pack` in clients/node (no registry: the package
// has no dependencies), the tarball's contents (the code, its declarations, README and
// LICENSE; no tests), the manifest a registry would show, an offline install into a
// fresh project, `require('xhrpc')` there calling a real xhrpcd, and the installed
// declarations type-checked through that project's node_modules.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { useServer, BOUNDED } = require('./support');
const { PACKAGE_DIR, runOk, npmEnv, tempDir, writeTsconfig, tscOk } = require('./package-support');

const NPM_BOUND = { timeout: 120000 };

describe('the npm package', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true });
  let dir;
  let tarball;
  let project;

  before(async () => {
    dir = tempDir('xhrpc-pack-');
    const dist = path.join(dir, 'dist');
    fs.mkdirSync(dist);
    const packed = JSON.parse(await runOk('npm pack', 'npm', ['pack', '--json', '--pack-destination', dist],
      { cwd: PACKAGE_DIR, env: npmEnv(dir) }));
    tarball = path.join(dist, packed[0].filename);
    project = path.join(dir, 'project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
    await runOk('npm install', 'npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project, env: npmEnv(dir) });
  }, NPM_BOUND);
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('packs the code, its declarations, README and LICENSE, and no tests', BOUNDED, async () => {
    assert.equal(path.basename(tarball), 'xhrpc-0.1.0.tgz');
    const listed = (await runOk('tar', 'tar', ['-tzf', tarball])).split('\n').filter((l) => l !== '' && !l.endsWith('/'));
    const lib = fs.readdirSync(path.join(PACKAGE_DIR, 'lib')).filter((f) => f.endsWith('.js')).map((f) => `lib/${f}`);
    const expected = ['LICENSE', 'README.md', 'index.d.ts', 'index.js', 'package.json', ...lib].map((f) => `package/${f}`);
    assert.deepEqual(listed.sort(), expected.sort());
  });

  it('has the manifest a registry shows: public, Apache-2.0, Node >= 18, types and exports', BOUNDED, () => {
    const installed = path.join(project, 'node_modules', 'xhrpc');
    assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'installed from the tarball, not linked');
    const manifest = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'));
    assert.equal(manifest.private, undefined);
    assert.deepEqual([manifest.name, manifest.version, manifest.license], ['xhrpc', '0.1.0', 'Apache-2.0']);
    assert.deepEqual(manifest.engines, { node: '>=18' });
    assert.deepEqual(manifest.dependencies, undefined);
    assert.equal(typeof manifest.description, 'string');
    assert.equal(manifest.types, './index.d.ts');
    assert.deepEqual(manifest.exports['.'], { types: './index.d.ts', default: './index.js' });
    for (const file of [manifest.main, manifest.types, manifest.exports['.'].default]) {
      assert.ok(fs.existsSync(path.join(installed, file)), `${file} is in the package`);
    }
    assert.ok(fs.readFileSync(path.join(installed, 'LICENSE'), 'utf8').includes('Apache License'));
  });

  it('require(\'xhrpc\') in the project that installed it talks to xhrpcd', BOUNDED, async () => {
    const program = `
      const xhrpc = require('xhrpc');
      (async () => {
        const c = await xhrpc.Client.connectUnix(process.argv[1]);
        const info = await c.call('server.info');
        const res = await c.fetch(process.argv[2]);
        await c.close();
        console.log(JSON.stringify({ from: require.resolve('xhrpc'), name: info.name, status: res.status, body: res.body }));
      })().catch((err) => { console.error(err); process.exitCode = 1; });`;
    const out = await runOk('a program using the installed package', process.execPath,
      ['-e', program, env.server.socketPath, env.upstream.url('/redirect/0')], { cwd: project });
    const got = JSON.parse(out);
    assert.equal(got.from, path.join(fs.realpathSync(project), 'node_modules', 'xhrpc', 'index.js'));
    assert.deepEqual([got.name, got.status, got.body], ['xhrpcd', 200, 'done']);
  });

  it('its declarations type-check from the project, through `types` and through `exports`', NPM_BOUND, async () => {
    fs.copyFileSync(path.join(__dirname, 'types', 'usage.ts'), path.join(project, 'usage.ts'));
    writeTsconfig(project, ['usage.ts']);
    await tscOk(project, ['-p', 'tsconfig.json', '--noEmit', '--strict']);
    await tscOk(project, ['-p', 'tsconfig.json', '--noEmit', '--strict', '--module', 'node16']);
  });
});
