import JSON

/// Every setting of xhrpcd, once: each flag, its config key, its type, its default and
/// its text. xhrpcd's command line takes each option's name and help from here, its
/// config file reader types every key by it, `ServerConfig`'s defaults are read from it,
/// and docs/reference/settings.md is written from it (`make settings-reference`; `make
/// settings-check` fails when the page is not current). Adding a setting: see
/// docs/internals/ARCHITECTURE.md, "Adding a setting".
///
/// Summaries are whole sentences without the last full stop: `help` adds the config key
/// and the default after them.
public enum Settings {
    public static let config = Setting<String>(
        flag: "config", key: nil, valueName: "file",
        "A JSON file with any of the settings below, by their config keys. A flag given on the command line wins over the file's key; "
            + "a flag that repeats replaces the file's list of the same key. An unknown key, or a key whose value is not of its type, refuses the start with the key named")

    public static let listen = Setting<[String]>(
        flag: "listen", key: "listen", valueName: "address",
        note: "unix:$XDG_RUNTIME_DIR/xhrpc.sock, else unix:/tmp/xhrpc-<uid>.sock",
        "Where to listen: unix:PATH, tcp:HOST:PORT, tls:HOST:PORT for TCP with TLS (needs --tls-cert and --tls-key), "
            + "ws:HOST:PORT for WebSocket (one JSON-RPC message per text frame), or wss:HOST:PORT for WebSocket over TLS. "
            + "TCP, TLS, ws and wss need principals with tokens in the config file (clients then call auth first), "
            + "or, on loopback only, --insecure-tcp")

    public static let wsOrigins = Setting<[String]>(
        flag: "ws-origin", key: "wsOrigins", valueName: "origin",
        note: "none: a WebSocket upgrade that carries an Origin header (every browser's does) is refused with 403",
        "An origin (scheme://host[:port]) whose web pages may connect to the ws: and wss: listeners and to /rpc of --http-listen, "
            + "compared without regard to case. An upgrade without Origin (a program, not a page) is accepted")

    public static let tlsCert = Setting<String>(
        flag: "tls-cert", key: "tlsCert", valueName: "file", note: "none: a tls: or wss: listener is refused at start",
        "The certificate chain (PEM, leaf first) that tls: and wss: listeners present to clients. Loaded at start when a tls: or "
            + "wss: listener is configured: a missing or unreadable file, a file that is not PEM, or a key that does not "
            + "belong to the certificate then stops the server with a message naming the file")

    public static let tlsKey = Setting<String>(
        flag: "tls-key", key: "tlsKey", valueName: "file", note: "none (given together with --tls-cert)",
        "The private key (PEM, unencrypted) of --tls-cert; the two go together")

    public static let tlsHandshakeTimeout = Setting<Int>(
        flag: "tls-handshake-timeout", key: "tlsHandshakeTimeout", valueName: "ms", default: 10_000, bounds: .positive,
        "Milliseconds a client of a tls: listener has to finish its TLS handshake before it is closed; a ws: or wss: client's "
            + "upgrade request (at most 8 KiB) must arrive within it too")

    public static let tcpKeepalive = Setting<Int>(
        flag: "tcp-keepalive", key: "tcpKeepalive", valueName: "seconds", default: 60,
        bounds: SettingBounds(allowsZero: true, max: 86_400, maxText: "86400 seconds (a day)", unit: "seconds"),
        "Seconds a TCP, TLS or WebSocket client connection may carry nothing before the kernel probes the client; probes go "
            + "every quarter of that, and after 4 unanswered the connection is closed and what its client made is released, "
            + "so a client whose machine vanished, or that closed while its calls still ran, is let go about twice this long "
            + "after its last traffic; 0 turns the probes off")

    public static let logLevel = Setting<String>(
        flag: "log-level", key: "logLevel", valueName: "level", default: "info",
        "trace, debug, info, notice, warning, error or critical. At info every finished request writes one access-log line "
            + "(logger xhrpc.access)")

    public static let logFormat = Setting<String>(
        flag: "log-format", key: "logFormat", valueName: "format", default: "text",
        "text or json, written to stderr")

    public static let maxMessageBytes = Setting<Int>(
        flag: "max-message-bytes", key: "maxMessageBytes", valueName: "n", default: 16 << 20, bounds: .positive,
        "Largest incoming message; a bigger one gets an error and its connection is closed. On a "
            + "WebSocket it applies to the reassembled message, and a larger one closes the connection with code 1009")

    public static let maxConnections = Setting<Int>(
        flag: "max-connections", key: "maxConnections", valueName: "n", default: 1024, bounds: .positive,
        "Most client connections at once (those still in their TLS handshake count); more are refused with an error")

    public static let maxBufferBytes = Setting<Int>(
        flag: "max-buffer-bytes", key: "maxBufferBytes", valueName: "n", default: 8 << 20,
        // At most 1 TiB: the out-queue is sized from it (three times, for a base64 reply).
        bounds: SettingBounds(allowsZero: false, max: Double(1 << 40), maxText: "1099511627776 (1 TiB)"),
        "Unread response bytes held per request before its transfer pauses until the client reads; per "
            + "raw socket it bounds both the unread received bytes and the bytes queued to send")

    public static let maxRedirects = Setting<Int>(
        flag: "max-redirects", key: "maxRedirects", valueName: "n", default: 10, bounds: .nonNegative,
        "Redirects followed per request")

    public static let uploadRoot = Setting<String>(
        flag: "upload-root", key: "uploadRoot", valueName: "dir", note: "none: sendWithFile and upload {path} are refused",
        see: "../guide/files.md",
        "Directory that sendWithFile, upload and multipart file parts read from, each principal below its folder "
            + "dir/NAME (the socket owner below dir itself; a principal's \"uploadRoot\" in the config file wins)")

    public static let downloadRoot = Setting<String>(
        flag: "download-root", key: "downloadRoot", valueName: "dir", note: "none: download is refused",
        see: "../guide/files.md",
        "Directory that download writes into (files mode 0600, folders 0700), each principal below its folder dir/NAME "
            + "as for --upload-root")

    public static let caFile = Setting<String>(
        flag: "ca-file", key: "caFile", valueName: "file", note: "the system's CA bundle",
        "A PEM bundle of the CAs that https servers' certificates are verified against, instead of the system's")

    public static let tlsMin = Setting<String>(
        flag: "tls-min", key: "tlsMin", valueName: "version", default: "1.2",
        "Lowest TLS version accepted from https servers: 1.2 or 1.3")

    public static let certRoot = Setting<String>(
        flag: "cert-root", key: "certRoot", valueName: "dir", note: "none: setClientCertificate is refused",
        "Directory that setClientCertificate may read certificate and key files from")

    public static let egressProxy = Setting<String>(
        flag: "egress-proxy", key: "egressProxy", valueName: "url", note: "none: enableSecureCommunication is refused",
        "http://[user:password@]host:port of the HTTP proxy that enableSecureCommunication routes a client's requests "
            + "through. User and password may be percent-encoded and are offered with Basic")

    public static let stateDir = Setting<String>(
        flag: "state-dir", key: "stateDir", valueName: "dir", note: "none: cookies and stored credentials live in memory only",
        "Directory for state that outlives the process: each principal's persistent cookies, in cookies-<principal>.txt "
            + "(mode 0600), loaded at start and saved within a second of a change and at shutdown, and its stored "
            + "credentials, in credentials-<principal>.json (mode 0600, saved at each change). Temporary files a killed "
            + "save left are removed at start. Created 0700 if missing")

    public static let allow = Setting<[String]>(
        flag: "allow", key: "allow", valueName: "pattern",
        note: "none: every host passes the first check; special-purpose ranges are denied", see: "../security/egress.md",
        "Let requests go to hosts matching PATTERN: a name (example.com), *.example.com for its subdomains at any depth (not "
            + "itself), an IP address or CIDR range (10.0.0.0/8, 2001:db8::/32, [::1]), optionally with :port "
            + "(example.com:443, [::1]:8080, 10.0.0.0/8:443). Once any is given, only matching hosts pass. An IP or CIDR "
            + "pattern also admits connections to the special-purpose ranges it covers (loopback, private, link-local...), "
            + "which are denied otherwise. An international name is written in its ASCII form (xn--bcher-kva.example); a URL with "
            + "the Unicode spelling (http://bücher.example/) is checked, and sent, in that form. "
            + "A bad pattern stops the server at start with a message quoting it")

    public static let deny = Setting<[String]>(
        flag: "deny", key: "deny", valueName: "pattern", note: "none", see: "../security/egress.md",
        "Refuse requests to hosts or addresses matching PATTERN, in the syntax of --allow. A deny pattern always wins over "
            + "an allow pattern")

    public static let principals = Setting<StructuredSetting>(
        flag: nil, key: "principals", valueName: nil, note: "none: the Unix socket's owner only", keyType: .objects,
        see: "../operations/listeners-and-principals.md",
        "Who may connect, in the config file only (so that no token hash sits on a command line). Each entry: \"name\", "
            + "\"tokenSha256\" (64 hex digits, the SHA-256 of the token: printf %s TOKEN | sha256sum), \"uid\" (the uid of "
            + "Unix-socket peers it stands for), \"admin\" (true or false), \"negotiate\" (true grants NEGOTIATE) and "
            + "\"limits\" (an object, as the key \"limits\", over the server's), \"uploadRoot\" and \"downloadRoot\" (its own "
            + "roots instead of its folders below the server's)")

    public static let limits = Setting<StructuredSetting>(
        flag: "limit", key: "limits", valueName: "name=n", note: "per principal: " + limitDefaults, keyType: .object, repeatable: true,
        "A limit per principal, NAME=N on the command line, {\"NAME\": N} in the file: " + limitList
            + ". A principal's own \"limits\" in the config file win")

    /// The limits of `--limit`, each with what it counts.
    static var limitList: String {
        let what = ["requests": "held", "transfers": "in flight; more sends are refused", "bufferedBytes": "bytes held for its calls: unread, unsent, and request headers, bodies, credentials and cookies stored",
                    "connections": "open at once", "sockets": "raw sockets held"]
        return PrincipalLimits.keys.map { "\($0) (\(what[$0] ?? ""))" }.joined(separator: ", ")
    }

    /// The defaults of `--limit`, from `PrincipalLimits`, whose values they are.
    static var limitDefaults: String {
        let defaults = PrincipalLimits()
        return PrincipalLimits.keys.map { "\($0) \((defaults.value($0) ?? 0).settingText)" }.joined(separator: ", ")
    }

    public static let maxResponseBytes = Setting<Int>(
        flag: "max-response-bytes", key: "maxResponseBytes", valueName: "n", note: "no limit", bounds: .positive,
        "Body bytes one response may have; a larger one ends in DONE with status 0 and a status text naming the flag")

    public static let authTimeout = Setting<Double>(
        flag: "auth-timeout", key: "authTimeout", valueName: "seconds", default: 10,
        bounds: .seconds(max: 3600, maxText: "3600 (an hour)"),
        "Seconds a TCP client has to call auth before its connection is closed, whatever it is doing")

    public static let authFailuresPerSource = Setting<Int>(
        flag: "auth-failures-per-source", key: "authFailuresPerSource", valueName: "n", default: 20, bounds: .positive,
        "Wrong tokens (auth, and bearer tokens of the operations listener) judged per minute from one source: an IPv4 "
            + "address, an IPv6 /64, a Unix peer's uid. Past it that source's tokens, right or wrong, are answered "
            + "limit_exceeded untried, with data.retryAfter")

    public static let authFailuresTotal = Setting<Int>(
        flag: "auth-failures-total", key: "authFailuresTotal", valueName: "n", default: 200, bounds: .positive,
        "Wrong tokens judged per minute from all sources together; past it every token is answered limit_exceeded "
            + "untried until the budget drains")

    public static let insecureTCP = Setting<Bool>(
        flag: "insecure-tcp", key: "insecureTCP", valueName: nil, default: false, note: "TCP needs principals with tokens",
        "Let a TCP listener on loopback run without principals, every TCP client acting as the socket owner. For a "
            + "single-user development machine only")

    public static let allowNegotiate = Setting<Bool>(
        flag: "allow-negotiate", key: "allowNegotiate", valueName: nil, default: false,
        note: "NEGOTIATE is forbidden to the socket owner",
        "Let the socket owner authenticate requests with NEGOTIATE. Negotiate answers with xhrpcd's "
            + "own Kerberos identity, from its ticket cache (KRB5CCNAME), whichever client asks; a principal in the config "
            + "file is granted it with \"negotiate\": true")

    public static let requestTTL = Setting<Double>(
        flag: "request-ttl", key: "requestTTL", valueName: "seconds", default: 300, bounds: .seconds(),
        "Seconds a request that is not in flight (UNSENT, OPENED or DONE) may go unused (no call naming it) before the "
            + "server releases it; fractions allowed")

    public static let detachTTL = Setting<Double>(
        flag: "detach-ttl", key: "detachTTL", valueName: "seconds", default: 60, bounds: .seconds(),
        "Seconds a detach token stays valid; detached requests not attached by then are released; fractions allowed")

    public static let drainSeconds = Setting<Double>(
        flag: "drain-seconds", key: "drainSeconds", valueName: "seconds", default: 10, bounds: .seconds(allowsZero: true),
        "On SIGTERM or SIGINT, the longest wait for transfers in flight to finish and be read before they are aborted; "
            + "0 aborts at once; fractions allowed")

    public static let redactQuery = Setting<[String]>(
        flag: "redact-query", key: "redactQuery", valueName: "name", note: "none",
        "A query parameter whose value is hidden wherever a URL is shown (list, logs, status texts), besides token, "
            + "access_token, key, api_key, apikey, secret, password, sig and signature, which always are (any case, "
            + "percent-encoded or not)")

    public static let httpListen = Setting<String>(
        flag: "http-listen", key: "httpListen", valueName: "tcp:host:port", note: "none: no operations listener",
        see: "../operations/operations-listener.md",
        "The HTTP operations listener, tcp:HOST:PORT: GET /healthz (200 while the process lives), /readyz (200 when "
            + "listening and not draining, else 503), /metrics (Prometheus text), the live dashboard page at / and its "
            + "WebSocket JSON-RPC on /rpc (the page's own origin accepted there without --ws-origin). On loopback it is "
            + "open to local processes; another address needs principals with tokens in the config file. Once principals "
            + "have tokens, /metrics asks for an admin's token as Authorization: Bearer wherever it listens, loopback "
            + "included")

    public static let httpMaxConnections = Setting<Int>(
        flag: "http-max-connections", key: "httpMaxConnections", valueName: "n", default: 64, bounds: .positive,
        see: "../operations/operations-listener.md",
        "Clients the operations listener (--http-listen) holds at once; more are answered 503 and closed at once (one "
            + "that already sent its request may see a reset), so they cannot use up the descriptors the other listeners "
            + "need. A /rpc client counts under --max-connections once upgraded")

    public static let socketMode = Setting<String>(
        flag: "socket-mode", key: "socketMode", valueName: "mode", default: "0600",
        "Permission bits of Unix sockets, in octal (0600: the owner only)")

    /// The table, in the order `--help` and the reference page list it.
    public static let all: [SettingDescriptor] = [
        config.descriptor, listen.descriptor, wsOrigins.descriptor, tlsCert.descriptor, tlsKey.descriptor,
        tlsHandshakeTimeout.descriptor, tcpKeepalive.descriptor, logLevel.descriptor, logFormat.descriptor,
        maxMessageBytes.descriptor, maxConnections.descriptor, maxBufferBytes.descriptor, maxRedirects.descriptor,
        uploadRoot.descriptor, downloadRoot.descriptor, socketMode.descriptor, caFile.descriptor, tlsMin.descriptor,
        certRoot.descriptor, egressProxy.descriptor, stateDir.descriptor, allow.descriptor, deny.descriptor,
        principals.descriptor, limits.descriptor, maxResponseBytes.descriptor, authTimeout.descriptor,
        authFailuresPerSource.descriptor, authFailuresTotal.descriptor,
        insecureTCP.descriptor, allowNegotiate.descriptor, requestTTL.descriptor, detachTTL.descriptor,
        drainSeconds.descriptor, httpListen.descriptor, httpMaxConnections.descriptor, redactQuery.descriptor,
    ]

    /// The config file's keys, each with its JSON type.
    public static let keyTypes: [String: SettingType] = Dictionary(
        uniqueKeysWithValues: all.compactMap { d in d.key.map { ($0, d.type) } })

    /// Checks every key of a config file (`place` names it) against the table: an unknown
    /// key, or a value of another type, is refused with the key named, its type and the
    /// value given. Every key is checked, also one that a flag overrides.
    public static func check(_ file: JSONObject, in place: String) throws(SettingError) {
        for (key, value) in file.members {
            guard let type = keyTypes[key] else {
                throw SettingError("\(place) has an unknown key '\(key)'; known: \(keyTypes.keys.sorted().joined(separator: ", "))")
            }
            guard type.admits(value) else {
                if type == .strings, let items = value.arrayValue, let odd = items.first(where: { $0.stringValue == nil }) {
                    throw SettingError("the config key '\(key)' must hold only strings; found \(JSON.encodeString(odd))")
                }
                throw SettingError("the config key '\(key)' must be \(type.rawValue); found \(JSON.encodeString(value))")
            }
        }
    }
}
