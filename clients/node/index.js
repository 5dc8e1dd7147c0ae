'use strict';

/**
 * The xhrpc client for Node.js (CommonJS, standard library only): see README.md for the
 * API, index.d.ts for its TypeScript declarations.
 */

const { Client, RPCError, ConnectionClosed, TimeoutError } = require('./lib/client');
const { DownloadError } = require('./lib/download');
const { RemoteSocket, SocketError } = require('./lib/socket');
const { Interceptor } = require('./lib/intercept');
const { LineDecoder, Line, encode } = require('./lib/framing');
const { defaultSocketPath } = require('./lib/socket-path');

module.exports = {
  Client, RPCError, ConnectionClosed, TimeoutError, DownloadError, RemoteSocket, SocketError, Interceptor, LineDecoder, Line,
  encode, defaultSocketPath,
};
