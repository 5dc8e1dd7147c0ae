// Every export of the xhrpc package used as a TypeScript program would use it. types.test.js
// checks it with `tsc --strict` (no @types/node, no DOM library: the declarations must
// stand alone), then compiles and runs it against a real xhrpcd, so that a declared name
// missing at run time fails too. The lines after `@ts-expect-error` must not compile: they
// prove the declarations are strict where they should be (tsc fails on an expected error
// that does not come).
//
// Run as: node usage.js '{"socket": ..., "tcpPort": ..., "tlsPort": ..., "ca": "<PEM>",
// "caFile": ..., "upstream": "http://127.0.0.1:PORT", "dir": ...}'; prints "ok".

import {
  AuthResult, BatchCall, Bytes, CallOptions, Client, ClientEvents, ClientOptions, ClientSocket, ConnectionClosed,
  ConnectOptions, DownloadError, DownloadOptions, DownloadResult, ErrorResponse, FetchOptions, FetchResult, Id,
  InboxMessage, JsonValue, Line, LineDecoder, MalformedLine, MethodName, Methods, Notification, ParamsOf,
  ProgressNotification, ReadBodyOptions, Response, ResultOf, RPCError, ShutdownNotification, StateChangeNotification,
  StateName, StateSummary, TimeoutError, TlsConnectOptions, WaitOptions, defaultSocketPath, encode,
  CreateSocketOptions, ListedSocket, RemoteSocket, RemoteSocketEvents, SocketChunk, SocketCloseNotification,
  SocketErrNotification, SocketError, SocketErrorWord, SocketOpenNotification, SocketReadNotification, SocketState,
  SocketStateName, Interceptor, InterceptorEvents, InterceptOptions, InterceptDecision, InterceptEvent, InterceptNotice,
  Replacement, RetryPolicy, RetryOn, ServerRequest, ShouldContinueParams, ShouldContinueQuestion, TransferError,
  FailureReason, WillSendRequestParams, WillSendRequestQuestion, ResponseNotice, DataNotice, FailNotice, FinishNotice,
  Awaitable, MultipartPart,
} from 'xhrpc';

// The few globals this program needs, declared here since no @types/node is loaded.
declare const process: { argv: string[]; exitCode?: number };
declare const console: { log(...values: unknown[]): void; error(...values: unknown[]): void };

interface Args {
  socket: string;
  tcpPort: number;
  tlsPort: number;
  ca: string;
  caFile: string;
  upstream: string;
  dir: string;
}

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`failed: ${what}`);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

const isDone = (m: Notification): m is StateChangeNotification => m.method === 'onStateChange' && m.params.state === 5;

async function requestObject(c: Client, args: Args): Promise<void> {
  const created: ResultOf<'create'> = await c.call('create');
  const r: string = created.request;
  const opened: true = await c.call('open', { request: r, method: 'GET', url: `${args.upstream}/bytes/3000?seed=1` });
  check(opened, 'open');
  await c.call('setRequestHeader', { request: r, header: 'X-Typed', value: 'yes' }, { timeout: 5 });
  const sent: true | StateSummary = await c.call('send', { request: r });
  check(sent === true, 'send answers true');
  const options: ReadBodyOptions = { timeout: 30, maxBytes: 1000 };
  const body: Bytes = await c.readBody(r, options);
  check(body.length === 3000, 'readBody');
  const done = await c.waitNotification(isDone, { timeout: 10 });
  const stateName: StateName = done.params.stateName;
  check(stateName === 'DONE' && done.params.status === 200 && done.params.statusText === 'OK', 'the DONE notification');
  const state = await c.call('getState', { request: r });
  check(state.stateName === 'DONE', 'getState');
  const response: Response<number> = await c.request('getStatus', { request: r }, { timeout: 5, id: 'typed-id' });
  check('result' in response && response.result === 200 && response.id === 'typed-id', 'request');
  const header: string = await c.call('getResponseHeader', { request: r, header: 'Content-Length' });
  check(header === '3000', 'getResponseHeader');
  const listed = await c.call('list');
  check(listed.some((l) => l.kind === 'request' && l.request === r && l.status === 200), 'list');
  await c.call('release', { request: r });
  const others: InboxMessage[] = c.pending();
  check(others.length === 4, 'the four earlier notifications wait in the inbox');
  const any: Notification = await c.waitNotification();
  check(any.method === 'onStateChange', 'waitNotification with no predicate');
  const first: InboxMessage = await c.waitMessage((m) => !Array.isArray(m) && 'method' in m, { timeout: 5 });
  check(!Array.isArray(first), 'waitMessage');
  await c.waitNotification(null);
  const last: Notification = await c.waitNotification((m) => m.params.request === r);
  check(last.params.stateName === 'LOADING', 'a predicate on params');
}

async function callsAndErrors(c: Client): Promise<void> {
  const info = await c.call('server.info');
  check(info.name === 'xhrpcd' && typeof info.uptimeSeconds === 'number', 'server.info');
  const stats = await c.call('server.stats', {});
  check(typeof stats.bytesIn === 'number', 'server.stats');
  const named: Methods['create']['result'] = await c.call('create', { request: 'typed' } as ParamsOf<'create'>);
  const method: MethodName = 'release';
  await c.call(method, { request: named.request });
  try {
    await c.call('getState', { request: 'no-such-request' });
    check(false, 'unknown_handle rejects');
  } catch (err) {
    check(err instanceof RPCError, 'an RPCError');
    if (err instanceof RPCError) {
      const code: number = err.code;
      const message: string = err.message;
      const reason: string | undefined = err.reason;
      const whole: ErrorResponse | undefined = err.response;
      check(code === -32001 && message.length > 0 && reason === 'unknown_handle' && err.data.reason === reason, 'its fields');
      check(whole !== undefined && whole.error.code === code && err.name === 'RPCError', 'its response');
    }
  }
  const unknown = await c.request('no.such.method', { any: 'thing' });
  check('error' in unknown && unknown.error.code === -32601, 'a method the declarations do not know');
  await c.call('no.such.method').catch((err: RPCError) => check(err.code === -32601, 'call of an unknown method'));
  const calls: BatchCall[] = [['server.info'], ['getState', { request: 'nope' }], ['server.info', undefined, true]];
  const answers: Response[] = await c.batch(calls, { timeout: 5 });
  check(answers.length === 2 && 'result' in answers[0] && 'error' in answers[1], 'batch');
  await c.notify('server.info');
  await c.send({ jsonrpc: '2.0', id: 'sent-by-hand', method: 'server.info' });
  const unmatched = await c.waitMessage((m) => !Array.isArray(m) && 'id' in m && m.id === 'sent-by-hand');
  check(!Array.isArray(unmatched) && 'result' in unmatched, 'a response no call awaited, from the inbox');
  await c.sendRaw('{"jsonrpc":"2.0","id":"raw","method":"server.info"}\n');
  const id: Id = 'raw';
  const raw = await c.waitResponse(id, { timeout: 5 });
  check('result' in raw, 'waitResponse');
  const wait: WaitOptions = { timeout: 0.05 };
  try {
    await c.waitNotification(() => false, wait);
    check(false, 'a wait that gets nothing times out');
  } catch (err) {
    check(err instanceof TimeoutError && err.code === 'ETIMEDOUT' && err.name === 'TimeoutError', 'TimeoutError');
  }
  const progress: ProgressNotification | ShutdownNotification | undefined = undefined;
  check(progress === undefined, 'notification types');
}

async function fetchAndDownload(c: Client, args: Args): Promise<void> {
  const options: FetchOptions = { method: 'POST', headers: { 'X-A': 'b' }, body: 'text', responseType: 'json', timeout: 10 };
  const res: FetchResult = await c.fetch(`${args.upstream}/echo`, options);
  check(res.status === 200 && res.headers !== undefined, 'fetch');
  if (res.encoding === 'json') check(res.body.method === 'POST', 'fetch json');
  else check(false, 'fetch json encoding');
  const bytes = await c.fetch(`${args.upstream}/bytes/10`, { body: new Uint8Array([1, 2]), responseType: 'base64' });
  check(bytes.encoding === 'base64' && typeof bytes.body === 'string', 'fetch base64');
  const parts: MultipartPart[] = [{ name: 'a', value: 'b' }, { name: 'f', filename: 'f.bin', data: new Uint8Array([3]) }];
  const serialized: FetchResult = await c.fetch('echo', {
    baseURL: `${args.upstream}/`, query: { q: ['1', 2, true] }, multipart: parts, request: 'typed-fetch', subscribe: false,
    followRedirects: true, maxRedirects: 3, cookies: true, credential: { user: 'u', password: 'p' },
  });
  check(serialized.request === 'typed-fetch' && serialized.status === 200, 'fetch serializers');
  const json: JsonValue = { k: [1, null, 'x'] };
  check((await c.fetch(`${args.upstream}/echo`, { json })).status === 200, 'fetch json body');
  const { request } = await c.call('create', {});
  await c.call('open', { request, method: 'POST', url: `${args.upstream}/echo` });
  check((await c.setJSONBody(request, json)) === true, 'setJSONBody');
  await c.call('clearPostValues', { request });
  check((await c.addMultipartPart(request, { name: 'x', dataBase64: 'AA==' })) === true, 'addMultipartPart');
  await c.call('release', { request });
  const seen: Array<[number, number]> = [];
  const download: DownloadOptions = { onProgress: (received, total) => seen.push([received, total]), headers: {}, timeout: 30 };
  const result: DownloadResult = await c.download(`${args.upstream}/bytes/5000`, `${args.dir}/typed.bin`, download);
  check(result.bytes === 5000 && result.total === 5000 && result.path.endsWith('typed.bin'), 'download');
  check(seen[0][0] === 0 && seen[seen.length - 1][0] === 5000, 'onProgress');
  try {
    await c.download(`${args.upstream}/status/404`, `${args.dir}/missing.bin`);
    check(false, 'a 404 download rejects');
  } catch (err) {
    check(err instanceof DownloadError, 'DownloadError');
    if (err instanceof DownloadError) {
      check(err.status === 404 && err.statusText === 'Not Found' && err.received === 0, 'its fields');
      check(err.code === 'EDOWNLOAD' && err.url.endsWith('/status/404') && err.name === 'DownloadError', 'its names');
    }
  }
}

const isSocketOpen = (m: Notification): m is SocketOpenNotification => m.method === 'socket.onOpen';

/** A socket to the upstream speaking HTTP/1.1 by hand, with the object and with the methods. */
async function sockets(c: Client, args: Args): Promise<void> {
  const [, hostname, port] = /^http:\/\/([^:/]+):(\d+)/.exec(args.upstream) || [];
  const options: CreateSocketOptions = { ssl: false, name: 'typed-socket', timeout: 5 };
  const s: RemoteSocket = await c.createSocket(hostname, Number(port), options);
  check(s.handle === 'typed-socket' && s.host === hostname && !s.ssl && !s.ended && s.client === c, 'createSocket');
  const heard: string[] = [];
  const onRead: RemoteSocketEvents['read'] = (available) => heard.push(`read ${available}`);
  s.on('open', () => heard.push('open')).on('read', onRead).once('close', (error: SocketError | null) => heard.push(`close ${error}`));
  s.on('err', (error: SocketError) => heard.push(error.error));
  check((await s.disableHostVerification()) && (await s.disablePeerVerification()), 'the verification switches');
  check(await s.connect({ timeout: 10 }), 'connect');
  check(await s.opened({ timeout: 15 }), 'opened');
  const state: SocketState = await s.state();
  const name: SocketStateName = state.stateName;
  check(state.state === 2 && name === 'Open', 'state');
  const queued: number = await s.write('GET /bytes/10 HTTP/1.1\r\nHost: typed\r\nConnection: close\r\n\r\n');
  check(queued > 0, 'write');
  const available: number = await s.readable({ timeout: 10 });
  check(available > 0, 'readable');
  const first: Bytes = await s.read({ maxBytes: 4, timeout: 5 });
  const rest: Bytes = await s.readToEnd({ timeout: 10, maxBytes: 1 << 16 });
  check(first.length === 4 && rest.length > 10 && s.ended, 'read and readToEnd');
  const closed: SocketError | null = await s.disconnected({ timeout: 10 });
  check(closed === null && heard[0] === 'open' && heard.includes('close null'), 'disconnected');
  const listed = await c.call('list');
  const entry = listed.find((l): l is ListedSocket => l.kind === 'socket' && l.socket === 'typed-socket');
  check(entry !== undefined && entry.port === Number(port) && entry.stateName === 'Disconnected', 'list');
  check(s.listenerCount('read') === 1, 'listenerCount');
  s.off('read', onRead).removeAllListeners('open');
  check(await s.release(), 'release');

  // The same through call, and the notification types.
  const created = await c.call('socket.create', { host: hostname, port: Number(port), socket: 'typed-raw' });
  await c.call('socket.connect', { socket: created.socket, timeout: 10 });
  const open: SocketOpenNotification = await c.waitNotification(isSocketOpen, { timeout: 15 });
  check(open.params.socket === 'typed-raw', 'socket.onOpen');
  // GET /echo HTTP/1.1, Host: typed (keep-alive: the upstream keeps the stream open).
  const written = await c.call('socket.write', { socket: 'typed-raw', dataBase64: 'R0VUIC9lY2hvIEhUVFAvMS4xDQpIb3N0OiB0eXBlZA0KDQo=' });
  check(written.bytes === 35, 'socket.write');
  await c.waitNotification((m) => m.method === 'socket.onRead' && m.params.socket === 'typed-raw', { timeout: 10 });
  const chunk: SocketChunk = await c.call('socket.read', { socket: 'typed-raw', maxBytes: 12, encoding: 'utf8' });
  check(chunk.bytes === 12 && chunk.data === 'HTTP/1.1 200' && !chunk.closed, 'socket.read');
  check((await c.call('socket.getState', { socket: 'typed-raw' })).stateName === 'Open', 'socket.getState');
  await c.call('socket.disconnect', { socket: 'typed-raw' });
  await c.call('socket.release', { socket: 'typed-raw' });
  const others: Array<SocketReadNotification | SocketErrNotification | SocketCloseNotification> = [];
  check(others.length === 0, 'the other socket notification types');
  const word: SocketErrorWord = 'refused';
  const err = new SocketError('s', word, 'm');
  check(err.code === 'ESOCKET' && err.name === 'SocketError' && err.socket === 's' && err.message === 'm', 'SocketError');
  while (c.pending().length > 0) await c.waitMessage();
}

/** An interceptor on a connection of its own, and a request object and a fetch it sees; retries. */
async function interception(args: Args): Promise<void> {
  const icpClient = await Client.connectUnix(args.socket, { timeout: 5 });
  const c = await Client.connectUnix(args.socket, { timeout: 5 });
  const asked: WillSendRequestParams[] = [];
  const notices: InterceptNotice[] = [];
  const replace = (params: WillSendRequestParams, question: WillSendRequestQuestion): InterceptDecision => {
    asked.push(params);
    check(question.id.startsWith('srv-') && question.method === 'willSendRequest', 'the question');
    if (params.url.endsWith('/status/204')) return false;
    const r: Replacement = { headers: { ...params.headers, 'X-Intercepted': String(params.attempt) } };
    return r;
  };
  const retried: Array<[number, FailureReason]> = [];
  const options: InterceptOptions = {
    willSendRequest: replace,
    shouldContinueAfterFailWithError: async (params: ShouldContinueParams, question: ShouldContinueQuestion): Promise<boolean> => {
      const error: TransferError = params.error;
      retried.push([params.attempt, error.reason]);
      return question.params.attempt < 2;
    },
    onNotice: (notice: InterceptNotice): Awaitable<void> => {
      notices.push(notice);
    },
    match: ['127.0.0.1'],
    timeout: 5,
    callTimeout: 5,
  };
  const icp: Interceptor = await icpClient.intercept(options);
  check(icp.active && /^icp_[0-9a-f]{32}$/.test(icp.handle) && icp.client === icpClient && icpClient.interceptor === icp, 'intercept');
  const events: InterceptEvent[] = icp.events;
  check(events.length === 6, 'the events its callbacks want');
  const onError: InterceptorEvents['callbackError'] = (error, message: ServerRequest | InterceptNotice) => check(false, `${error} ${message.method}`);
  icp.on('callbackError', onError);

  const echoed = await c.fetch(`${args.upstream}/echo`, { responseType: 'json' });
  check(echoed.encoding === 'json' && echoed.body.headers['x-intercepted'] === '1', 'the replacement was sent');
  const cancelled = await c.fetch(`${args.upstream}/status/204`);
  check(cancelled.status === 0 && cancelled.statusText === 'Cancelled by interceptor', 'cancelled');
  const refused = await c.fetch('http://127.0.0.1:1/', { retry: { maxAttempts: 1 } });
  check(refused.status === 0 && retried.length === 2 && retried[0][0] === 1 && retried[1][1] === 'connect', 'asked after each failure');
  const finished = notices.filter((n): n is FinishNotice => n.method === 'didFinishLoading');
  const heads = notices.filter((n): n is ResponseNotice => n.method === 'didReceiveResponse');
  const data = notices.filter((n): n is DataNotice => n.method === 'didReceiveData');
  const failed: FailNotice[] = notices.filter((n): n is FailNotice => n.method === 'didFailWithError');
  check(finished.length === 1 && heads[0].params.status === 200 && data.length > 0 && failed.length === 0, 'notices');
  check(asked.length === 4 && asked[0].method === 'GET', 'willSendRequest before each attempt');
  icp.off('callbackError', onError);
  check((await icp.unregister({ timeout: 5 })) === true && !icp.active && icpClient.interceptor === null, 'unregister');

  const { request: r } = await c.call('create');
  await c.call('open', { request: r, method: 'GET', url: `${args.upstream}/status/503` });
  const retryOn: RetryOn[] = ['5xx'];
  const policy: RetryPolicy = { maxAttempts: 2, initialDelay: 0, maxDelay: 0, retryOn };
  check(await c.call('setRetryPolicy', { request: r, ...policy }), 'setRetryPolicy');
  await c.call('send', { request: r });
  await c.waitNotification((m) => m.method === 'onStateChange' && m.params.request === r && m.params.state === 5, { timeout: 10 });
  const state = await c.call('getState', { request: r });
  check(state.attempt === 2 && (await c.call('getStatus', { request: r })) === 503, 'retried once');
  const registered = await c.call('intercept.register', { events: ['didFinishLoading'], timeout: 1 });
  check((await c.call('intercept.unregister', { interceptor: registered.interceptor })) === true, 'by call');
  await c.close();
  await icpClient.close();
}

async function connections(args: Args): Promise<void> {
  const unixOptions: ConnectOptions = { timeout: 5, inboxLimit: 100, token: null };
  const c = await Client.connectUnix(args.socket, unixOptions);
  const heard: Notification[] = [];
  const onNotification: ClientEvents['notification'] = (m) => heard.push(m);
  c.on('notification', onNotification).once('close', (error: Error | null) => check(error === null, 'a clean close'));
  c.on('malformed', (entry: MalformedLine) => check(entry.error.length > 0, 'malformed'));
  c.on('unmatched', (m: Response | Response[]) => check(m !== null, 'unmatched'));
  check(c.listenerCount('notification') === 1, 'listenerCount');
  await requestObject(c, args);
  c.off('notification', onNotification);
  c.removeListener('malformed', () => undefined);
  check(heard.length === 5 && heard[4].method === 'onStateChange', 'the notification event');
  await callsAndErrors(c);
  await pauseAndProgress(c, args);
  await fetchAndDownload(c, args);
  await sockets(c, args);
  await interception(args);
  const auth: AuthResult | undefined = c.authResult;
  check(auth === undefined && c.droppedMessages === 0 && c.malformed.length === 0 && !c.isClosed, 'state');
  const socket: ClientSocket = c.socket;
  check(!socket.destroyed, 'the socket');
  await c.shutdownWrite();
  const closed = await c.close();
  check(closed.error === null && c.isClosed && (await c.closed).error === null, 'close');
  try {
    await c.call('server.info');
    check(false, 'a call after close rejects');
  } catch (err) {
    check(err instanceof ConnectionClosed && err.code === 'ECONNCLOSED', 'ConnectionClosed');
  }

  const tcp = await Client.connectTcp('127.0.0.1', args.tcpPort, { timeout: 5 });
  check((await tcp.call('server.info')).name === 'xhrpcd', 'connectTcp');
  await tcp.close();
  const tlsOptions: TlsConnectOptions = { caFile: args.caFile, servername: undefined, timeout: 5 };
  for (const options of [tlsOptions, { ca: args.ca }, { ca: [args.ca] }] as TlsConnectOptions[]) {
    const tls = await Client.connectTls('127.0.0.1', args.tlsPort, options);
    check((await tls.call('server.info')).name === 'xhrpcd', 'connectTls');
    await tls.close();
  }
}

function framing(): void {
  const decoder = new LineDecoder();
  const bytes: Bytes = encode({ jsonrpc: '2.0', method: 'x' });
  const lines: Line[] = decoder.push(bytes.subarray(0, 5));
  check(lines.length === 0, 'nothing before the LF');
  const [line] = decoder.push(bytes.subarray(5));
  check(line.error === null && line.raw === null && line.message.method === 'x', 'a whole line');
  decoder.push(new Uint8Array([0x7b]));
  const end: Line | null = decoder.end();
  check(end !== null && end.error === 'unterminated last line' && end.raw !== null && end.raw.length === 1, 'end');
  check(new Line({ a: 1 }).message.a === 1 && new Line(undefined, 'bad', null).error === 'bad', 'new Line');
  const value: JsonValue = { a: [1, 'b', null, true] };
  check(encode(value).length > 0, 'encode');
}

function defaults(): void {
  const path: string = defaultSocketPath();
  check(path.endsWith('.sock'), 'defaultSocketPath()');
  check(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/7' }) === '/run/user/7/xhrpc.sock', 'defaultSocketPath(env)');
  const options: ClientOptions = { inboxLimit: 5 };
  const call: CallOptions = { timeout: 1 };
  check(options.inboxLimit === 5 && call.timeout === 1, 'option types');
}

/** Never called: uses that must not compile. */
export function rejected(c: Client, r: string, socket: ClientSocket): void {
  // @ts-expect-error open needs method and url
  c.call('open', { request: r });
  // @ts-expect-error getStatus needs its params
  c.call('getStatus');
  // @ts-expect-error server.info takes no params
  c.call('server.info', { extra: 1 });
  // @ts-expect-error a wrong type for a known method's parameter
  c.call('setPipelining', { request: r, enabled: 'yes' });
  // @ts-expect-error a known method cannot take the untyped overload
  c.request('release', 5);
  // @ts-expect-error getStatus answers a number
  const status: Promise<string> = c.call('getStatus', { request: r });
  // @ts-expect-error the listener of notification receives a Notification
  c.on('notification', (m: number) => m);
  // @ts-expect-error there is no such event
  c.on('message', () => undefined);
  // @ts-expect-error download needs a path
  c.download('http://127.0.0.1/');
  // @ts-expect-error a body is text or bytes
  c.fetch('http://127.0.0.1/', { body: 5 });
  // @ts-expect-error onProgress receives numbers
  c.download('http://127.0.0.1/', 'f', { onProgress: (received: string) => received });
  // @ts-expect-error the environment maps names to strings
  defaultSocketPath({ XDG_RUNTIME_DIR: 5 });
  // @ts-expect-error the port is a number
  Client.connectTcp('127.0.0.1', '7700');
  // @ts-expect-error reason may be undefined
  new RPCError(-32001, 'm').reason.length;
  // @ts-expect-error a socket is needed
  new Client();
  // @ts-expect-error without @types/node, bytes are a Uint8Array and have no Buffer methods
  c.readBody(r).then((b) => b.readUInt8(0));
  // @ts-expect-error socket.create needs a port
  c.call('socket.create', { host: 'h' });
  // @ts-expect-error a socket's port is a number
  c.createSocket('h', '80');
  // @ts-expect-error socket data is text or bytes
  c.createSocket('h', 80).then((s) => s.write(5));
  // @ts-expect-error a list entry may be a socket, which has no url
  c.call('list').then((l) => l[0].url);
  // @ts-expect-error an answer is true, false or a replacement
  c.intercept({ willSendRequest: () => 'yes' });
  // @ts-expect-error no such event
  c.intercept({ events: ['didSomething'] });
  // @ts-expect-error maxAttempts is needed
  c.fetch('http://127.0.0.1/', { retry: { initialDelay: 1 } });
  // @ts-expect-error an unknown retryOn word
  c.call('setRetryPolicy', { request: r, maxAttempts: 2, retryOn: ['4xx'] });
  // @ts-expect-error an Interceptor is made by intercept
  new Interceptor();
  // @ts-expect-error the listener of read receives a number
  c.createSocket('h', 80).then((s) => s.on('read', (available: string) => available));
  // @ts-expect-error a RemoteSocket is made by createSocket
  new RemoteSocket();
  new Client(socket, { inboxLimit: 1 });
  status.catch(() => undefined);
}

async function pauseAndProgress(c: Client, args: Args): Promise<void> {
  const r: string = (await c.call('create')).request;
  await c.call('open', { request: r, method: 'GET', url: `${args.upstream}/drip/300?chunk=30`, subscribe: false });
  const sub = await c.call('subscribe', { request: r, events: ['progress'], progressInterval: 10 });
  await c.call('send', { request: r });
  await c.pause(r, { timeout: 5 });
  const state = await c.call('getState', { request: r });
  const paused: true | undefined = state.paused;
  check(paused === true, 'getState paused');
  const listed = await c.call('list');
  check(listed.some((l) => l.kind === 'request' && l.request === r && l.paused === true), 'list paused');
  await c.resume(r);
  check((await c.readBody(r)).length === 300, 'the body after resume');
  const isLast = (m: Notification): m is ProgressNotification =>
    m.method === 'onProgress' && (m as ProgressNotification).params.totalBytesReceived === 300;
  const last: ProgressNotification['params'] = (await c.waitNotification(isLast, { timeout: 10 })).params;
  check(last.bytesReceived >= 0 && last.totalBytesExpectedToReceive === 300, 'onProgress');
  await c.call('unsubscribe', { subscription: sub.subscription });
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]) as Args;
  defaults();
  framing();
  await connections(args);
  console.log('ok');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
