// Fetch a URL through xhrpcd with the Node client.
//
//     node examples/node/fetch.js http://127.0.0.1:8080/hello.txt
//
// The server is found on its default socket, or at $XHRPC_SOCKET.
'use strict';
const path = require('path');
const xhrpc = require(path.join(__dirname, '..', '..', 'clients', 'node'));

async function main() {
  const url = process.argv[2];
  const client = await xhrpc.Client.connectUnix(process.env.XHRPC_SOCKET || undefined);
  try {
    const r = await client.call('fetch', { url });
    console.log('fetch:', r.status, r.statusText, r.body.length, 'characters');
  } finally {
    client.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
