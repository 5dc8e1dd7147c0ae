import Foundation
import HTTPEngine
import JSONRPC

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
    /// Lets the socket owner (the `local` principal) use NEGOTIATE (`--allow-negotiate`).
    /// Negotiate authenticates as xhrpcd's own Kerberos identity, from its ticket cache,
    /// whichever client asks: so it is granted, never assumed. A principal in the config
    /// file is granted it with `"negotiate": true`.
    public var allowNegotiate = false
    /// Seconds a connection may stay unauthenticated before it is closed.
    public var authTimeout: Double = 10
    /// Seconds before a failed `auth` is answered; the next attempt on that connection
    /// waits for the answer.
    public var authFailureDelay: Double = 1
    /// Wrong tokens judged per minute from one source (an IPv4 address, an IPv6 /64, a
    /// Unix peer's uid), and from all together (`--auth-failures-per-source`,
    /// `--auth-failures-total`); past them tokens are refused untried (`AuthThrottle`).
    public var authFailuresPerSource = 20
    public var authFailuresTotal = 200
    /// `sendWithFile` reads only below this directory; nil refuses it.
    public var uploadRoot: String?
    /// `download` writes only below this directory; nil refuses it.
    public var downloadRoot: String?
    /// `setClientCertificate` reads certificate and key files only below this
    /// directory; nil refuses it.
    public var certRoot: String?
    /// The server-wide proxy that `enableSecureCommunication` routes a principal's
    /// requests through (`--egress-proxy`); nil makes that call an error.
    public var egressProxy: ProxySettings?
    /// Origins a browser's WebSocket upgrade may carry on `ws:`/`wss:` listeners
    /// (`--ws-origin`); a request with any other `Origin` is refused with 403, one without
    /// `Origin` (not from a browser) is accepted.
    public var wsOrigins: [String] = []
    /// The certificate chain (PEM, leaf first) and private key (PEM) that `tls:` and `wss:`
    /// listeners present (`--tls-cert`, `--tls-key`); both are needed for any of them.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// How long a TLS client may take to finish its handshake before it is closed, in
    /// milliseconds (`--tls-handshake-timeout`).
    public var tlsHandshakeTimeout: UInt64 = 10_000
    /// Seconds an accepted TCP connection (tcp:, tls:, ws:, wss:, and the operations
    /// listener's, whose `/rpc` is one) may carry nothing before the kernel probes its
    /// client (`Stream.setKeepAlive`); 0 probes never (`--tcp-keepalive`).
    public var tcpKeepalive: UInt32 = 60
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
    /// The HTTP operations listener (`--http-listen tcp:HOST:PORT`): `/healthz`,
    /// `/readyz`, `/metrics`; nil: none.
    public var httpListen: ListenAddress?
    /// Milliseconds a client of the operations listener has from connecting to closing:
    /// to send its request head and read the answer.
    public var httpTimeoutMs: UInt64 = 5000
    /// Clients the operations listener holds at once (`--http-max-connections`); more are
    /// answered 503 and closed at once, so they cannot take the descriptors every
    /// listener needs. Its `/rpc` clients count under `maxConnections` once upgraded.
    public var httpMaxConnections = 64
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
