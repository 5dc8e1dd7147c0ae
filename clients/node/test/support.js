'use strict';

/**
 * Test support: starts the real xhrpcd binary and the real fixture upstream
 * (Tests/Fixtures/upstream.py), makes the test certificates (Tests/Fixtures/certs.py) and
 * the upstream's body pattern, as Tests/Integration/support.py does for Python.
 *
 * The binary is `$XHRPCD` if set, else `<repo>/.build/debug/xhrpcd`, else
 * `<repo>/.build/release/xhrpcd`; a missing binary fails the suite (a run must not pass by
 * testing nothing). Every wait has a deadline; no test sleeps to let something happen.
 */

const { spawn, execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');

const REPO = path.resolve(__dirname, '..', '..', '..');
const FIXTURES = path.join(REPO, 'Tests', 'Fixtures');
const { Client } = require('..');

const START_DEADLINE_MS = 20000;
const STOP_DEADLINE_MS = 15000;
/** node:test has no default timeout: every test and hook here gets one. */
const BOUNDED = { timeout: 60000 };
const HOOK_BOUND = { timeout: 4 * (START_DEADLINE_MS + STOP_DEADLINE_MS) };
const PYTHON = process.env.PYTHON || 'python3';

/** Processes started here and still running: killed if the test process exits without stopping them. */
const live = new Set();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function findBinary() {
  const env = process.env.XHRPCD;
  const candidates = env ? [env] : ['debug', 'release'].map((sub) => path.join(REPO, '.build', sub, 'xhrpcd'));
  for (const p of candidates) {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch (e) {
      // try the next one
    }
  }
  throw new Error(`xhrpcd binary not found: set XHRPCD or build it (swift build --product xhrpcd); looked at ${candidates.join(', ')}`);
}

/**
 * `count` distinct loopback TCP ports that were free a moment ago: bound to 0 all at
 * once, read, then closed. Taken one after another, the kernel may hand out the port
 * it just got back (a TCP and a TLS listener were once given the same one).
 */
async function freeTcpPorts(count) {
  const servers = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(() => resolve()))));
  }
}

/** A loopback TCP port that was free a moment ago (see `freeTcpPorts`). */
async function freeTcpPort() {
  return (await freeTcpPorts(1))[0];
}

/** Resolves with the exit code (null when killed by a signal) once `child` exits, or `undefined` after `ms`. */
function waitExit(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const onExit = (code) => {
      clearTimeout(timer);
      resolve(code);
    };
    const timer = setTimeout(() => {
      child.removeListener('exit', onExit);
      resolve(undefined);
    }, ms);
    child.once('exit', onExit);
  });
}

/** SIGTERM, then SIGKILL if it has not exited within STOP_DEADLINE_MS; resolves with the exit code (null if killed). */
async function terminate(child) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill('SIGTERM');
  let code = await waitExit(child, STOP_DEADLINE_MS);
  if (code === undefined) {
    child.kill('SIGKILL');
    code = await waitExit(child, STOP_DEADLINE_MS);
    return null;
  }
  return code;
}

function canConnect(options) {
  return new Promise((resolve) => {
    const s = net.connect(options);
    const timer = setTimeout(() => done(false), 1000);
    const done = (ok) => {
      clearTimeout(timer);
      s.destroy();
      resolve(ok);
    };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

const sha256hex = (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * One xhrpcd process on a temporary Unix socket, optionally with a loopback TCP listener
 * (`tcp`) and a TLS one (`tls`: the certificates of certs.py are made in its directory,
 * `certs` maps their names to paths, the listener presents `good_cert`). `principals`:
 * {name, token, admin?, uid?, limits?}, written to the config with the token's SHA-256;
 * without any, TCP and TLS run with --insecure-tcp. The egress policy allows loopback,
 * where the upstream listens.
 */
class XhrpcServer {
  constructor({ tcp = false, tls = false, principals = [], args = [], logLevel = 'warning' } = {}) {
    Object.assign(this, { tcp, tls, principals, args, logLevel });
    this.proc = null;
    this.tcpPort = null;
    this.tlsPort = null;
    this.certs = null;
  }

  static start(options) {
    return new XhrpcServer(options).start();
  }

  async start() {
    const binary = findBinary();
    // /tmp keeps the socket path well under the 108-byte sun_path limit.
    this.dir = fs.mkdtempSync(path.join('/tmp', 'xhrpc-node-'));
    this.socketPath = path.join(this.dir, 's.sock');
    const argv = ['--listen', `unix:${this.socketPath}`, '--log-level', this.logLevel];
    if (this.principals.length > 0) {
      const principals = this.principals.map(({ token, ...rest }) =>
        token === undefined ? rest : { ...rest, tokenSha256: sha256hex(token) });
      const configPath = path.join(this.dir, 'config.json');
      fs.writeFileSync(configPath, JSON.stringify({ principals }));
      argv.push('--config', configPath);
    }
    const ports = await freeTcpPorts(2);
    if (this.tcp) {
      this.tcpPort = ports[0];
      argv.push('--listen', `tcp:127.0.0.1:${this.tcpPort}`);
    }
    if (this.tls) {
      this.certs = makeCerts(path.join(this.dir, 'certs'));
      this.tlsPort = ports[1];
      argv.push('--listen', `tls:127.0.0.1:${this.tlsPort}`,
        '--tls-cert', this.certs.good_cert, '--tls-key', this.certs.good_key);
    }
    if ((this.tcp || this.tls) && this.principals.length === 0) argv.push('--insecure-tcp');
    argv.push('--allow', '127.0.0.0/8', '--allow', '::1', '--allow', 'localhost', ...this.args);
    this.argv = [binary, ...argv];
    this.stderrPath = path.join(this.dir, 'stderr.log');
    const out = fs.openSync(path.join(this.dir, 'stdout.log'), 'w');
    const err = fs.openSync(this.stderrPath, 'w');
    this.proc = spawn(binary, argv, { stdio: ['ignore', out, err] });
    fs.closeSync(out);
    fs.closeSync(err);
    live.add(this.proc);
    this.proc.once('exit', () => live.delete(this.proc));
    await this._waitReady();
    return this;
  }

  async _waitReady() {
    const deadline = Date.now() + START_DEADLINE_MS;
    for (;;) {
      if (!this.alive()) {
        throw new Error(`xhrpcd exited with ${this.proc.exitCode} during start-up: ${this.argv.join(' ')}\nstderr:\n${this.stderrText()}`);
      }
      if (await this._accepts()) return;
      if (Date.now() > deadline) {
        this.proc.kill('SIGKILL');
        throw new Error(`xhrpcd did not accept connections within ${START_DEADLINE_MS} ms: ${this.argv.join(' ')}\nstderr:\n${this.stderrText()}`);
      }
      await waitExit(this.proc, 20); // ends at once if it dies, so a crash is reported without delay
    }
  }

  async _accepts() {
    if (!(await canConnect({ path: this.socketPath }))) return false;
    for (const port of [this.tcpPort, this.tlsPort]) {
      if (port !== null && !(await canConnect({ host: '127.0.0.1', port }))) return false;
    }
    return true;
  }

  alive() {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  stderrText() {
    try {
      return fs.readFileSync(this.stderrPath, 'utf8').slice(-20000);
    } catch (e) {
      return '';
    }
  }

  connect(options) {
    return Client.connectUnix(this.socketPath, options);
  }

  /** A TCP client; with `token`, authenticated with it. */
  connectTcp(token) {
    return Client.connectTcp('127.0.0.1', this.tcpPort, { token });
  }

  /** A TCP client authenticated as the principal called `name`. */
  connectAs(name) {
    return this.connectTcp(this.principals.find((p) => p.name === name).token);
  }

  /** A client of the TLS listener, trusting the test CA unless `ca`/`caFile` say otherwise. */
  connectTls(options = {}) {
    const o = options.ca === undefined && options.caFile === undefined ? { caFile: this.certs.ca, ...options } : options;
    return Client.connectTls('127.0.0.1', this.tlsPort, o);
  }

  /** A plain Unix socket to the server, for tests that write bytes the client would not. */
  async rawSocket() {
    const s = net.connect({ path: this.socketPath });
    await once(s, 'connect');
    return s;
  }

  /** SIGTERM, bounded waits, SIGKILL if needed; resolves with the exit code (null if killed). Removes the directory after a clean exit. */
  async stop() {
    if (this.proc === null) return 0;
    const code = await terminate(this.proc);
    if (code === 0) fs.rmSync(this.dir, { recursive: true, force: true });
    return code;
  }
}

/** The fixture upstream (Tests/Fixtures/upstream.py) on 127.0.0.1; endpoints in Tests/Fixtures/README.md. */
class Upstream {
  static async start() {
    const u = new Upstream();
    u.proc = spawn(PYTHON, [path.join(FIXTURES, 'upstream.py'), '--host', '127.0.0.1', '--port', '0'],
      { stdio: ['pipe', 'pipe', 'inherit'] });
    live.add(u.proc);
    u.proc.once('exit', () => live.delete(u.proc));
    u.port = await readReady(u.proc);
    u.base = `http://127.0.0.1:${u.port}`;
    return u;
  }

  url(p) {
    return this.base + p;
  }

  /** Closes its stdin (which stops it); resolves with its exit code (null if it had to be killed). */
  async stop() {
    this.proc.stdin.end();
    let code = await waitExit(this.proc, STOP_DEADLINE_MS);
    if (code === undefined) code = await terminate(this.proc);
    return code;
  }
}

/** Reads the upstream's one `READY <port>` line within START_DEADLINE_MS. */
function readReady(proc) {
  return new Promise((resolve, reject) => {
    let text = '';
    const finish = (err, port) => {
      clearTimeout(timer);
      proc.stdout.removeListener('data', onData);
      proc.removeListener('exit', onExit);
      if (err) {
        proc.kill('SIGKILL');
        reject(err);
      } else {
        resolve(port);
      }
    };
    const onData = (chunk) => {
      text += chunk.toString('utf8');
      if (!text.includes('\n')) return;
      const m = /^READY (\d+)\n$/.exec(text);
      if (m) finish(null, Number(m[1]));
      else finish(new Error(`upstream printed ${JSON.stringify(text)} instead of one READY line`));
    };
    const onExit = (code) => finish(new Error(`upstream exited before READY (code ${code})`));
    const timer = setTimeout(() => finish(new Error(`upstream did not print READY within ${START_DEADLINE_MS} ms`)), START_DEADLINE_MS);
    proc.stdout.on('data', onData);
    proc.once('exit', onExit);
  });
}

/** The test certificates of Tests/Fixtures/certs.py, made in `dir`: {name: path}. */
function makeCerts(dir) {
  const out = execFileSync(PYTHON, [path.join(FIXTURES, 'certs.py'), dir], { timeout: 60000 });
  return JSON.parse(out.toString('utf8'));
}

/**
 * The upstream's body pattern (Tests/Fixtures/pattern.py): for seed S one block of 65521
 * bytes, block[j] = (j*131 + (j>>8)*7 + S*17) & 0xFF; a body of N bytes is the block
 * repeated and cut to N.
 */
const PATTERN_BLOCK = 65521;

function patternBytes(n, seed = 0) {
  const block = Buffer.alloc(PATTERN_BLOCK);
  for (let j = 0; j < PATTERN_BLOCK; j++) block[j] = (j * 131 + (j >> 8) * 7 + seed * 17) & 0xff;
  const out = Buffer.alloc(n);
  for (let pos = 0; pos < n; pos += PATTERN_BLOCK) block.copy(out, pos, 0, Math.min(PATTERN_BLOCK, n - pos));
  return out;
}

/**
 * Registers the `before`/`after`/`afterEach` hooks of a suite that needs a server (options
 * as XhrpcServer's) and, with `upstream: true`, the fixture upstream. Returns an object
 * whose `server` and `upstream` are set once `before` ran. The suite fails when the server
 * dies during a test or does not exit 0 on SIGTERM.
 */
function useServer(hooks, { upstream = false, ...options } = {}) {
  const env = { server: null, upstream: null };
  hooks.before(async () => {
    if (upstream) env.upstream = await Upstream.start();
    env.server = await XhrpcServer.start(options);
  }, HOOK_BOUND);
  hooks.afterEach(() => {
    if (env.server && !env.server.alive()) {
      throw new Error(`xhrpcd died during the test (exit ${env.server.proc.exitCode}, signal ${env.server.proc.signalCode})\nstderr:\n${env.server.stderrText()}`);
    }
  }, HOOK_BOUND);
  hooks.after(async () => {
    const problems = [];
    if (env.server) {
      const code = await env.server.stop();
      if (code !== 0) problems.push(`xhrpcd exited with ${code} after SIGTERM (expected 0)\nstderr:\n${env.server.stderrText()}`);
    }
    if (env.upstream) {
      const code = await env.upstream.stop();
      if (code !== 0) problems.push(`the fixture upstream exited with ${code}`);
    }
    if (problems.length > 0) throw new Error(problems.join('\n'));
  }, HOOK_BOUND);
  return env;
}

/** A connected client closed when test `t` ends. */
async function closing(t, clientPromise) {
  const c = await clientPromise;
  t.after(() => c.close());
  return c;
}

module.exports = { BOUNDED, REPO, XhrpcServer, Upstream, makeCerts, patternBytes, useServer, closing, freeTcpPort, waitExit };
