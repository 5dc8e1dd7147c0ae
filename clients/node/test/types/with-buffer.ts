// Where @types/node is loaded the client's bytes are typed as its Buffer. types.test.js
// checks this file with a stand-in for the one global that decides it (the real
// @types/node is not installed here): readBody's bytes must have Buffer's methods.

import { Bytes, Client, encode } from 'xhrpc';

interface StandInBuffer extends Uint8Array {
  readUInt8(offset: number): number;
}

declare global {
  var Buffer: { alloc(size: number): StandInBuffer };
}

export async function firstByte(c: Client, request: string): Promise<number> {
  const body: StandInBuffer = await c.readBody(request);
  const line: Bytes = encode({});
  return body.readUInt8(0) + line.readUInt8(0);
}
