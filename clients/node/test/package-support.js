'use strict';

/**
 * Support for the tests of the package as a user gets it (package, types, readme,
 * socket-path): child processes with deadlines (node, npm, tsc), a project directory
 * where `require('xhrpc')` finds this package, and xhrpcd started with no --listen so that
 * it listens on its own default socket.
 *
 * Like support.js, every wait here has a deadline and every process started is stopped.
 */

const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { REPO, waitExit } = require('./support');
const { defaultSocketPath } = require('..');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const RUN_DEADLINE_MS = 60000;
const START_DEADLINE_MS = 20000;
const STOP_DEADLINE_MS = 15000;

/** Processes started here and still running: killed if the test process exits without stopping them. */
const live = new Set();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * Runs `file` with `args` and resolves to {code, stdout, stderr} (code null when killed at
 * the deadline); never rejects for a non-zero exit, so that the test can quote the output.
 * A missing program rejects with its ENOENT error.
 */
function run(file, args, { cwd, env, timeoutMs = RUN_DEADLINE_MS } = {}) {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err && err.code === 'ENOENT') reject(err);
        else resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
      });
  });
}

/** `{code, stdout, stderr}` as one text for an assertion's message. */
function describeRun(what, result) {
  return `${what} exited with ${result.code}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
}

/** Runs and fails (with the output) unless the exit code is 0; resolves to stdout. */
async function runOk(what, file, args, options) {
  const result = await run(file, args, options);
  if (result.code !== 0) throw new Error(describeRun(what, result));
  return result.stdout;
}

/** An environment for npm that keeps it off the network and off the user's cache and config. */
function npmEnv(dir) {
  return {
    ...process.env,
    npm_config_cache: path.join(dir, 'npm-cache'),
    npm_config_userconfig: path.join(dir, 'npmrc'),
    npm_config_offline: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    npm_config_loglevel: 'warn',
  };
}

/** A fresh directory under /tmp (short paths: a socket in it stays under sun_path's 108 bytes). */
function tempDir(prefix) {
  return fs.mkdtempSync(path.join('/tmp', prefix));
}

/**
 * A project directory in which `require('xhrpc')` (and TypeScript's `import ... from
 * 'xhrpc'`) resolves to this working copy: node_modules/xhrpc is a symbolic link to
 * clients/node, as `npm install ./clients/node` makes it.
 */
function linkedProject(dir) {
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'uses-xhrpc', version: '1.0.0', private: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PACKAGE_DIR, path.join(dir, 'node_modules', 'xhrpc'), 'dir');
  return dir;
}

/**
 * Runs Debian's `tsc` (package node-typescript) with `args` in `cwd`. Its absence fails the
 * test with what to install: the declarations are part of what the suite proves, so it must
 * not pass by skipping them.
 */
async function tsc(args, cwd) {
  try {
    return await run('tsc', args, { cwd });
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
    throw new Error('tsc not found: the TypeScript declarations (clients/node/index.d.ts) are checked with it. ' +
      'Install Debian\'s node-typescript (apt-get install -y node-typescript; make test-deps does it).');
  }
}

/** Runs tsc and fails, quoting what it printed, unless it exits 0. */
async function tscOk(dir, args) {
  const result = await tsc(args, dir);
  if (result.code !== 0) throw new Error(describeRun(`tsc ${args.join(' ')} in ${dir}`, result));
}

/**
 * A tsconfig.json in `dir` for `files`: strict, ES2020 with no DOM library and no automatic
 * @types (so that a global the declarations use without declaring it is an error), output
 * in `out/`.
 */
function writeTsconfig(dir, files) {
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, target: 'es2020', lib: ['es2020'], module: 'commonjs', types: [], outDir: 'out' },
    files,
  }, null, 2));
}

function canConnect(socketPath) {
  return new Promise((resolve) => {
    const s = net.connect({ path: socketPath });
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

/** The binary as support.js finds it: $XHRPCD, else the debug build, else the release build. */
function findBinary() {
  const candidates = process.env.XHRPCD ? [process.env.XHRPCD]
    : ['debug', 'release'].map((sub) => path.join(REPO, '.build', sub, 'xhrpcd'));
  const found = candidates.find((p) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch (e) {
      return false;
    }
  });
  if (!found) throw new Error(`xhrpcd binary not found: set XHRPCD or build it; looked at ${candidates.join(', ')}`);
  return found;
}

/**
 * xhrpcd with no --listen, in an environment whose XDG_RUNTIME_DIR is a fresh private
 * directory: it listens where the server's own default rule puts it. `env` is that
 * environment (give it to a child process and `Client.connectUnix()` there finds the
 * server), `socketPath` the client's defaultSocketPath(env), which the start waits for: a
 * server listening anywhere else fails the start. `args`: more flags (the egress policy
 * allows loopback, where the fixture upstream listens).
 */
async function startOnDefaultSocket({ args = [] } = {}) {
  const dir = tempDir('xhrpc-xdg-');
  const env = { ...process.env, XDG_RUNTIME_DIR: dir };
  const socketPath = defaultSocketPath(env);
  const binary = findBinary();
  const argv = ['--log-level', 'warning', '--allow', '127.0.0.0/8', '--allow', '::1', '--allow', 'localhost', ...args];
  const stderrPath = path.join(dir, 'stderr.log');
  const err = fs.openSync(stderrPath, 'w');
  const proc = spawn(binary, argv, { stdio: ['ignore', 'ignore', err], env });
  fs.closeSync(err);
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
  const stderrText = () => {
    try {
      return fs.readFileSync(stderrPath, 'utf8').slice(-20000);
    } catch (e) {
      return '';
    }
  };
  const server = {
    dir,
    env,
    socketPath,
    proc,
    stderrText,
    alive: () => proc.exitCode === null && proc.signalCode === null,
    /** SIGTERM, then SIGKILL past the deadline; resolves with the exit code (null if killed). */
    async stop() {
      let code = proc.exitCode;
      if (server.alive()) {
        proc.kill('SIGTERM');
        code = await waitExit(proc, STOP_DEADLINE_MS);
        if (code === undefined) {
          proc.kill('SIGKILL');
          await waitExit(proc, STOP_DEADLINE_MS);
          code = null;
        }
      }
      if (code === 0) fs.rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
  const deadline = Date.now() + START_DEADLINE_MS;
  for (;;) {
    if (!server.alive()) throw new Error(`xhrpcd exited with ${proc.exitCode} during start-up\nstderr:\n${stderrText()}`);
    if (await canConnect(socketPath)) return server;
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`xhrpcd did not accept connections on ${socketPath} (the client's default for XDG_RUNTIME_DIR=${dir}) ` +
        `within ${START_DEADLINE_MS} ms; the directory holds ${JSON.stringify(fs.readdirSync(dir))}\nstderr:\n${stderrText()}`);
    }
    await waitExit(proc, 20); // ends at once if it dies
  }
}

module.exports = {
  PACKAGE_DIR, run, runOk, describeRun, npmEnv, tempDir, linkedProject, tsc, tscOk, writeTsconfig, startOnDefaultSocket,
};
