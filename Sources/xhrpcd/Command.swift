import ArgumentParser
import Foundation
import HTTPEngine
import JSON
import Logging
import Service

/// The command line of xhrpcd. Every flag also has a key in the `--config` JSON file
/// (named in its help); a flag given on the command line wins over the file.
struct XHRPCD: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xhrpcd",
        abstract: "Performs HTTP(S) requests for programs in any language, over JSON-RPC 2.0.",
        discussion: """
            Clients connect over a Unix, TCP or TLS socket and speak JSON-RPC 2.0, one JSON value \
            per line. `rpc.discover` returns the OpenRPC description of every method. \
            SIGINT or SIGTERM stops the server gracefully: it stops accepting, lets the \
            transfers in flight finish and be read for up to --drain-seconds, then exits 0; \
            a second signal ends the drain at once.
            """,
        version: Server.version)

    @Option(name: .long, help: ArgumentHelp(
        "Where to listen: unix:PATH, tcp:HOST:PORT, tls:HOST:PORT for TCP with TLS (needs --tls-cert and --tls-key), ws:HOST:PORT for WebSocket (one JSON-RPC message per text frame), or wss:HOST:PORT for WebSocket over TLS (repeatable; config key \"listen\", an array). Default: unix:$XDG_RUNTIME_DIR/xhrpc.sock, else unix:/tmp/xhrpc-<uid>.sock. TCP, TLS, ws and wss need principals with tokens in the config file (clients then call auth first), or, on loopback only, --insecure-tcp.",
        valueName: "address"))
    var listen: [String] = []

    @Option(name: .customLong("ws-origin"), help: ArgumentHelp("An origin (scheme://host[:port]) whose web pages may connect to the ws: and wss: listeners and to /rpc of --http-listen (repeatable; config key \"wsOrigins\", an array). By default an upgrade that carries an Origin header (every browser's does) is refused with 403; one without Origin (a program) is accepted.", valueName: "origin"))
    var wsOrigin: [String] = []

    @Option(name: .long, help: ArgumentHelp("The certificate chain (PEM, leaf first) that tls: and wss: listeners present to clients (config key \"tlsCert\").", valueName: "file"))
    var tlsCert: String?

    @Option(name: .long, help: ArgumentHelp("The private key (PEM, unencrypted) of --tls-cert (config key \"tlsKey\").", valueName: "file"))
    var tlsKey: String?

    @Option(name: .customLong("tcp-keepalive"), help: ArgumentHelp("Seconds a TCP, TLS or WebSocket client connection may carry nothing before the kernel probes the client; probes go every quarter of that, and after 4 unanswered the connection is closed and what its client made is released, so a client whose machine vanished, or that closed while its calls still ran, is let go about twice this long after its last traffic; 0 turns the probes off (config key \"tcpKeepalive\"; default 60).", valueName: "seconds"))
    var tcpKeepalive: Int?

    @Option(name: .long, help: ArgumentHelp("Milliseconds a client of a tls: listener has to finish its TLS handshake before it is closed (config key \"tlsHandshakeTimeout\"; default 10000).", valueName: "ms"))
    var tlsHandshakeTimeout: Int?

    @Option(name: .long, help: ArgumentHelp("A JSON file with any of the settings below, by their config keys.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (config key \"logLevel\"; default info).", valueName: "level"))
    var logLevel: String?

    @Option(name: .long, help: ArgumentHelp("text or json, written to stderr (config key \"logFormat\"; default text).", valueName: "format"))
    var logFormat: String?

    @Option(name: .long, help: ArgumentHelp("Largest incoming message; a bigger one gets an error and its connection is closed (config key \"maxMessageBytes\"; default 16777216).", valueName: "n"))
    var maxMessageBytes: Int?

    @Option(name: .long, help: ArgumentHelp("Most client connections at once; more are refused with an error (config key \"maxConnections\"; default 1024).", valueName: "n"))
    var maxConnections: Int?

    @Option(name: .long, help: ArgumentHelp("Unread response bytes held per request before its transfer pauses until the client reads (config key \"maxBufferBytes\"; default 8388608).", valueName: "n"))
    var maxBufferBytes: Int?

    @Option(name: .long, help: ArgumentHelp("Redirects followed per request (config key \"maxRedirects\"; default 10).", valueName: "n"))
    var maxRedirects: Int?

    @Option(name: .long, help: ArgumentHelp("Directory that sendWithFile and upload may read from; without them they are refused (config key \"uploadRoot\").", valueName: "dir"))
    var uploadRoot: String?

    @Option(name: .long, help: ArgumentHelp("Directory that download writes into (files mode 0600, folders 0700); without it download is refused (config key \"downloadRoot\").", valueName: "dir"))
    var downloadRoot: String?

    @Option(name: .long, help: ArgumentHelp("A PEM bundle of the CAs that https servers' certificates are verified against, instead of the system's (config key \"caFile\").", valueName: "file"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("Lowest TLS version accepted: 1.2 or 1.3 (config key \"tlsMin\"; default 1.2).", valueName: "version"))
    var tlsMin: String?

    @Option(name: .long, help: ArgumentHelp("Directory that setClientCertificate may read certificate and key files from; without it setClientCertificate is refused (config key \"certRoot\").", valueName: "dir"))
    var certRoot: String?

    @Option(name: .long, help: ArgumentHelp("http://[user:password@]host:port of the HTTP proxy that enableSecureCommunication routes a client's requests through (config key \"egressProxy\"). User and password may be percent-encoded and are offered with Basic.", valueName: "url"))
    var egressProxy: String?

    @Option(name: .long, help: ArgumentHelp("Directory for state that outlives the process: each principal's persistent cookies, in cookies-<principal>.txt (mode 0600), loaded at start and saved within a second of a change and at shutdown, and its stored credentials, in credentials-<principal>.json (mode 0600, saved at each change). Temporary files a killed save left are removed at start. Created 0700 if missing. Without it cookies and credentials live in memory only (config key \"stateDir\").", valueName: "dir"))
    var stateDir: String?

    @Option(name: .long, help: ArgumentHelp(
        "Let requests go to hosts matching PATTERN (repeatable; config key \"allow\", an array): a name (example.com), *.example.com for its subdomains, an IP address or CIDR range (10.0.0.0/8, 2001:db8::/32, [::1]), optionally with :port. Once any is given, only matching hosts pass. An IP or CIDR pattern also admits connections to the special-purpose ranges it covers (loopback, private, link-local...), which are denied otherwise.",
        valueName: "pattern"))
    var allow: [String] = []

    @Option(name: .long, help: ArgumentHelp(
        "Refuse requests to hosts or addresses matching PATTERN, in the syntax of --allow (repeatable; config key \"deny\", an array). A deny pattern always wins over an allow pattern.",
        valueName: "pattern"))
    var deny: [String] = []

    @Option(name: .long, help: ArgumentHelp(
        "A limit per principal, NAME=N (repeatable; config key \"limits\", an object): requests (held; default 1000), transfers (in flight; default 64; more sends are refused), bufferedBytes (bytes held for its calls: unread, unsent, and request headers, bodies and credentials stored; default 268435456), connections (default 128), sockets (raw sockets held; default 64). A principal's own \"limits\" in the config file win.",
        valueName: "name=n"))
    var limit: [String] = []

    @Option(name: .long, help: ArgumentHelp("Body bytes one response may have; a larger one ends in DONE with status 0 (config key \"maxResponseBytes\"; default: no limit).", valueName: "n"))
    var maxResponseBytes: Int?

    @Option(name: .long, help: ArgumentHelp("Seconds a TCP client has to call auth before its connection is closed (config key \"authTimeout\"; default 10).", valueName: "seconds"))
    var authTimeout: Double?

    @Flag(name: .long, help: ArgumentHelp("Let a TCP listener on loopback run without principals, every TCP client acting as the socket owner (config key \"insecureTCP\"). For a single-user development machine only."))
    var insecureTcp = false

    @Flag(name: .long, help: ArgumentHelp("Let the socket owner authenticate requests with NEGOTIATE (config key \"allowNegotiate\"). Negotiate answers with xhrpcd's own Kerberos identity, from its ticket cache (KRB5CCNAME), whichever client asks; a principal in the config file is granted it with \"negotiate\": true."))
    var allowNegotiate = false

    @Option(name: .customLong("request-ttl"), help: ArgumentHelp("Seconds a request that is not in flight (UNSENT, OPENED or DONE) may go unused (no call naming it) before the server releases it; fractions allowed (config key \"requestTTL\"; default 300).", valueName: "seconds"))
    var requestTTL: Double?

    @Option(name: .customLong("detach-ttl"), help: ArgumentHelp("Seconds a detach token stays valid; detached requests not attached by then are released (config key \"detachTTL\"; default 60).", valueName: "seconds"))
    var detachTTL: Double?

    @Option(name: .customLong("drain-seconds"), help: ArgumentHelp("On SIGTERM or SIGINT, the longest wait for transfers in flight to finish and be read before they are aborted; 0 aborts at once (config key \"drainSeconds\"; default 10).", valueName: "seconds"))
    var drainSeconds: Double?

    @Option(name: .customLong("redact-query"), help: ArgumentHelp("A query parameter whose value is hidden wherever a URL is shown (list, logs, status texts), besides token, access_token, key, api_key, apikey, secret, password, sig and signature (repeatable; config key \"redactQuery\", an array).", valueName: "name"))
    var redactQuery: [String] = []

    @Option(name: .customLong("http-listen"), help: ArgumentHelp("The HTTP operations listener, tcp:HOST:PORT: GET /healthz (200 while the process lives), /readyz (200 when listening and not draining, else 503) /metrics (Prometheus text), the live dashboard page at / and its WebSocket JSON-RPC on /rpc (the page's own origin accepted there without --ws-origin). Off by default. On loopback it is open to local processes; another address needs principals with tokens in the config file, and /metrics then asks for an admin's token as Authorization: Bearer (config key \"httpListen\").", valueName: "tcp:host:port"))
    var httpListen: String?

    @Option(name: .long, help: ArgumentHelp("Permission bits of Unix sockets, in octal (config key \"socketMode\"; default 0600: the owner only).", valueName: "mode"))
    var socketMode: String?

    mutating func run() throws {
        let file = try config.map(ConfigFile.load) ?? ConfigFile()
        var settings = ServerConfig()
        let addresses = listen.isEmpty ? try file.strings("listen") : listen
        do {
            settings.listen = try addresses.map { a throws(ListenAddress.ParseError) in try ListenAddress.parse(a) }
        } catch {
            throw ValidationError(error.description)
        }
        if settings.listen.isEmpty { settings.listen = [ListenAddress.defaultUnix] }
        if let http = httpListen ?? file.string("httpListen") {
            guard let address = try? ListenAddress.parse(http), case .tcp = address else {
                throw ValidationError("--http-listen '\(http)': expected tcp:HOST:PORT")
            }
            settings.httpListen = address
        }
        settings.connection.maxMessageBytes = try positive(maxMessageBytes ?? file.int("maxMessageBytes"), "max-message-bytes")
            ?? settings.connection.maxMessageBytes
        // The out-queue must hold the largest reply: a full buffer as base64, and more.
        settings.maxConnections = try positive(maxConnections ?? file.int("maxConnections"), "max-connections") ?? settings.maxConnections
        settings.maxBufferBytes = try positive(maxBufferBytes ?? file.int("maxBufferBytes"), "max-buffer-bytes") ?? settings.maxBufferBytes
        settings.connection.maxOutboundBytes = max(settings.connection.maxOutboundBytes, settings.maxBufferBytes * 3)
        settings.maxRedirects = try positive(maxRedirects ?? file.int("maxRedirects"), "max-redirects", allowZero: true) ?? settings.maxRedirects
        settings.maxResponseBytes = try positive(maxResponseBytes ?? file.int("maxResponseBytes"), "max-response-bytes")
        settings.insecureTCP = try insecureTcp || file.bool("insecureTCP")
        settings.allowNegotiate = try allowNegotiate || file.bool("allowNegotiate")
        if let t = authTimeout ?? file.double("authTimeout") {
            guard t > 0, t <= 3600 else { throw ValidationError("--auth-timeout must be from 0 to 3600 seconds") }
            settings.authTimeout = t
        }
        settings.limits = try Self.limits(file.object("limits"), base: settings.limits, what: "the config key \"limits\"")
        for item in limit {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let n = Int(parts[1]), n > 0, settings.limits.set(parts[0], n) else {
                throw ValidationError("--limit \(item): expected NAME=N with NAME one of \(PrincipalLimits.keys.joined(separator: ", ")) and N a positive number")
            }
        }
        let redacted = redactQuery.isEmpty ? try file.strings("redactQuery") : redactQuery
        for name in redacted {
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x26 && $0 != 0x3D }) else {
                throw ValidationError("--redact-query \(name): a query parameter name, without spaces, '&' or '='")
            }
            settings.engine.secretQueryNames.insert(name.lowercased())
        }
        settings.principals = try file.principals(defaults: settings.limits)
        settings.uploadRoot = uploadRoot ?? file.string("uploadRoot")
        settings.downloadRoot = downloadRoot ?? file.string("downloadRoot")
        settings.certRoot = certRoot ?? file.string("certRoot")
        if let caFile = caFile ?? file.string("caFile") {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw ValidationError("--ca-file \(caFile) is not a readable file")
            }
            settings.engine.caFile = caFile
        }
        if let version = tlsMin ?? file.string("tlsMin") {
            guard let v = TLSVersion(rawValue: version) else { throw ValidationError("--tls-min must be 1.2 or 1.3") }
            settings.engine.tlsMin = v
        }
        if let proxy = egressProxy ?? file.string("egressProxy") {
            do {
                settings.egressProxy = try EgressProxyURL.parse(proxy)
            } catch {
                throw ValidationError("--egress-proxy: \(error.description)")
            }
        }
        settings.wsOrigins = wsOrigin.isEmpty ? try file.strings("wsOrigins") : wsOrigin
        settings.tlsCertificateFile = tlsCert ?? file.string("tlsCert")
        settings.tlsKeyFile = tlsKey ?? file.string("tlsKey")
        if (settings.tlsCertificateFile == nil) != (settings.tlsKeyFile == nil) {
            throw ValidationError("--tls-cert and --tls-key go together: give both or neither")
        }
        if let timeout = try positive(tlsHandshakeTimeout ?? file.int("tlsHandshakeTimeout"), "tls-handshake-timeout") {
            settings.tlsHandshakeTimeout = UInt64(timeout)
        }
        if let idle = try positive(tcpKeepalive ?? file.int("tcpKeepalive"), "tcp-keepalive", allowZero: true) {
            guard idle <= 86_400 else { throw ValidationError("--tcp-keepalive must be at most 86400 seconds (a day)") }
            settings.tcpKeepalive = UInt32(idle)
        }
        settings.stateDir = stateDir ?? file.string("stateDir")
        if settings.stateDir?.isEmpty == true { throw ValidationError("--state-dir needs a directory") }
        let allowPatterns = allow.isEmpty ? try file.strings("allow") : allow
        let denyPatterns = deny.isEmpty ? try file.strings("deny") : deny
        do {
            settings.engine.egressPolicy = try EgressPolicy(allow: allowPatterns, deny: denyPatterns)
        } catch {
            throw ValidationError("\(error.description) (from --allow/--deny or the config keys \"allow\"/\"deny\")")
        }
        if let mode = socketMode ?? file.string("socketMode") {
            guard let bits = UInt16(mode, radix: 8), bits <= 0o777 else {
                throw ValidationError("--socket-mode must be octal permission bits such as 0600")
            }
            settings.unixSocketMode = bits
        }
        settings.requestTTL = try seconds(requestTTL ?? file.double("requestTTL"), "request-ttl") ?? settings.requestTTL
        settings.detachTTL = try seconds(detachTTL ?? file.double("detachTTL"), "detach-ttl") ?? settings.detachTTL
        settings.drainSeconds = try seconds(drainSeconds ?? file.double("drainSeconds"), "drain-seconds", allowZero: true)
            ?? settings.drainSeconds
        let level = logLevel ?? file.string("logLevel") ?? "info"
        guard let parsedLevel = Logger.Level(rawValue: level) else {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let format = logFormat ?? file.string("logFormat") ?? "text"
        guard let logFormat = StderrLogHandler.Format(rawValue: format) else {
            throw ValidationError("--log-format must be text or json")
        }
        try Daemon.run(settings, level: parsedLevel, format: logFormat)
    }

    /// Reads a limits object (`{"requests": 10, ...}`) over `base`.
    static func limits(_ object: JSONObject?, base: PrincipalLimits, what: String) throws -> PrincipalLimits {
        var limits = base
        for m in object?.members ?? [] {
            guard let n = m.value.int64Value, n > 0, limits.set(m.key, Int(n)) else {
                throw ValidationError("\(what): '\(m.key)' must be one of \(PrincipalLimits.keys.joined(separator: ", ")) with a positive number")
            }
        }
        return limits
    }

    private func positive(_ v: Int?, _ name: String, allowZero: Bool = false) throws -> Int? {
        guard let v else { return nil }
        guard v > 0 || (allowZero && v == 0) else {
            throw ValidationError("--\(name) must be a \(allowZero ? "non-negative" : "positive") number")
        }
        return v
    }

    /// A duration in seconds: finite, positive (or zero where allowed), and under a
    /// year, so that it fits the loop's millisecond timers with room to spare.
    private func seconds(_ v: Double?, _ name: String, allowZero: Bool = false) throws -> Double? {
        guard let v else { return nil }
        guard v.isFinite, v > 0 || (allowZero && v == 0), v <= 365 * 86400 else {
            throw ValidationError("--\(name) must be a \(allowZero ? "non-negative" : "positive") number of seconds, at most a year")
        }
        return v
    }
}

/// The `--config` file: a JSON object whose keys are the flags' config keys.
struct ConfigFile {
    var values = JSONObject()
    /// How a message names a key: the file's own keys, or those of one entry of it.
    var keyName: (String) -> String = { "the config key '\($0)'" }

    /// Refuses a key outside `known`, naming `place` (the file, or an entry of it).
    func rejectUnknownKeys(_ known: Set<String>, in place: String) throws {
        for key in values.keys where !known.contains(key) {
            throw ValidationError("\(place) has an unknown key '\(key)'; known: \(known.sorted().joined(separator: ", "))")
        }
    }

    static func load(_ path: String) throws -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read the config file \(path)")
        }
        do {
            guard case .object(let o) = try JSON.decode([UInt8](data)) else {
                throw ValidationError("the config file \(path) must hold a JSON object")
            }
            let known: Set = ["listen", "logLevel", "logFormat", "maxMessageBytes", "maxConnections", "maxBufferBytes",
                              "maxRedirects", "uploadRoot", "downloadRoot", "socketMode", "caFile", "tlsMin", "certRoot", "egressProxy",
                              "stateDir", "allow", "deny", "principals", "limits", "maxResponseBytes", "insecureTCP", "allowNegotiate", "authTimeout",
                              "requestTTL", "detachTTL", "drainSeconds", "redactQuery",
                              "tlsCert", "tlsKey", "tlsHandshakeTimeout", "tcpKeepalive", "httpListen", "wsOrigins"]
            let file = ConfigFile(values: o)
            try file.rejectUnknownKeys(known, in: "the config file \(path)")
            return file
        } catch let e as JSONParseError {
            throw ValidationError("the config file \(path) is not JSON: \(e)")
        }
    }

    func string(_ key: String) -> String? { values[key]?.stringValue }

    func bool(_ key: String) throws -> Bool {
        guard let value = values[key] else { return false }
        guard case .bool(let b) = value else { throw ValidationError("\(keyName(key)) must be true or false") }
        return b
    }

    func object(_ key: String) throws -> JSONObject? {
        guard let value = values[key] else { return nil }
        guard case .object(let o) = value else { throw ValidationError("\(keyName(key)) must be an object") }
        return o
    }

    /// The "principals" array: `{"name", "tokenSha256"?, "uid"?, "admin"?, "negotiate"?, "limits"?}`
    /// each. A token is given only as the hex SHA-256 of its bytes, so the file holds
    /// nothing that opens the server.
    func principals(defaults: PrincipalLimits) throws -> [PrincipalConfig] {
        guard let value = values["principals"] else { return [] }
        guard let items = value.arrayValue else { throw ValidationError("the config key 'principals' must be an array of objects") }
        return try items.enumerated().map { index, item in
            let what = "principals[\(index)]"
            guard case .object(let o) = item else { throw ValidationError("\(what) must be an object") }
            var entry = ConfigFile(values: o)
            try entry.rejectUnknownKeys(["name", "tokenSha256", "uid", "admin", "negotiate", "limits"], in: what)
            guard let name = entry.string("name") else { throw ValidationError("\(what) needs a \"name\"") }
            entry.keyName = { "\(what) (\(name)): \"\($0)\"" }
            var hash: [UInt8]?
            if let text = o["tokenSha256"] {
                guard let h = text.stringValue.flatMap(TokenDigest.parseHex) else {
                    throw ValidationError("\(entry.keyName("tokenSha256")) must be 64 hex digits, the SHA-256 of the token (printf %s TOKEN | sha256sum)")
                }
                hash = h
            }
            var uid: UInt32?
            if let v = o["uid"] {
                guard let n = v.int64Value, let u = UInt32(exactly: n) else { throw ValidationError("\(entry.keyName("uid")) must be a uid") }
                uid = u
            }
            let limits = try XHRPCD.limits(try entry.object("limits"), base: defaults, what: "\(what) (\(name)) limits")
            let admin = try entry.bool("admin")
            return PrincipalConfig(name: name, tokenHash: hash, uid: uid, isAdmin: admin, mayNegotiate: try entry.bool("negotiate"),
                                   limits: limits)
        }
    }
    func int(_ key: String) -> Int? { values[key]?.int64Value.map(Int.init) }
    func double(_ key: String) -> Double? { values[key]?.doubleValue }
    /// A list of strings (`listen`, `allow`, `deny`); absent is empty. An element of
    /// another type is an error, not skipped: a listener or a policy rule silently
    /// dropped is worse than a server that does not start.
    func strings(_ key: String) throws -> [String] {
        guard let value = values[key] else { return [] }
        guard let array = value.arrayValue else {
            throw ValidationError("the config key '\(key)' must be an array of strings")
        }
        return try array.map { element in
            guard let text = element.stringValue else {
                throw ValidationError("the config key '\(key)' must hold only strings; found \(element)")
            }
            return text
        }
    }
}
