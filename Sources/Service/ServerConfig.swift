import Foundation
import HTTPEngine
import JSONRPC

/// Where the server listens: `unix:PATH`, `tcp:HOST:PORT`, or `tls:HOST:PORT` (TCP with
/// TLS, which needs a certificate and key); an IPv6 host in brackets.
public enum ListenAddress: Equatable, Sendable, CustomStringConvertible {
    case unix(path: String)
    case tcp(host: String, port: Int)
    case tls(host: String, port: Int)

    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ text: String) throws(ParseError) -> ListenAddress {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw ParseError(description: "'\(text)': unix: needs a path") }
            return .unix(path: path)
        }
        if text.hasPrefix("tcp:") {
            let (host, port) = try hostAndPort(text, scheme: "tcp")
            return .tcp(host: host, port: port)
        }
        if text.hasPrefix("tls:") {
            let (host, port) = try hostAndPort(text, scheme: "tls")
            return .tls(host: host, port: port)
        }
        throw ParseError(description: "'\(text)': a listen address is unix:PATH, tcp:HOST:PORT or tls:HOST:PORT")
    }

    /// The HOST:PORT after `scheme:`, with an IPv6 host's brackets removed.
    private static func hostAndPort(_ text: String, scheme: String) throws(ParseError) -> (String, Int) {
        let rest = text.dropFirst(scheme.count + 1)
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (0...65535).contains(port)
        else { throw ParseError(description: "'\(text)': expected \(scheme):HOST:PORT with a port from 0 to 65535") }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ParseError(description: "'\(text)': \(scheme): needs a host") }
        return (host, port)
    }

    public var description: String {
        switch self {
        case .unix(let path): "unix:\(path)"
        case .tcp(let host, let port): "tcp:" + Self.hostPort(host, port)
        case .tls(let host, let port): "tls:" + Self.hostPort(host, port)
        }
    }

    private static func hostPort(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Whether a TCP host is a loopback address (127.0.0.0/8, ::1, localhost).
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The default: `$XDG_RUNTIME_DIR/xhrpc.sock`, else `/tmp/xhrpc-<uid>.sock`.
    public static var defaultUnix: ListenAddress {
        if let dir = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], !dir.isEmpty {
            return .unix(path: dir + "/xhrpc.sock")
        }
        return .unix(path: "/tmp/xhrpc-\(getuid()).sock")
    }
}

/// Everything the server is configured with; the command line and the config file fill
/// it in.
public struct ServerConfig: Sendable {
    public var listen: [ListenAddress] = []
    /// Permission bits of Unix sockets (0600: the owner only).
    public var unixSocketMode: UInt16 = 0o600
    public var connection = ConnectionLimits()
    public var maxConnections = 1024
    /// Unread response bytes held per request before its transfer pauses.
    public var maxBufferBytes = 8 << 20
    public var maxRedirects = 10
    /// Body bytes one response may have before its transfer ends (DONE, status 0); nil:
    /// no limit (memory is bounded by the buffers either way).
    public var maxResponseBytes: Int?
    /// Who may connect (the config file's "principals"). With none, only the Unix socket's
    /// owner is served, plus TCP on loopback if `insecureTCP` says so.
    public var principals: [PrincipalConfig] = []
    /// The limits of a principal that does not set its own.
    public var limits = PrincipalLimits()
    /// Lets a TCP listener on loopback run without principals, every TCP client acting
    /// as the socket owner (`--insecure-tcp`): for development on a single-user machine.
    public var insecureTCP = false
    /// Seconds a connection may stay unauthenticated before it is closed.
    public var authTimeout: Double = 10
    /// Seconds before a failed `auth` is answered; the next attempt on that connection
    /// waits for the answer.
    public var authFailureDelay: Double = 1
    /// `sendWithFile` reads only below this directory; nil refuses it.
    public var uploadRoot: String?
    /// `setClientCertificate` reads certificate and key files only below this
    /// directory; nil refuses it.
    public var certRoot: String?
    /// The server-wide proxy that `enableSecureCommunication` routes a principal's
    /// requests through (`--egress-proxy`); nil makes that call an error.
    public var egressProxy: ProxySettings?
    /// The certificate chain (PEM, leaf first) and private key (PEM) that `tls:`
    /// listeners present (`--tls-cert`, `--tls-key`); both are needed for any of them.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// How long a TLS client may take to finish its handshake before it is closed, in
    /// milliseconds (`--tls-handshake-timeout`).
    public var tlsHandshakeTimeout: UInt64 = 10_000
    /// Where state that outlives the process is kept (the principals' persistent
    /// cookies); nil keeps everything in memory.
    public var stateDir: String?
    /// Seconds a request that is not in flight (UNSENT, OPENED or DONE) may go unused
    /// before the server releases it (`--request-ttl`): a client that forgets its
    /// requests does not hold their buffers for ever.
    public var requestTTL: Double = 300
    /// Seconds a `detach` token stays valid; the detached requests not attached by then
    /// are released (`--detach-ttl`).
    public var detachTTL: Double = 60
    /// Seconds a stop signal lets transfers in flight finish and clients read them
    /// before the rest is aborted (`--drain-seconds`).
    public var drainSeconds: Double = 10
    /// The time the two TTLs are measured with; tests replace it.
    public var clock = ServerClock.monotonic
    /// Engine settings. The egress policy is always set here, so a server never runs
    /// without one: with no patterns it denies loopback, private and the other
    /// special-purpose ranges (`EgressPolicy`), and `--allow`/`--deny` replace it.
    public var engine: EngineOptions = {
        var options = EngineOptions()
        options.egressPolicy = EgressPolicy()
        return options
    }()

    public init() {}
}

/// `--egress-proxy http://[user:password@]host:port`: parsed here, so the daemon and the
/// tests read it the same way. User and password may be percent-encoded; the proxy is
/// offered Basic credentials. No message quotes the text, since it may hold a password.
public enum EgressProxyURL {
    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ text: String) throws(ParseError) -> ProxySettings {
        let form = "the egress proxy must be http://[user:password@]host:port"
        guard text.hasPrefix("http://") else { throw ParseError(description: form + " (scheme http)") }
        var rest = Substring(text.dropFirst(7))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains(where: { $0 == "/" || $0 == "?" || $0 == "#" || $0.isWhitespace }) else {
            throw ParseError(description: form + " (no path, query or spaces)")
        }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let info = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = info.firstIndex(of: ":")
            let rawUser = colon.map { info[..<$0] } ?? info
            guard let u = String(rawUser).removingPercentEncoding, !u.isEmpty else {
                throw ParseError(description: form + " (the user is empty or badly percent-encoded)")
            }
            user = u
            if let colon {
                guard let pw = String(info[info.index(after: colon)...]).removingPercentEncoding else {
                    throw ParseError(description: form + " (the password is badly percent-encoded)")
                }
                password = pw
            }
        }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (1...65535).contains(port)
        else { throw ParseError(description: form + " (a port from 1 to 65535 is required)") }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ParseError(description: form + " (the host is empty)") }
        return ProxySettings(host: host, port: port, user: user, password: password, auth: .basic)
    }
}
