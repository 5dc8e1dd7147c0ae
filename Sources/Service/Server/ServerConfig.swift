import Foundation
import HTTPEngine
import JSONRPC

/// Everything the server is configured with; the command line and the config file fill
/// it in. The defaults of the settings a user can set are those of the settings table
/// (`Settings`), read here, so that each lives in one place.
public struct ServerConfig: Sendable {
    public var listen: [ListenAddress] = []
    /// Permission bits of Unix sockets (0600: the owner only).
    public var unixSocketMode: UInt16 = UInt16(Settings.socketMode.fallback, radix: 8) ?? 0o600
    public var connection: ConnectionLimits = {
        var limits = ConnectionLimits()
        limits.maxMessageBytes = Settings.maxMessageBytes.fallback
        return limits
    }()
    public var maxConnections = Settings.maxConnections.fallback
    /// Unread response bytes held per request before its transfer pauses.
    public var maxBufferBytes = Settings.maxBufferBytes.fallback
    public var maxRedirects = Settings.maxRedirects.fallback
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
    public var insecureTCP = Settings.insecureTCP.fallback
    /// Lets the socket owner (the `local` principal) use NEGOTIATE (`--allow-negotiate`).
    /// Negotiate authenticates as xhrpcd's own Kerberos identity, from its ticket cache,
    /// whichever client asks: so it is granted, never assumed. A principal in the config
    /// file is granted it with `"negotiate": true`.
    public var allowNegotiate = Settings.allowNegotiate.fallback
    /// Seconds a connection may stay unauthenticated before it is closed.
    public var authTimeout = Settings.authTimeout.fallback
    /// Seconds before a failed `auth` is answered; the next attempt on that connection
    /// waits for the answer.
    public var authFailureDelay: Double = 1
    /// Wrong tokens judged per minute from one source (an IPv4 address, an IPv6 /64, a
    /// Unix peer's uid), and from all together (`--auth-failures-per-source`,
    /// `--auth-failures-total`); past them tokens are refused untried (`AuthThrottle`).
    public var authFailuresPerSource = Settings.authFailuresPerSource.fallback
    public var authFailuresTotal = Settings.authFailuresTotal.fallback
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
    public var tlsHandshakeTimeout = UInt64(Settings.tlsHandshakeTimeout.fallback)
    /// Seconds an accepted TCP connection (tcp:, tls:, ws:, wss:, and the operations
    /// listener's, whose `/rpc` is one) may carry nothing before the kernel probes its
    /// client (`Stream.setKeepAlive`); 0 probes never (`--tcp-keepalive`).
    public var tcpKeepalive = UInt32(Settings.tcpKeepalive.fallback)
    /// Where state that outlives the process is kept (the principals' persistent
    /// cookies); nil keeps everything in memory.
    public var stateDir: String?
    /// Seconds a request that is not in flight (UNSENT, OPENED or DONE) may go unused
    /// before the server releases it (`--request-ttl`): a client that forgets its
    /// requests does not hold their buffers for ever.
    public var requestTTL = Settings.requestTTL.fallback
    /// Seconds a `detach` token stays valid; the detached requests not attached by then
    /// are released (`--detach-ttl`).
    public var detachTTL = Settings.detachTTL.fallback
    /// Seconds a stop signal lets transfers in flight finish and clients read them
    /// before the rest is aborted (`--drain-seconds`).
    public var drainSeconds = Settings.drainSeconds.fallback
    /// The HTTP operations listener (`--http-listen tcp:HOST:PORT`): `/healthz`,
    /// `/readyz`, `/metrics`; nil: none.
    public var httpListen: ListenAddress?
    /// Milliseconds a client of the operations listener has from connecting to closing:
    /// to send its request head and read the answer.
    public var httpTimeoutMs: UInt64 = 5000
    /// Clients the operations listener holds at once (`--http-max-connections`); more are
    /// answered 503 and closed at once, so they cannot take the descriptors every
    /// listener needs. Its `/rpc` clients count under `maxConnections` once upgraded.
    public var httpMaxConnections = Settings.httpMaxConnections.fallback
    /// The time the two TTLs are measured with; tests replace it.
    public var clock = ServerClock.monotonic
    /// Engine settings. The egress policy is always set here, so a server never runs
    /// without one: with no patterns it denies loopback, private and the other
    /// special-purpose ranges (`EgressPolicy`), and `--allow`/`--deny` replace it.
    public var engine: EngineOptions = {
        var options = EngineOptions()
        options.egressPolicy = EgressPolicy()
        options.tlsMin = TLSVersion(rawValue: Settings.tlsMin.fallback) ?? .v1_2
        return options
    }()

    public init() {}
}
