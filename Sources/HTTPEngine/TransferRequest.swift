/// The HTTP authentication scheme to offer when a request carries credentials. The raw
/// values are the names clients use in `open {auth}` (api/openrpc.json).
public enum AuthScheme: String, Sendable, CaseIterable {
    case basic = "BASIC", digest = "DIGEST", negotiate = "NEGOTIATE", ntlm = "NTLM"
}

/// The lowest TLS version a transfer accepts (`--tls-min`). The raw values are the
/// names of the flag and the config key.
public enum TLSVersion: String, Sendable, CaseIterable {
    case v1_2 = "1.2", v1_3 = "1.3"
}

/// A client certificate for TLS client authentication (`setClientCertificate`):
/// PEM files the engine hands to libcurl by path. The Service layer decides which
/// paths a client may name (it confines them); the engine trusts what it is given.
public struct ClientCertificate: Sendable, Equatable {
    /// PEM certificate (a chain may follow the leaf).
    public var certPath: String
    /// PEM private key, plain or encrypted (PKCS#8 or traditional).
    public var keyPath: String
    /// The key's password; nil for a plain key. Never logged or shown.
    public var keyPassword: String?

    public init(certPath: String, keyPath: String, keyPassword: String? = nil) {
        self.certPath = certPath
        self.keyPath = keyPath
        self.keyPassword = keyPassword
    }
}

/// An HTTP forward proxy (`enableHttpProxy`, or the server's egress proxy). http://
/// URLs go to it in absolute form; https:// ones through a CONNECT tunnel, inside
/// which the origin's certificate is verified as on a direct connection.
public struct ProxySettings: Sendable, Equatable {
    /// A host name or an IP literal (IPv6 without brackets).
    public var host: String
    public var port: Int
    /// Credentials for the proxy, offered with `auth` when `user` is not nil. The
    /// password is never logged or shown.
    public var user: String?
    public var password: String?
    /// BASIC, DIGEST or NTLM (`enableHttpProxy`'s schemes; NEGOTIATE is refused by the
    /// Service layer for proxies: Kerberos is for servers only, api/openrpc.json).
    public var auth: AuthScheme

    public init(host: String, port: Int, user: String? = nil, password: String? = nil, auth: AuthScheme = .basic) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.auth = auth
    }
}

/// One piece of a `.segments` body: bytes from memory or a whole file from disk.
public enum BodySegment: Sendable {
    case bytes([UInt8])
    case file(UploadFile)
}

/// The body of a request.
///
/// `.bytes` is sent from memory without a copy when it is large (a read callback walks
/// the array) and copied into libcurl when it is small (one write for head and body).
/// `.file` is streamed from an open descriptor (`UploadFile`) by a read callback, never
/// loaded whole; its size is taken by `TransferEngine.start`, which throws when it is
/// not a regular file.
/// `.segments` is a POST body made of pieces in order, bytes and files (a multipart
/// body whose file parts stream from disk): its length is the sum, each file's size
/// taken when the transfer starts (`start` throws when one is not a regular file); each
/// is read in place, and a file that shrinks meanwhile fails the transfer.
public enum TransferBody: Sendable {
    case none
    case bytes([UInt8])
    case file(UploadFile)
    case segments([BodySegment])
}

/// Everything one transfer needs, as plain data: the Service layer fills it in, the
/// engine maps it onto libcurl options in `start`. Later issues add cookie and policy
/// options here.
///
/// Method and body combine as libcurl does it:
/// - `HEAD` is sent with `CURLOPT_NOBODY`; a body is ignored.
/// - `.bytes` is a POST body; any method other than `POST` is then sent as a custom
///   request method with that body. `.none` with `POST` or `PUT` sends an empty body
///   with `Content-Length: 0`. The engine sends the headers it is given and invents no
///   `Content-Type` (libcurl's POST default, `application/x-www-form-urlencoded`, is
///   suppressed): whoever builds the request sets it.
/// - `.file` is an upload: `PUT`, unless the method is `POST` (a POST of the file, for
///   `upload`; the Service layer makes `sendWithFile`'s POST a PUT) or a custom one (anything but `GET`,
///   `HEAD`, `POST`, `PUT`), which is then sent as it is (`sendWithFile`,
///   api/openrpc.json).
/// - Redirects change method and body as `RedirectRule` says (RFC 9110 §15.4).
///
/// Headers that frame the message or manage the connection are the engine's alone
/// (`reservedHeaderNames`): with a caller's `Content-Length` beside the body libcurl
/// sends, an origin would read the body as a second request.
///
/// Not `Sendable`: it may carry a `CookieJar`, which is confined to the loop's thread
/// like the engine that reads the request.
public struct TransferRequest {
    /// `GET`, `POST`, `HEAD`, `PUT` or any other token.
    public var method: String
    /// An absolute `http` or `https` URL; anything else is refused by `start`.
    public var url: String
    /// Request headers in the order to send them. An empty value is sent as an empty
    /// header (`Name;` in libcurl's convention), not dropped. CR, LF and NUL are refused,
    /// and so are the reserved names (`reservedHeaderNames`).
    public var headers: [(name: String, value: String)]
    public var body: TransferBody
    /// Seconds for the whole transfer, connect and redirects included, not counting the
    /// time the caller held it paused (`Transfer.pause`); 0 means no limit.
    public var timeout: Double
    /// Follow `Location` (default true), at most `maxRedirects` hops (default 10).
    public var followRedirects: Bool
    public var maxRedirects: Int
    /// Credentials, offered with `auth` when `user` is not nil.
    public var user: String? {
        get { rare?.user }
        set { updateRare(setting: newValue != nil) { $0.user = newValue } }
    }
    public var password: String? {
        get { rare?.password }
        set { updateRare(setting: newValue != nil) { $0.password = newValue } }
    }
    public var auth: AuthScheme
    /// HTTP/2 multiplexing allowed (`setPipelining`): true offers HTTP/2 over
    /// TLS and waits for a connection that can multiplex; false speaks HTTP/1.1 only.
    public var multiplexing: Bool
    /// Close the connection after this transfer instead of keeping it for reuse
    /// (`close`, api/openrpc.json).
    public var forbidConnectionReuse: Bool
    /// Ask for content codings and decode them (default true). A download into a file
    /// turns it off: its bytes must be the resource's own, so that a `Range` resumed
    /// later counts the same bytes the file holds.
    public var decodesContent: Bool
    /// Where this transfer's cookies come from and go to, redirect hops included; nil:
    /// the transfer neither sends nor stores cookies (a `Cookie` header set by hand is
    /// still sent, as any header is).
    public var cookieJar: CookieJar?

    // TLS. Verification is on unless switched off; libcurl compares these settings
    // before it reuses a connection or a TLS session, so a connection opened with
    // relaxed checks never carries a request that verifies (`TLSConnectionReuseTests`).
    /// Verify the server's certificate chain (`CURLOPT_SSL_VERIFYPEER`). Off also
    /// switches off the host name check, as `disablePeerVerification` says (api/openrpc.json).
    public var verifyPeer: Bool
    /// Verify that the certificate names the host (`CURLOPT_SSL_VERIFYHOST`).
    public var verifyHost: Bool
    /// A client certificate to offer when the server asks for one.
    public var clientCertificate: ClientCertificate? {
        get { rare?.clientCertificate }
        set { updateRare(setting: newValue != nil) { $0.clientCertificate = newValue } }
    }
    /// `sha256//BASE64` pins, several joined with `;` (`CURLOPT_PINNEDPUBLICKEY`): the
    /// server's public key must match one. Only the string form; the Service layer
    /// refuses file paths.
    public var pinnedPublicKey: String? {
        get { rare?.pinnedPublicKey }
        set { updateRare(setting: newValue != nil) { $0.pinnedPublicKey = newValue } }
    }
    /// A forward proxy; nil connects directly.
    public var proxy: ProxySettings? {
        get { rare?.proxy }
        set { updateRare(setting: newValue != nil) { $0.proxy = newValue } }
    }

    /// The members most requests leave unset (credentials, client certificate, pin,
    /// proxy: 153 of the 265 bytes the struct had), in one box that exists only once
    /// one of them is set. A send holds three copies of its request (the request
    /// object's plan, the transfer's request and its current hop), so this makes each
    /// request in flight about 450 bytes smaller. Copied on write: a box shared with
    /// another copy is copied before it changes, so copies stay independent values.
    private final class Rare {
        var user: String?
        var password: String?
        var clientCertificate: ClientCertificate?
        var pinnedPublicKey: String?
        var proxy: ProxySettings?

        func copy() -> Rare {
            let c = Rare()
            (c.user, c.password, c.clientCertificate) = (user, password, clientCertificate)
            (c.pinnedPublicKey, c.proxy) = (pinnedPublicKey, proxy)
            return c
        }
    }
    private var rare: Rare?

    /// Runs `change` on a box of this request's own: made first when there is none,
    /// copied first when it is shared. Clearing a member of a request with no box
    /// (`setting` false) changes nothing and makes none.
    private mutating func updateRare(setting: Bool, _ change: (Rare) -> Void) {
        if rare == nil && !setting { return }
        if !isKnownUniquelyReferenced(&rare) { rare = rare?.copy() ?? Rare() }
        change(rare!)
    }

    /// A request with the defaults: no headers, no body, no timeout, redirects followed
    /// (at most 10), no credentials, multiplexing allowed, connection reuse allowed,
    /// full TLS verification, no client certificate, no pin, no proxy, no cookies.
    public init(method: String = "GET", url: String) {
        self.method = method
        self.url = url
        self.headers = []
        self.body = .none
        self.timeout = 0
        self.followRedirects = true
        self.maxRedirects = 10
        self.auth = .basic
        self.multiplexing = true
        self.forbidConnectionReuse = false
        self.decodesContent = true
        self.verifyPeer = true
        self.verifyHost = true
        self.cookieJar = nil
    }
}

extension TransferRequest {
    /// The names, lower case, of the headers that only the engine sets (RFC 9112 §6
    /// message framing, §9 connection management, RFC 9110 §7.2 `Host`, §7.6
    /// `Connection`, `TE`, `Trailer`, `Upgrade`): a caller's value would make what
    /// libcurl sends mean something else to the origin or to a proxy in between.
    public static let reservedHeaderNames: Set<String> = [
        "content-length", "transfer-encoding", "host", "connection", "keep-alive",
        "proxy-connection", "te", "trailer", "upgrade",
    ]

    /// Whether `name` (any case) is one of `reservedHeaderNames`.
    public static func isReservedHeader(_ name: String) -> Bool {
        name.utf8.count <= 17 && reservedHeaderNames.contains(name.lowercased())
    }
}

/// Engine-wide settings, fixed when the engine is made.
public struct EngineOptions: Sendable {
    /// Idle connections kept for reuse: libcurl's cache (`CURLMOPT_MAXCONNECTS`) holds
    /// this many beyond the transfers running (`sizeConnectionCache`); libcurl would
    /// otherwise let it grow to four times the number of handles ever added.
    public var maxConnections: Int = 256
    /// Bytes of receive buffer the running transfers share (`TransferEngine+ReceiveBuffer`):
    /// each joins with its share, 1 to 16 KiB.
    public var receiveBufferBudget: Int = 4 << 20
    /// Connections to one host at a time (`CURLMOPT_MAX_HOST_CONNECTIONS`); 0 = no limit.
    /// Transfers beyond it wait in libcurl's queue.
    public var maxHostConnections: Int = 0
    /// A PEM bundle of trusted CAs, replacing the system's (`CURLOPT_CAINFO`).
    public var caFile: String? = nil
    /// The lowest TLS version accepted, on every https connection (origin or tunnel).
    public var tlsMin: TLSVersion = .v1_2
    /// Where transfers may go (docs/security/egress.md). nil checks nothing: engine tests that are
    /// not about the policy run without one. The server always sets one; its default,
    /// with no patterns, denies loopback, private and the other special-purpose ranges.
    public var egressPolicy: EgressPolicy? = nil
    /// The `User-Agent` of requests that do not set one (RFC 9110 §10.1.5); empty sends
    /// none.
    public var userAgent: String = ""
    /// Query parameters whose values a URL shown in a status text hides
    /// (`URLRedaction`), lower case.
    public var secretQueryNames: Set<String> = URLRedaction.defaultSecretQueryNames
    /// Defaults: 256 cached connections, no per-host limit, the system's CAs, TLS 1.2
    /// or later, no egress policy.
    public init() {}
}
