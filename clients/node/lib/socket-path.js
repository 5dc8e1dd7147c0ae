'use strict';

/**
 * Where xhrpcd listens when it is given no `--listen`: the same rule as the server's
 * `ListenAddress.defaultUnix` (Sources/Service/Listening/ListenAddress.swift), so that a client
 * started in the same session as `make run` finds it with no configuration.
 */

/**
 * `$XDG_RUNTIME_DIR/xhrpc.sock` when XDG_RUNTIME_DIR is set and not empty, else
 * `/tmp/xhrpc-<uid>.sock`. `env` (default `process.env`) is read for XDG_RUNTIME_DIR; the
 * uid is this process's real uid, as the server's `getuid()`. The directory is joined as
 * the server joins it (`dir + "/xhrpc.sock"`, no normalisation), so the two agree byte for
 * byte even for a value with a trailing slash.
 */
function defaultSocketPath(env = process.env) {
  const dir = env.XDG_RUNTIME_DIR;
  if (typeof dir === 'string' && dir !== '') return dir + '/xhrpc.sock';
  if (typeof process.getuid !== 'function') {
    throw new Error('no default xhrpc socket on this platform (no getuid): give the socket path');
  }
  return `/tmp/xhrpc-${process.getuid()}.sock`;
}

module.exports = { defaultSocketPath };
