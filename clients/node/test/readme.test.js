'use strict';

// The examples of clients/node/README.md run as written: every ```js block is saved as a
// program in a project where require('xhrpc') finds this package (linked, as `npm install
// /path/to/clients/node` does) and run with node, the URL of the fixture upstream as its
// argument, against xhrpcd on its default socket (under a private XDG_RUNTIME_DIR, so
// that Client.connectUnix() with no path finds it). Each must exit 0 and write nothing to
// stderr.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Upstream, BOUNDED, patternBytes } = require('./support');
const { PACKAGE_DIR, tempDir, linkedProject, run, describeRun, startOnDefaultSocket } = require('./package-support');

const BODY_BYTES = 200000;

/** The ```js blocks of the README, in order. */
function examples() {
  const text = fs.readFileSync(path.join(PACKAGE_DIR, 'README.md'), 'utf8');
  return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

describe('the README\'s examples', () => {
  const blocks = examples();
  let server;
  let upstream;
  let project;
  before(async () => {
    upstream = await Upstream.start();
    server = await startOnDefaultSocket();
    project = linkedProject(tempDir('xhrpc-readme-'));
  }, { timeout: 60000 });
  after(async () => {
    const problems = [];
    if (server) {
      const code = await server.stop();
      if (code !== 0) problems.push(`xhrpcd exited with ${code} after SIGTERM\n${server.stderrText()}`);
    }
    if (upstream && (await upstream.stop()) !== 0) problems.push('the fixture upstream did not exit 0');
    if (project) fs.rmSync(project, { recursive: true, force: true });
    assert.deepEqual(problems, []);
  }, { timeout: 60000 });

  it('there are examples to run', () => {
    assert.ok(blocks.length >= 3, `only ${blocks.length} js blocks in README.md`);
  });

  blocks.forEach((code, i) => {
    it(`example ${i + 1} runs and exits 0`, BOUNDED, async () => {
      const file = path.join(project, `example-${i + 1}.js`);
      fs.writeFileSync(file, code);
      const url = upstream.url(`/bytes/${BODY_BYTES}?seed=3`);
      const result = await run(process.execPath, [file, url], { cwd: project, env: server.env });
      const what = `README example ${i + 1}\n${code}`;
      assert.equal(result.code, 0, describeRun(what, result));
      assert.equal(result.stderr, '', describeRun(what, result));
      assert.notEqual(result.stdout, '', describeRun(what, result));
      assert.ok(server.alive(), 'xhrpcd died');
    });
  });

  it('the download example left the whole body in its file', BOUNDED, () => {
    const written = fs.readdirSync(project).filter((f) => f.startsWith('download'));
    assert.deepEqual(written, ['download.out']);
    assert.ok(fs.readFileSync(path.join(project, 'download.out')).equals(patternBytes(BODY_BYTES, 3)));
  });
});
