'use strict';

/** The xhrpc client for Node.js (CommonJS, standard library only): see README.md. */

const { Client, RPCError, ConnectionClosed, TimeoutError } = require('./lib/client');
const { LineDecoder, encode } = require('./lib/framing');

module.exports = { Client, RPCError, ConnectionClosed, TimeoutError, LineDecoder, encode };
