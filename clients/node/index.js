'use strict';

/** The xhrpc client for Node.js (CommonJS, standard library only): see README.md. */

const { Client, RPCError, ConnectionClosed, TimeoutError } = require('./lib/client');
const { LineDecoder, encode } = require('./lib/framing');
const { defaultSocketPath } = require('./lib/socket-path');

module.exports = { Client, RPCError, ConnectionClosed, TimeoutError, LineDecoder, encode, defaultSocketPath };
