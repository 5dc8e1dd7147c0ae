// TypeScript declarations of the xhrpc Node client (index.js); README.md says how to use it,
// api/openrpc.json in the repository is the protocol these types follow.
//
// They stand alone: neither @types/node nor the DOM library is needed. Where @types/node is
// loaded, bytes are typed as its Buffer (what the client returns at run time); without it,
// as the Uint8Array a Buffer is.

// ---- values ----------------------------------------------------------------

/** Node's Buffer where @types/node is loaded, else Uint8Array (a Buffer is one). */
export type Bytes = typeof globalThis extends { Buffer: { alloc(size: number): infer B } } ? B : Uint8Array;

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON-RPC id as this client matches it: by value and type (1, "1" and true are three ids). */
export type Id = number | string | boolean;

/** The `error` member of an error response. */
export interface ErrorObject {
  code: number;
  message: string;
  /** For xhrpc's own errors (-32001…-32099, and some -32602) an object with a `reason` word. */
  data?: any;
}

export interface SuccessResponse<R = any> {
  jsonrpc: '2.0';
  id: Id | null;
  result: R;
}

export interface ErrorResponse {
  jsonrpc: '2.0';
  id: Id | null;
  error: ErrorObject;
}

/** A whole response object, as `request` and `batch` resolve to. */
export type Response<R = any> = SuccessResponse<R> | ErrorResponse;

/** A message from the server that answers no call: `method` names it (onStateChange, onProgress, onShutdown, socket.on…, the notices to an interceptor). */
export interface Notification<M extends string = string, P = any> {
  jsonrpc: '2.0';
  method: M;
  params: P;
}

/** `onStateChange`: a request changed state (each transition once, in order). */
export interface StateChangeParams {
  request: string;
  state: number;
  stateName: StateName;
  status: number;
  statusText: string;
  /** The attempt of the current send: 0 before the first (OPENED), 1 for the first, 2… for retries (each a new SENT). */
  attempt: number;
  /** Only to a connection that subscribed with `details: true`: the request's method. */
  method?: string;
  /** Only with `details: true`: the URL as `list` shows it (userinfo removed, secret query values REDACTED). */
  url?: string;
}

/**
 * `onProgress`, to subscribers that asked for progress, each at its own pace (subscribe's
 * `progressInterval`); `bytesWritten` and `bytesReceived` count what moved since this
 * connection's previous note, and the expected totals are -1 when unknown.
 */
export interface ProgressParams {
  request: string;
  bytesWritten: number;
  totalBytesWritten: number;
  totalBytesExpectedToWrite: number;
  bytesReceived: number;
  totalBytesReceived: number;
  totalBytesExpectedToReceive: number;
}

/** `onShutdown`: the server is stopping; it goes on serving for up to drainSeconds. */
export interface ShutdownParams {
  drainSeconds: number;
}

/** `socket.onOpen` and `socket.onClose`: a socket's stream opened, or ended. */
export interface SocketParams {
  socket: string;
}

/** `socket.onRead`: the socket's unread bytes went from none to some. */
export interface SocketReadParams {
  socket: string;
  /** Bytes buffered when it was sent. */
  available: number;
}

/** socket.onErr's word for what failed. */
export type SocketErrorWord =
  | 'refused' | 'timeout' | 'resolve' | 'unreachable' | 'tls' | 'policy_denied' | 'proxy' | 'reset' | 'io';

/** `socket.onErr`: the connect failed or the stream broke; socket.onClose follows. */
export interface SocketErrParams {
  socket: string;
  error: SocketErrorWord;
  /** For people; with `tls` it begins with `SSL`, with `policy_denied` with `Denied by egress policy`. */
  message: string;
}

export type StateChangeNotification = Notification<'onStateChange', StateChangeParams>;
export type ProgressNotification = Notification<'onProgress', ProgressParams>;
export type ShutdownNotification = Notification<'onShutdown', ShutdownParams>;
export type SocketOpenNotification = Notification<'socket.onOpen', SocketParams>;
export type SocketReadNotification = Notification<'socket.onRead', SocketReadParams>;
export type SocketErrNotification = Notification<'socket.onErr', SocketErrParams>;
export type SocketCloseNotification = Notification<'socket.onClose', SocketParams>;

// ---- interception ----------------------------------------------------------------

/** What intercept.register may ask for: the two questions and the four notices. */
export type InterceptEvent =
  | 'willSendRequest' | 'shouldContinueAfterFailWithError'
  | 'didReceiveResponse' | 'didReceiveData' | 'didFailWithError' | 'didFinishLoading';

/** Why an attempt failed without a response. */
export type FailureReason = 'connect' | 'resolve' | 'timeout' | 'reset' | 'tls' | 'policy_denied' | 'io';

export interface TransferError {
  reason: FailureReason;
  /** For people: the status text the request would end with. */
  message: string;
}

/**
 * What an attempt sends instead (an interceptor's answer): members left out are kept;
 * `headers` replaces all the request's headers. It passes the checks of any request.
 */
export interface Replacement {
  url?: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  bodyBase64?: string;
}

/** An answer to a question: true (go on), false (cancel, or do not retry), or a replacement. */
export type InterceptDecision = boolean | Replacement;

/** A request the server sends to an interceptor: `id` is a string beginning `srv-`; it must be answered. */
export interface ServerRequest<M extends string = string, P = any> {
  jsonrpc: '2.0';
  id: string;
  method: M;
  params: P;
}

/** willSendRequest: before each attempt. */
export interface WillSendRequestParams {
  /** The request's handle (a fetch's is its own, `fetch_…`). */
  request: string;
  /** 1 for the first attempt. */
  attempt: number;
  method: string;
  url: string;
  /** The headers the request set. */
  headers: Record<string, string>;
}

/** shouldContinueAfterFailWithError: an attempt failed without a response. */
export interface ShouldContinueParams {
  request: string;
  /** The attempt that failed. */
  attempt: number;
  error: TransferError;
  method: string;
  url: string;
}

export type WillSendRequestQuestion = ServerRequest<'willSendRequest', WillSendRequestParams>;
export type ShouldContinueQuestion = ServerRequest<'shouldContinueAfterFailWithError', ShouldContinueParams>;

/** `didReceiveResponse`: once per response kept. */
export interface ResponseNoticeParams {
  request: string;
  status: number;
  statusText: string;
  headers: Record<string, string>;
  /** Content-Length, or -1 when unknown. */
  expectedContentLength: number;
}

/** `didReceiveData`: body bytes (the request's reader still gets them all). */
export interface DataNoticeParams {
  request: string;
  bytes: number;
  dataBase64: string;
}

export interface FailNoticeParams {
  request: string;
  error: TransferError;
}

export type ResponseNotice = Notification<'didReceiveResponse', ResponseNoticeParams>;
export type DataNotice = Notification<'didReceiveData', DataNoticeParams>;
export type FailNotice = Notification<'didFailWithError', FailNoticeParams>;
export type FinishNotice = Notification<'didFinishLoading', OnRequest>;
/** The notices to an interceptor, told apart by `method`. */
export type InterceptNotice = ResponseNotice | DataNotice | FailNotice | FinishNotice;

/** A callback's answer, now or later. */
export type Awaitable<T> = T | Promise<T>;

export interface InterceptOptions {
  /** Answers willSendRequest: true sends as is, false cancels, an object replaces. A throw: sent unchanged. */
  willSendRequest?: (params: WillSendRequestParams, question: WillSendRequestQuestion) => Awaitable<InterceptDecision>;
  /** Answers shouldContinueAfterFailWithError: true retries, an object retries with it, false fails. A throw: not retried. */
  shouldContinueAfterFailWithError?: (params: ShouldContinueParams, question: ShouldContinueQuestion) => Awaitable<InterceptDecision>;
  /** Receives the notices (which then stay out of the inbox). */
  onNotice?: (notice: InterceptNotice) => Awaitable<void>;
  /** What to register for; default: the questions with a callback, and the four notices with onNotice. */
  events?: InterceptEvent[];
  /** Host patterns in the --allow syntax: only requests to a matching host are intercepted; default all. */
  match?: string[];
  /** Seconds the server waits for each answer (more than 0, at most 60; default 5). */
  timeout?: number;
  /** Seconds to wait for intercept.register's answer; default 10. */
  callTimeout?: number;
}

/** The events of an Interceptor and what their listeners receive. */
export interface InterceptorEvents {
  /** A callback threw or returned what is not an answer (the server took the default action), or onNotice threw. */
  callbackError: (error: unknown, message: ServerRequest | InterceptNotice) => void;
}

/** The retry policy of setRetryPolicy and of fetch's `retry`. */
export type RetryOn = 'connect' | 'timeout' | 'reset' | '5xx' | '429' | 'unsafe';

export interface RetryPolicy {
  /** Attempts in all, 1…10. */
  maxAttempts: number;
  /** Seconds before the first retry, doubled for each next one (with jitter); default 0.5. */
  initialDelay?: number;
  /** The longest wait between attempts, in seconds; default 30. */
  maxDelay?: number;
  /** Default connect, timeout, reset, 5xx, 429; unsafe: retry methods that are not idempotent too. */
  retryOn?: RetryOn[];
}

/** What waits in a client's inbox: notifications, and responses (or a batch's array) no call awaits. */
export type InboxMessage = Notification | Response | Response[];

/** A line the server sent that was not JSON (or not UTF-8), or an unterminated last line. */
export interface MalformedLine {
  error: string;
  raw: Bytes;
}

// ---- the protocol's methods --------------------------------------------------

/** A request object's states, by number 0…5. */
export type StateName = 'UNSENT' | 'OPENED' | 'SENT' | 'HEADERS_RECEIVED' | 'LOADING' | 'DONE';

/** send's answer when the request was opened with `async: false`. */
export interface StateSummary {
  state: number;
  stateName: StateName;
  status: number;
  statusText: string;
}

/** Parameters of a method that takes none. */
export type NoParams = Record<string, never>;

export interface OnRequest {
  /** The request's handle, as `create` returned it. */
  request: string;
}

export interface OpenParams extends OnRequest {
  method: string;
  url: string;
  async?: boolean;
  user?: string;
  password?: string;
  auth?: 'BASIC' | 'DIGEST' | 'NEGOTIATE' | 'NTLM';
  subscribe?: boolean;
}

/** A protection space of credentials.set and credentials.remove (scheme default https, port the scheme's; no realm: any). */
export interface ProtectionSpace {
  host: string;
  port?: number;
  scheme?: 'https' | 'http';
  realm?: string;
}

/** A stored credential as credentials.list shows it: never its password. */
export interface StoredCredential {
  scheme: 'https' | 'http';
  host: string;
  port: number;
  realm: string | null;
  auth: AuthName | null;
  user: string;
}

export type AuthName = 'BASIC' | 'DIGEST' | 'NTLM' | 'NEGOTIATE';

/** A multipart/form-data part on the wire: a text field, or a file (bytes or a path below the principal's upload root). */
export type MultipartPartParams =
  | { name: string; value: string; contentType?: string; filename?: string }
  | { name: string; filename?: string; contentType?: string; dataBase64: string }
  | { name: string; filename?: string; contentType?: string; path: string };

/** A multipart part as the client's fetch and addMultipartPart take it: `data` bytes are sent as base64. */
export type MultipartPart =
  | MultipartPartParams
  | { name: string; filename?: string; contentType?: string; data: Uint8Array };

/** fetch's members beyond the body, the method and the response type (api/openrpc.json). */
export interface FetchExtras {
  /** The fetch's handle (its notifications and its result carry it); default a generated `fetch_…`. */
  request?: string;
  /** `url` is resolved against it as RFC 3986 §5.2 says (as browsers do). */
  baseURL?: string;
  /** Appended to the URL, form-urlencoded, in order; an array's values each as name=value. */
  query?: Record<string, string | number | boolean | Array<string | number | boolean>>;
  /** A JSON body (null too): Content-Type application/json unless headers has one. */
  json?: JsonValue;
  /** Form fields: application/x-www-form-urlencoded. */
  form?: Record<string, string>;
  credential?: { user: string; password: string; auth?: 'BASIC' | 'DIGEST' | 'NEGOTIATE' | 'NTLM' };
  followRedirects?: boolean;
  maxRedirects?: number;
  cookies?: boolean;
  proxy?: { host: string; port: number; user?: string; password?: string; auth?: 'BASIC' | 'DIGEST' | 'NTLM' };
  disableHostVerification?: boolean;
  disablePeerVerification?: boolean;
  clientCertificate?: { cert: string; key: string; password?: string };
  pinnedPublicKey?: string;
  /** true: this connection gets the fetch's onStateChange and onProgress. */
  subscribe?: boolean;
}

export interface FetchParams extends FetchExtras {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  bodyBase64?: string;
  multipart?: MultipartPartParams[];
  timeout?: number;
  responseType?: 'text' | 'base64' | 'json';
  retry?: RetryPolicy;
}

/** fetch's answer: `body` is text (utf8), base64, or with responseType json the parsed value. */
export type FetchResult = {
  /** The fetch's handle. */
  request: string;
  status: number;
  statusText: string;
  headers: Record<string, string>;
} & ({ encoding: 'utf8' | 'base64'; body: string } | { encoding: 'json'; body: any });

export interface ServerInfo {
  name: string;
  version: string;
  uptimeSeconds: number;
  connections: number;
}

export interface ServerStats {
  principal: string;
  connections: number;
  connectionsAccepted?: number;
  requests: Record<string, number>;
  /** Socket objects held, by state name. */
  sockets?: Record<string, number>;
  transfersInFlight: number;
  bufferedBytes: number;
  bytesIn: number;
  bytesOut: number;
  httpBytesReceived?: number;
  httpBytesSent?: number;
  socketBytesReceived?: number;
  socketBytesSent?: number;
  errors: Record<string, number>;
  /** Admin only. */
  total?: Record<string, any>;
  /** Admin only: by principal name. */
  principals?: Record<string, Record<string, any>>;
}

export interface ReceivedChunk {
  data: string;
  encoding: string;
  /** How many body bytes `data` holds. */
  bytes: number;
  /** True once the request is DONE and nothing is left to read. */
  done: boolean;
}

export interface ListedRequest {
  request: string;
  kind: 'request';
  state: number;
  stateName: StateName;
  method: string;
  url: string;
  status: number;
  /** Present, and true, while the request is paused (`pause`). */
  paused?: true;
}

/** A socket object's states, by number 0…4. */
export type SocketStateName = 'Prepared' | 'Connecting' | 'Open' | 'Disconnecting' | 'Disconnected';

export interface SocketState {
  state: number;
  stateName: SocketStateName;
}

export interface ListedSocket extends SocketState {
  socket: string;
  kind: 'socket';
  host: string;
  port: number;
  ssl: boolean;
}

export interface OnSocket {
  /** The socket's handle, as `socket.create` returned it. */
  socket: string;
}

/** socket.read's answer. */
export interface SocketChunk {
  data: string;
  encoding: string;
  /** How many received bytes `data` holds. */
  bytes: number;
  /** True once the stream has ended and nothing is left to read. */
  closed: boolean;
}

/** Every method of api/openrpc.json: its parameters and its result. */
export interface Methods {
  'rpc.discover': { params: NoParams; result: { [key: string]: any } };
  auth: { params: { token: string }; result: AuthResult };
  'server.info': { params: NoParams; result: ServerInfo };
  'server.stats': { params: NoParams; result: ServerStats };
  create: { params: { request?: string }; result: { request: string } };
  open: { params: OpenParams; result: true };
  setRequestHeader: { params: OnRequest & { header: string; value: string }; result: true };
  setPostValue: { params: OnRequest & { key: string; value: string }; result: true };
  setJSONBody: { params: OnRequest & { value: JsonValue }; result: true };
  addMultipartPart: { params: OnRequest & MultipartPartParams; result: true };
  clearPostValues: { params: OnRequest; result: true };
  disableFollowLocation: { params: OnRequest; result: true };
  setPipelining: { params: OnRequest & { enabled: boolean }; result: true };
  disablePeerVerification: { params: OnRequest; result: true };
  disableHostVerification: { params: OnRequest; result: true };
  setClientCertificate: { params: OnRequest & { cert: string; key: string; password?: string }; result: true };
  setPinnedPublicKey: { params: OnRequest & { sha256: string }; result: true };
  enableHttpProxy: {
    params: OnRequest & { host: string; port: number; user?: string; password?: string; auth?: 'BASIC' | 'DIGEST' | 'NTLM' };
    result: true;
  };
  disableHttpProxy: { params: OnRequest; result: true };
  enableSecureCommunication: { params: NoParams; result: true };
  disableSecureCommunication: { params: NoParams; result: true };
  isSecureCommunicationEnabled: { params: NoParams; result: boolean };
  send: { params: OnRequest & { body?: string; bodyBase64?: string; timeout?: number }; result: true | StateSummary };
  sendData: { params: OnRequest & { data: string; timeout?: number }; result: true | StateSummary };
  sendWithFile: { params: OnRequest & { path: string; timeout?: number }; result: true | StateSummary };
  getState: { params: OnRequest; result: { state: number; stateName: StateName; attempt: number; paused?: true } };
  pause: { params: OnRequest; result: true };
  resume: { params: OnRequest; result: true };
  getStatus: { params: OnRequest; result: number };
  getStatusText: { params: OnRequest; result: string };
  getResponseHeader: { params: OnRequest & { header: string }; result: string };
  getAllResponseHeaders: { params: OnRequest; result: string };
  getReceiveBuffer: { params: OnRequest & { encoding?: 'base64' | 'utf8'; maxBytes?: number }; result: ReceivedChunk };
  abort: { params: OnRequest; result: boolean };
  close: { params: OnRequest; result: boolean };
  release: { params: OnRequest; result: true };
  detach: { params: NoParams; result: { token: string; requests: string[]; expiresInSeconds: number } };
  attach: { params: { token: string }; result: { requests: string[] } };
  list: { params: NoParams; result: Array<ListedRequest | ListedSocket> };
  disableCookieHandling: { params: OnRequest; result: true };
  clearCookies: { params: OnRequest & { includePersistentStore?: boolean }; result: true };
  setRetryPolicy: { params: OnRequest & RetryPolicy; result: true };
  fetch: { params: FetchParams; result: FetchResult };
  upload: { params: UploadParams; result: { request: string } };
  download: { params: ServerDownloadParams; result: { request: string; path: string } };
  subscribe: {
    params: {
      request?: string;
      socket?: string;
      all?: boolean;
      events?: Array<'stateChange' | 'progress'>;
      /** Milliseconds between two onProgress of one request to this connection: default 100, at least 10. */
      progressInterval?: number;
      /** true: onStateChange to this connection carry the request's method and redacted url. */
      details?: boolean;
    };
    result: { subscription: string };
  };
  unsubscribe: { params: { subscription: string }; result: true };
  'credentials.set': { params: ProtectionSpace & { auth?: AuthName; user: string; password: string }; result: true };
  'credentials.list': { params: NoParams; result: { credentials: StoredCredential[] } };
  'credentials.remove': { params: ProtectionSpace & { user?: string }; result: { removed: boolean } };
  'intercept.register': { params: { events?: InterceptEvent[]; timeout?: number; match?: string[] }; result: { interceptor: string } };
  'intercept.unregister': { params: { interceptor: string }; result: true };
  'socket.create': { params: { host: string; port: number; ssl?: boolean; socket?: string }; result: { socket: string } };
  'socket.disableHostVerification': { params: OnSocket; result: true };
  'socket.disablePeerVerification': { params: OnSocket; result: true };
  'socket.connect': { params: OnSocket & { timeout?: number }; result: true };
  'socket.write': { params: OnSocket & { data?: string; dataBase64?: string }; result: { bytes: number } };
  'socket.read': { params: OnSocket & { maxBytes?: number; encoding?: 'base64' | 'utf8' }; result: SocketChunk };
  'socket.disconnect': { params: OnSocket; result: true };
  'socket.getState': { params: OnSocket; result: SocketState };
  'socket.release': { params: OnSocket; result: true };
}

export type MethodName = keyof Methods;
export type ParamsOf<M extends MethodName> = Methods[M]['params'];
export type ResultOf<M extends MethodName> = Methods[M]['result'];

/** `[params, options]` of a call: params may be left out when the method needs none. */
export type CallArgs<M extends MethodName, O> = {} extends ParamsOf<M>
  ? [params?: ParamsOf<M>, options?: O]
  : [params: ParamsOf<M>, options?: O];

/**
 * A method name that is not one of Methods' (for calls the protocol does not know, such as
 * tests of method_not_found); a known name must take the typed overload.
 */
export type OtherMethod<S extends string> = S & (S extends MethodName ? never : unknown);

// ---- the client ----------------------------------------------------------------

/** What a Client needs of its socket; a net.Socket or tls.TLSSocket has it. */
export interface ClientSocket {
  write(data: Uint8Array, callback: (err?: Error | null) => void): unknown;
  end(callback?: () => void): unknown;
  destroy(): unknown;
  on(event: string, listener: (...args: any[]) => void): unknown;
  readonly destroyed: boolean;
  readonly writable: boolean;
}

export interface ClientOptions {
  /** Unclaimed messages kept in the inbox (default 10000); the oldest go first. */
  inboxLimit?: number;
}

export interface ConnectOptions extends ClientOptions {
  /** Calls auth before the promise resolves; a refusal rejects with its RPCError. */
  token?: string | null;
  /** Seconds for the connect (and the TLS handshake) and for auth; default 10. */
  timeout?: number;
}

/** A CA certificate in PEM, as text or bytes. */
export type PEM = string | Uint8Array;

export interface TlsConnectOptions extends ConnectOptions {
  /** The CA(s) to verify the server's certificate against; else Node's CAs. Not with caFile. */
  ca?: PEM | PEM[];
  /** A PEM file of CA(s), read when connecting. Not with ca. */
  caFile?: string;
  /** The name the certificate must hold; default the host. */
  servername?: string;
}

export interface AuthResult {
  principal: string;
  admin: boolean;
}

export interface CallOptions {
  /** Seconds to wait for the answer; default 10. */
  timeout?: number;
}

export interface RequestOptions extends CallOptions {
  /** The id to send; default the next integer. */
  id?: Id;
}

/** `[method, params]`, or `[method, params, true]` for a notification (no response). */
export type BatchCall = [method: string, params?: unknown, isNotification?: boolean];

export interface WaitOptions {
  /** Seconds to wait; default 10. */
  timeout?: number;
}

export interface ReadBodyOptions {
  /** Seconds for the whole body; default 30. */
  timeout?: number;
  /** At most this many bytes per getReceiveBuffer call. */
  maxBytes?: number;
}

export interface FetchOptions extends FetchExtras {
  /** Parts of a multipart/form-data body. */
  multipart?: MultipartPart[];
  /** Default GET. */
  method?: string;
  headers?: Record<string, string>;
  /** A string is sent as text (UTF-8), bytes as they are. */
  body?: string | Uint8Array | null;
  /** text (default): UTF-8 text, or base64 when the body is not UTF-8; base64; json: parsed when it is JSON. */
  responseType?: 'text' | 'base64' | 'json';
  /** Seconds for the transfer (a positive number, default 30; each attempt's, with retry); the answer may take 5 more. */
  timeout?: number;
  /** Retries, as setRetryPolicy's; the call waits for every attempt and the delays between them. */
  retry?: RetryPolicy | null;
}

export interface DownloadOptions {
  /**
   * Called with (0, total) once the response headers have come, then after each piece
   * written; total is the announced length, or -1 when the response does not say it. A
   * throw stops the download, which rejects with it.
   */
  onProgress?: (received: number, total: number) => void;
  /** Request headers, set with setRequestHeader. */
  headers?: Record<string, string>;
  /** Seconds for the whole download (the server stops the transfer then); default 0: none. */
  timeout?: number;
}

/** The server's upload: exactly one of path, dataBase64 and multipart. */
export interface UploadParams {
  url: string;
  method?: string;
  path?: string;
  dataBase64?: string;
  multipart?: MultipartPartParams[];
  headers?: Record<string, string>;
  request?: string;
  timeout?: number;
}

/** The server's download, into path below the principal's download root. */
export interface ServerDownloadParams {
  url: string;
  path: string;
  headers?: Record<string, string>;
  resume?: boolean;
  request?: string;
  timeout?: number;
}

export interface TransferOptions {
  /** Each onProgress of the transfer's request, as the server sent its params. */
  onProgress?: (params: ProgressParams) => void | Promise<void>;
  headers?: Record<string, string>;
  /** The request's handle; default: generated. */
  request?: string;
  /** Seconds for the whole transfer (the server's timeout); default none. */
  timeout?: number;
}

export interface UploadOptions extends TransferOptions {
  /** A file below the principal's upload root (docs/guide/files.md). */
  path?: string;
  /** The body, when no path is given. */
  data?: string | Uint8Array;
  /** multipart/form-data parts instead of path or data. */
  multipart?: MultipartPart[];
  /** Default POST. */
  method?: string;
}

export interface ServerDownloadOptions extends TransferOptions {
  /** Continue PATH.part with Range and If-Range. */
  resume?: boolean;
}

export interface TransferResult {
  request: string;
  status: number;
  statusText: string;
  /** serverDownload only: the path as the server checked it. */
  path?: string;
}

export interface CreateSocketOptions {
  /** TLS over the stream, verified by the server (default false). */
  ssl?: boolean;
  /** The handle to give the socket (1 to 128 of A-Z a-z 0-9 . _ : -, not starting `req_`); default: generated. */
  name?: string;
  /** Seconds to wait for socket.create's answer; default 10. */
  timeout?: number;
}

export interface SocketConnectOptions {
  /** Seconds for the connection to be established (the server's socket.connect timeout); default 30. */
  timeout?: number;
}

export interface SocketReadOptions {
  /** At most this many bytes; default all that are buffered. */
  maxBytes?: number;
  /** Seconds to wait for the answer; default 10. */
  timeout?: number;
}

export interface ReadToEndOptions {
  /** Seconds for the whole; default 30. */
  timeout?: number;
  /** At most this many bytes per socket.read. */
  maxBytes?: number;
}

/** The events of a RemoteSocket and what their listeners receive. */
export interface RemoteSocketEvents {
  /** socket.onOpen. */
  open: () => void;
  /** socket.onRead: the bytes available. */
  read: (available: number) => void;
  /** socket.onErr. */
  err: (error: SocketError) => void;
  /** socket.onClose: the SocketError of the onErr before it, or null. */
  close: (error: SocketError | null) => void;
}

export interface DownloadResult {
  /** The file written (the path given). */
  path: string;
  bytes: number;
  /** The announced length, or -1. */
  total: number;
  status: number;
  statusText: string;
}

/** The events of a Client and what their listeners receive. */
export interface ClientEvents {
  notification: (message: Notification) => void;
  unmatched: (message: Response | Response[]) => void;
  malformed: (entry: MalformedLine) => void;
  close: (error: Error | null) => void;
}

/**
 * A connection to xhrpcd. At run time it is a Node EventEmitter; the methods declared here
 * are those for its events (ClientEvents).
 */
export class Client {
  /** Wraps a socket that is already connected. */
  constructor(socket: ClientSocket, options?: ClientOptions);

  /**
   * Connects to a Unix socket: `path`, or when it is left out (undefined or null) the
   * server's default, defaultSocketPath().
   */
  static connectUnix(path?: string | null, options?: ConnectOptions): Promise<Client>;
  /** Connects over TCP (TCP_NODELAY). */
  static connectTcp(host: string, port: number, options?: ConnectOptions): Promise<Client>;
  /** Connects to a tls: listener, verifying its certificate and name. */
  static connectTls(host: string, port: number, options?: TlsConnectOptions): Promise<Client>;

  readonly socket: ClientSocket;
  /** auth's answer when a token was given to connect; else undefined. */
  authResult: AuthResult | undefined;
  /** The last 100 lines that were not JSON. */
  readonly malformed: MalformedLine[];
  /** Unclaimed messages pushed out of the full inbox. */
  droppedMessages: number;
  /** Resolves once the connection is closed, by either side: error is the socket's, or null. */
  readonly closed: Promise<{ error: Error | null }>;
  readonly isClosed: boolean;

  /** Calls a method; resolves to its result or rejects with RPCError. */
  call<M extends MethodName>(method: M, ...args: CallArgs<M, CallOptions>): Promise<ResultOf<M>>;
  call<S extends string>(method: OtherMethod<S>, params?: unknown, options?: CallOptions): Promise<any>;

  /** Sends a call; resolves to the whole response object (result or error). */
  request<M extends MethodName>(method: M, ...args: CallArgs<M, RequestOptions>): Promise<Response<ResultOf<M>>>;
  request<S extends string>(method: OtherMethod<S>, params?: unknown, options?: RequestOptions): Promise<Response>;

  /** Waits for the response with this id to a message sent earlier (for example with sendRaw). */
  waitResponse(id: Id, options?: WaitOptions): Promise<Response>;
  /** Sends a notification; resolves once written. */
  notify(method: string, params?: unknown): Promise<void>;
  /** Sends one batch; resolves to its responses in the order of the calls. */
  batch(calls: BatchCall[], options?: WaitOptions): Promise<Response[]>;
  /** Sends one JSON value as one line; resolves once written. */
  send(message: unknown): Promise<void>;
  /** Sends these bytes exactly; resolves once written. */
  sendRaw(data: string | Uint8Array): Promise<void>;

  /** Takes from the inbox the first message the predicate accepts, waiting for one. */
  waitMessage<T extends InboxMessage>(predicate: (message: InboxMessage) => message is T, options?: WaitOptions): Promise<T>;
  waitMessage(predicate?: (message: InboxMessage) => boolean, options?: WaitOptions): Promise<InboxMessage>;
  /** As waitMessage, for notifications only (any one without a predicate). */
  waitNotification<T extends Notification>(predicate: (message: Notification) => message is T, options?: WaitOptions): Promise<T>;
  waitNotification(predicate?: ((message: Notification) => boolean) | null, options?: WaitOptions): Promise<Notification>;
  /** The inbox, oldest first (not removed). */
  pending(): InboxMessage[];

  /** The pause method: pauses a request's transfer in flight until resume; rejects with invalid_state otherwise. */
  pause(request: string, options?: CallOptions): Promise<void>;
  /** The resume method: lifts pause. */
  resume(request: string, options?: CallOptions): Promise<void>;
  /** Reads a request's whole body, byte-exact. */
  readBody(request: string, options?: ReadBodyOptions): Promise<Bytes>;
  /** The fetch method: a whole exchange in one call; no response is status 0, not a rejection. */
  fetch(url: string, options?: FetchOptions): Promise<FetchResult>;
  /** setJSONBody: the request's body becomes `value` as JSON. */
  setJSONBody(request: string, value: JsonValue): Promise<true>;
  /** addMultipartPart: one part of a multipart/form-data body. */
  addMultipartPart(request: string, part: MultipartPart): Promise<true>;
  /**
   * credentials.set: stores a credential of this principal for a protection space; the
   * server sends it only after a matching 401 (or a proxy's 407) and sends the request again.
   */
  credentialsSet(credential: ProtectionSpace & { auth?: AuthName; user: string; password: string }): Promise<void>;
  /** credentials.list: this principal's stored credentials, without passwords. */
  credentialsList(): Promise<StoredCredential[]>;
  /** credentials.remove: false when the space had no credential (or another user's). */
  credentialsRemove(space: ProtectionSpace & { user?: string }): Promise<boolean>;
  /**
   * Downloads url (GET) into the file path, through path + '.part' renamed when complete;
   * rejects with DownloadError for a status outside 2xx or a transfer that failed.
   */
  download(url: string, path: string, options?: DownloadOptions): Promise<DownloadResult>;
  /** The server's upload (a file below the principal's upload root, or data); resolves at DONE. */
  upload(url: string, options: UploadOptions): Promise<TransferResult>;
  /** The server's download into path below the principal's download root; resolves at DONE. */
  serverDownload(url: string, path: string, options?: ServerDownloadOptions): Promise<TransferResult>;
  /**
   * socket.create: a raw TCP (or TLS) stream the server holds, as a RemoteSocket; its
   * notifications go to it, not to the inbox.
   */
  createSocket(host: string, port: number, options?: CreateSocketOptions): Promise<RemoteSocket>;
  /**
   * intercept.register: this connection becomes the interceptor of its principal's
   * requests; the server's questions are answered by the callbacks, on this connection.
   */
  intercept(options: InterceptOptions): Promise<Interceptor>;
  /** The Interceptor this client holds (registered or registering), or null. */
  readonly interceptor: Interceptor | null;

  /** Half-close: nothing more is sent; replies still arrive. */
  shutdownWrite(): Promise<void>;
  /** Flushes what was written and closes; resolves as `closed`. */
  close(): Promise<{ error: Error | null }>;

  on<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  once<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  off<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  addListener<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  removeListener<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  prependListener<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  prependOnceListener<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  removeAllListeners(event?: keyof ClientEvents): this;
  listenerCount(event: keyof ClientEvents): number;
  emit<E extends keyof ClientEvents>(event: E, ...args: Parameters<ClientEvents[E]>): boolean;
}

/**
 * A socket object of the server, made by Client#createSocket. At run time it is a Node
 * EventEmitter; the methods declared here are those for its events (RemoteSocketEvents).
 */
export class RemoteSocket {
  private constructor();
  readonly client: Client;
  /** The socket's handle (its name when one was given). */
  readonly handle: string;
  readonly host: string;
  readonly port: number;
  readonly ssl: boolean;
  /** The last read's `closed`: the stream has ended and nothing was left to read. */
  readonly ended: boolean;

  disableHostVerification(): Promise<true>;
  disablePeerVerification(): Promise<true>;
  /** socket.connect: true at once; opened() tells the outcome. */
  connect(options?: SocketConnectOptions): Promise<true>;
  /** Resolves on socket.onOpen; rejects with SocketError on socket.onErr. */
  opened(options?: WaitOptions): Promise<true>;
  /** Resolves on socket.onClose: to the SocketError of the onErr before it, or null. */
  disconnected(options?: WaitOptions): Promise<SocketError | null>;
  /** Resolves to the bytes available once socket.onRead said some wait that no read took. */
  readable(options?: WaitOptions): Promise<number>;
  /** socket.write: text as UTF-8, bytes as they are; resolves to the number of bytes queued. */
  write(data: string | Uint8Array, options?: CallOptions): Promise<number>;
  /** socket.read: the bytes received since the last read. */
  read(options?: SocketReadOptions): Promise<Bytes>;
  /** Reads until the stream has ended and nothing is left. */
  readToEnd(options?: ReadToEndOptions): Promise<Bytes>;
  disconnect(): Promise<true>;
  state(): Promise<SocketState>;
  /** socket.release: the server removes the socket; this object is done. */
  release(): Promise<true>;

  on<E extends keyof RemoteSocketEvents>(event: E, listener: RemoteSocketEvents[E]): this;
  once<E extends keyof RemoteSocketEvents>(event: E, listener: RemoteSocketEvents[E]): this;
  off<E extends keyof RemoteSocketEvents>(event: E, listener: RemoteSocketEvents[E]): this;
  removeListener<E extends keyof RemoteSocketEvents>(event: E, listener: RemoteSocketEvents[E]): this;
  removeAllListeners(event?: keyof RemoteSocketEvents): this;
  listenerCount(event: keyof RemoteSocketEvents): number;
}

/**
 * An interceptor made by Client#intercept. At run time it is a Node EventEmitter; the
 * methods declared here are those for its events (InterceptorEvents).
 */
export class Interceptor {
  private constructor();
  readonly client: Client;
  /** The server's handle, `icp_` and 32 hex digits. */
  readonly handle: string;
  /** What it registered for. */
  readonly events: InterceptEvent[];
  /** True until unregister, or the close of the connection. */
  readonly active: boolean;
  /** intercept.unregister. */
  unregister(options?: CallOptions): Promise<true>;

  on<E extends keyof InterceptorEvents>(event: E, listener: InterceptorEvents[E]): this;
  once<E extends keyof InterceptorEvents>(event: E, listener: InterceptorEvents[E]): this;
  off<E extends keyof InterceptorEvents>(event: E, listener: InterceptorEvents[E]): this;
  removeListener<E extends keyof InterceptorEvents>(event: E, listener: InterceptorEvents[E]): this;
  removeAllListeners(event?: keyof InterceptorEvents): this;
  listenerCount(event: keyof InterceptorEvents): number;
}

// ---- errors ----------------------------------------------------------------------

/** An error response, as a call rejects with it. */
export class RPCError extends Error {
  constructor(code: number, message: string, data?: any, response?: ErrorResponse);
  name: 'RPCError';
  /** The JSON-RPC code: -32700…-32600 the specification's, -32001…-32099 xhrpc's. */
  code: number;
  /** The error's data: for xhrpc's errors an object with `reason` (and `limit`, `state`, … by reason). */
  data: any;
  /** data.reason (unknown_handle, invalid_state, limit_exceeded, …), or undefined. */
  readonly reason: string | undefined;
  /** The whole response object (undefined only for an RPCError made by hand). */
  response: ErrorResponse | undefined;
}

/** The connection closed before what was awaited arrived. */
export class ConnectionClosed extends Error {
  constructor(what: string, cause?: Error | null);
  name: 'ConnectionClosed';
  code: 'ECONNCLOSED';
  cause?: Error;
}

/** Nothing arrived within the time given. */
export class TimeoutError extends Error {
  constructor(what: string, seconds: number);
  name: 'TimeoutError';
  code: 'ETIMEDOUT';
}

/** socket.onErr, as a RemoteSocket's opened() rejects with it and its `err` event gives it. */
export class SocketError extends Error {
  constructor(socket: string, error: SocketErrorWord | 'closed', message: string);
  name: 'SocketError';
  code: 'ESOCKET';
  /** The socket's handle. */
  socket: string;
  /** The server's word; `closed` when the stream ended (disconnect, release) before it opened. */
  error: SocketErrorWord | 'closed';
}

/** A download that did not end in a complete body (status outside 2xx, status 0, or short). */
export class DownloadError extends Error {
  constructor(url: string, status: number, statusText: string, received: number, why: string);
  name: 'DownloadError';
  code: 'EDOWNLOAD';
  url: string;
  /** The response's status; 0 when none came or the transfer failed. */
  status: number;
  statusText: string;
  /** Bytes written before it failed (their .part file is removed). */
  received: number;
}

// ---- framing and defaults ------------------------------------------------------

/** One line from the server: `message` when it parsed, else `error` and `raw`. */
export class Line {
  constructor(message: any, error?: string | null, raw?: Bytes | null);
  message: any;
  error: string | null;
  raw: Bytes | null;
}

/** Cuts a byte stream into lines and parses each as JSON. */
export class LineDecoder {
  constructor();
  /** Feeds one chunk; returns the lines it completed. */
  push(chunk: Uint8Array): Line[];
  /** The end of the stream: a malformed Line for an unterminated last line, or null. */
  end(): Line | null;
}

/** One message as the server expects it: compact JSON and LF, as bytes. */
export function encode(message: unknown): Bytes;

/**
 * The server's default socket: `$XDG_RUNTIME_DIR/xhrpc.sock` when XDG_RUNTIME_DIR is set and
 * not empty in `env` (default process.env), else `/tmp/xhrpc-<uid>.sock`.
 */
export function defaultSocketPath(env?: { [name: string]: string | undefined }): string;
