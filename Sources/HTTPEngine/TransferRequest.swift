/// The HTTP authentication scheme to offer when a request carries credentials. The raw
/// values are the names clients use in `open {auth}` (DESIGN.md §4).
public enum AuthScheme: String, Sendable {
    case basic = "BASIC", digest = "DIGEST", negotiate = "NEGOTIATE", ntlm = "NTLM"
}

/// The body of a request.
///
/// `.bytes` is sent from memory without a copy when it is large (a read callback walks
/// the array) and copied into libcurl when it is small (one write for head and body).
/// `.file` is streamed from disk by a read callback, never loaded whole; the file is
/// opened by `TransferEngine.start`, which throws when it cannot be, and closed when the
/// transfer ends.
public enum TransferBody: Sendable {
    case none
    case bytes([UInt8])
    case file(path: String)
}

/// Everything one transfer needs, as plain data: the Service layer fills it in, the
/// engine maps it onto libcurl options in `start`. Later issues add TLS, proxy, cookie
/// and policy options here.
///
/// Method and body combine as libcurl does it:
/// - `HEAD` is sent with `CURLOPT_NOBODY`; a body is ignored.
/// - `.bytes` is a POST body; any method other than `POST` is then sent as a custom
///   request method with that body. `.none` with `POST` or `PUT` sends an empty body
///   with `Content-Length: 0`. The engine sends the headers it is given and invents no
///   `Content-Type` (libcurl's POST default, `application/x-www-form-urlencoded`, is
///   suppressed): whoever builds the request sets it.
/// - `.file` is an upload: `PUT`, unless the method is a custom one (anything but `GET`,
///   `HEAD`, `POST`, `PUT`), which is then sent as it is (GDHttpRequest's
///   `sendWithFile` rule).
/// - A custom method is kept on every redirect hop (libcurl's rule for
///   `CURLOPT_CUSTOMREQUEST`); a `POST` becomes `GET` after 301, 302 and 303.
public struct TransferRequest: Sendable {
    /// `GET`, `POST`, `HEAD`, `PUT` or any other token.
    public var method: String
    /// An absolute `http` or `https` URL; anything else is refused by `start`.
    public var url: String
    /// Request headers in the order to send them. An empty value is sent as an empty
    /// header (`Name;` in libcurl's convention), not dropped. CR, LF and NUL are refused.
    public var headers: [(name: String, value: String)]
    public var body: TransferBody
    /// Seconds for the whole transfer, connect and redirects included; 0 means no limit.
    public var timeout: Double
    /// Follow `Location` (default true), at most `maxRedirects` hops (default 10).
    public var followRedirects: Bool
    public var maxRedirects: Int
    /// Credentials, offered with `auth` when `user` is not nil.
    public var user: String?
    public var password: String?
    public var auth: AuthScheme
    /// HTTP/2 multiplexing allowed (the seed's `setPipelining`): true offers HTTP/2 over
    /// TLS and waits for a connection that can multiplex; false speaks HTTP/1.1 only.
    public var multiplexing: Bool
    /// Close the connection after this transfer instead of keeping it for reuse
    /// (`close` of the seed).
    public var forbidConnectionReuse: Bool

    /// A request with the defaults: no headers, no body, no timeout, redirects followed
    /// (at most 10), no credentials, multiplexing allowed, connection reuse allowed.
    public init(method: String = "GET", url: String) {
        self.method = method
        self.url = url
        self.headers = []
        self.body = .none
        self.timeout = 0
        self.followRedirects = true
        self.maxRedirects = 10
        self.user = nil
        self.password = nil
        self.auth = .basic
        self.multiplexing = true
        self.forbidConnectionReuse = false
    }
}

/// Engine-wide settings, fixed when the engine is made.
public struct EngineOptions: Sendable {
    /// Size of the connection cache (`CURLMOPT_MAXCONNECTS`); libcurl would otherwise let
    /// it grow to four times the number of handles ever added.
    public var maxConnections: Int = 256
    /// Connections to one host at a time (`CURLMOPT_MAX_HOST_CONNECTIONS`); 0 = no limit.
    /// Transfers beyond it wait in libcurl's queue.
    public var maxHostConnections: Int = 0
    /// A PEM bundle of trusted CAs, replacing the system's (`CURLOPT_CAINFO`).
    public var caFile: String? = nil
    /// Where transfers may go (DESIGN.md §5). nil checks nothing: engine tests that are
    /// not about the policy run without one. The server always sets one; its default,
    /// with no patterns, denies loopback, private and the other special-purpose ranges.
    public var egressPolicy: EgressPolicy? = nil
    /// Defaults: 256 cached connections, no per-host limit, the system's CAs, no egress
    /// policy.
    public init() {}
}
