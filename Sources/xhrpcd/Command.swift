import ArgumentParser
import Foundation
import HTTPEngine
import JSON
import Logging
import Service

/// The command line of xhrpcd. Its options are the rows of the settings table
/// (`Settings`, in Service/Settings), which gives each its name, its help, its config key
/// and its default; a flag given on the command line wins over the `--config` file.
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

    // Each option takes its name and help from the settings table (Service/Settings):
    // the text and the default live there, once. test_daemon.py checks that every
    // option has a row and every row with a flag an option.
    @Option(name: Settings.listen.name, help: Settings.listen.argumentHelp)
    var listen: [String] = []

    @Option(name: Settings.wsOrigins.name, help: Settings.wsOrigins.argumentHelp)
    var wsOrigin: [String] = []

    @Option(name: Settings.tlsCert.name, help: Settings.tlsCert.argumentHelp)
    var tlsCert: String?

    @Option(name: Settings.tlsKey.name, help: Settings.tlsKey.argumentHelp)
    var tlsKey: String?

    @Option(name: Settings.tcpKeepalive.name, help: Settings.tcpKeepalive.argumentHelp)
    var tcpKeepalive: Int?

    @Option(name: Settings.tlsHandshakeTimeout.name, help: Settings.tlsHandshakeTimeout.argumentHelp)
    var tlsHandshakeTimeout: Int?

    @Option(name: Settings.config.name, help: Settings.config.argumentHelp)
    var config: String?

    @Option(name: Settings.logLevel.name, help: Settings.logLevel.argumentHelp)
    var logLevel: String?

    @Option(name: Settings.logFormat.name, help: Settings.logFormat.argumentHelp)
    var logFormat: String?

    @Option(name: Settings.maxMessageBytes.name, help: Settings.maxMessageBytes.argumentHelp)
    var maxMessageBytes: Int?

    @Option(name: Settings.maxConnections.name, help: Settings.maxConnections.argumentHelp)
    var maxConnections: Int?

    @Option(name: Settings.maxBufferBytes.name, help: Settings.maxBufferBytes.argumentHelp)
    var maxBufferBytes: Int?

    @Option(name: Settings.maxRedirects.name, help: Settings.maxRedirects.argumentHelp)
    var maxRedirects: Int?

    @Option(name: Settings.uploadRoot.name, help: Settings.uploadRoot.argumentHelp)
    var uploadRoot: String?

    @Option(name: Settings.downloadRoot.name, help: Settings.downloadRoot.argumentHelp)
    var downloadRoot: String?

    @Option(name: Settings.caFile.name, help: Settings.caFile.argumentHelp)
    var caFile: String?

    @Option(name: Settings.tlsMin.name, help: Settings.tlsMin.argumentHelp)
    var tlsMin: String?

    @Option(name: Settings.certRoot.name, help: Settings.certRoot.argumentHelp)
    var certRoot: String?

    @Option(name: Settings.egressProxy.name, help: Settings.egressProxy.argumentHelp)
    var egressProxy: String?

    @Option(name: Settings.stateDir.name, help: Settings.stateDir.argumentHelp)
    var stateDir: String?

    @Option(name: Settings.allow.name, help: Settings.allow.argumentHelp)
    var allow: [String] = []

    @Option(name: Settings.deny.name, help: Settings.deny.argumentHelp)
    var deny: [String] = []

    @Option(name: Settings.limits.name, help: Settings.limits.argumentHelp)
    var limit: [String] = []

    @Option(name: Settings.maxResponseBytes.name, help: Settings.maxResponseBytes.argumentHelp)
    var maxResponseBytes: Int?

    @Option(name: Settings.authTimeout.name, help: Settings.authTimeout.argumentHelp)
    var authTimeout: Double?

    @Option(name: Settings.authFailuresPerSource.name, help: Settings.authFailuresPerSource.argumentHelp)
    var authFailuresPerSource: Int?

    @Option(name: Settings.authFailuresTotal.name, help: Settings.authFailuresTotal.argumentHelp)
    var authFailuresTotal: Int?

    @Flag(name: Settings.insecureTCP.name, help: Settings.insecureTCP.argumentHelp)
    var insecureTcp = false

    @Flag(name: Settings.allowNegotiate.name, help: Settings.allowNegotiate.argumentHelp)
    var allowNegotiate = false

    @Option(name: Settings.requestTTL.name, help: Settings.requestTTL.argumentHelp)
    var requestTTL: Double?

    @Option(name: Settings.detachTTL.name, help: Settings.detachTTL.argumentHelp)
    var detachTTL: Double?

    @Option(name: Settings.drainSeconds.name, help: Settings.drainSeconds.argumentHelp)
    var drainSeconds: Double?

    @Option(name: Settings.redactQuery.name, help: Settings.redactQuery.argumentHelp)
    var redactQuery: [String] = []

    @Option(name: Settings.httpListen.name, help: Settings.httpListen.argumentHelp)
    var httpListen: String?

    @Option(name: Settings.httpMaxConnections.name, help: Settings.httpMaxConnections.argumentHelp)
    var httpMaxConnections: Int?

    @Option(name: Settings.socketMode.name, help: Settings.socketMode.argumentHelp)
    var socketMode: String?

    /// Writes docs/reference/settings.md from the table to stdout and exits (`make
    /// settings-reference`); not a setting, so hidden from --help.
    @Flag(name: .customLong("print-settings-reference"), help: .hidden)
    var printSettingsReference = false

    mutating func run() throws {
        if printSettingsReference {
            print(SettingsReference.page(), terminator: "")
            return
        }
        let file = try config.map(ConfigFile.load) ?? ConfigFile()
        let (config, level, format) = try resolve(file)
        try Daemon.run(config, level: level, format: format)
    }

    /// The server's settings: each flag given, else its config key, else the table's
    /// default (already in `ServerConfig()`), each checked.
    private func resolve(_ file: ConfigFile) throws -> (ServerConfig, Logger.Level, StderrLogHandler.Format) {
        var settings = ServerConfig()
        let addresses = try file.list(Settings.listen, listen)
        do {
            settings.listen = try addresses.map { a throws(ListenAddress.ParseError) in try ListenAddress.parse(a) }
        } catch {
            throw ValidationError(error.description)
        }
        if settings.listen.isEmpty { settings.listen = [ListenAddress.defaultUnix] }
        if let http = try file.value(Settings.httpListen, httpListen) {
            guard let address = try? ListenAddress.parse(http), case .tcp = address else {
                throw ValidationError("--http-listen '\(http)': expected tcp:HOST:PORT")
            }
            settings.httpListen = address
        }
        settings.connection.maxMessageBytes = try file.value(Settings.maxMessageBytes, maxMessageBytes) ?? settings.connection.maxMessageBytes
        settings.maxConnections = try file.value(Settings.maxConnections, maxConnections) ?? settings.maxConnections
        settings.maxBufferBytes = try file.value(Settings.maxBufferBytes, maxBufferBytes) ?? settings.maxBufferBytes
        // The out-queue must hold the largest reply: a full buffer as base64, and more.
        settings.connection.maxOutboundBytes = max(settings.connection.maxOutboundBytes, settings.maxBufferBytes * 3)
        settings.maxRedirects = try file.value(Settings.maxRedirects, maxRedirects) ?? settings.maxRedirects
        settings.maxResponseBytes = try file.value(Settings.maxResponseBytes, maxResponseBytes)
        settings.insecureTCP = try insecureTcp || file.value(Settings.insecureTCP, nil) ?? settings.insecureTCP
        settings.allowNegotiate = try allowNegotiate || file.value(Settings.allowNegotiate, nil) ?? settings.allowNegotiate
        settings.authTimeout = try file.value(Settings.authTimeout, authTimeout) ?? settings.authTimeout
        settings.authFailuresPerSource = try file.value(Settings.authFailuresPerSource, authFailuresPerSource)
            ?? settings.authFailuresPerSource
        settings.authFailuresTotal = try file.value(Settings.authFailuresTotal, authFailuresTotal) ?? settings.authFailuresTotal
        settings.httpMaxConnections = try file.value(Settings.httpMaxConnections, httpMaxConnections)
            ?? settings.httpMaxConnections
        settings.limits = try Self.limits(file.object("limits"), base: settings.limits, what: "the config key \"limits\"")
        for item in limit {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let n = Int(parts[1]), n > 0, settings.limits.set(parts[0], n) else {
                throw ValidationError("--limit \(item): expected NAME=N with NAME one of \(PrincipalLimits.keys.joined(separator: ", ")) and N a positive number")
            }
        }
        for name in try file.list(Settings.redactQuery, redactQuery) {
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x26 && $0 != 0x3D }) else {
                throw ValidationError("--redact-query \(name): a query parameter name, without spaces, '&' or '='")
            }
            settings.engine.secretQueryNames.insert(name.lowercased())
        }
        settings.principals = try file.principals(defaults: settings.limits)
        settings.uploadRoot = try file.value(Settings.uploadRoot, uploadRoot)
        settings.downloadRoot = try file.value(Settings.downloadRoot, downloadRoot)
        settings.certRoot = try file.value(Settings.certRoot, certRoot)
        if let caFile = try file.value(Settings.caFile, caFile) {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw ValidationError("--ca-file \(caFile) is not a readable file")
            }
            settings.engine.caFile = caFile
        }
        if let version = try file.value(Settings.tlsMin, tlsMin) {
            guard let v = TLSVersion(rawValue: version) else {
                throw ValidationError("\(file.source(Settings.tlsMin, tlsMin)) must be 1.2 or 1.3; found '\(version)'")
            }
            settings.engine.tlsMin = v
        }
        if let proxy = try file.value(Settings.egressProxy, egressProxy) {
            do {
                settings.egressProxy = try EgressProxyURL.parse(proxy)
            } catch {
                throw ValidationError("--egress-proxy: \(error.description)")
            }
        }
        settings.wsOrigins = try file.list(Settings.wsOrigins, wsOrigin)
        settings.tlsCertificateFile = try file.value(Settings.tlsCert, tlsCert)
        settings.tlsKeyFile = try file.value(Settings.tlsKey, tlsKey)
        if (settings.tlsCertificateFile == nil) != (settings.tlsKeyFile == nil) {
            throw ValidationError("--tls-cert and --tls-key go together: give both or neither")
        }
        if let timeout = try file.value(Settings.tlsHandshakeTimeout, tlsHandshakeTimeout) {
            settings.tlsHandshakeTimeout = UInt64(timeout)
        }
        if let idle = try file.value(Settings.tcpKeepalive, tcpKeepalive) {
            settings.tcpKeepalive = UInt32(idle)
        }
        settings.stateDir = try file.value(Settings.stateDir, stateDir)
        if settings.stateDir?.isEmpty == true { throw ValidationError("--state-dir needs a directory") }
        let allowPatterns = try file.list(Settings.allow, allow)
        let denyPatterns = try file.list(Settings.deny, deny)
        do {
            settings.engine.egressPolicy = try EgressPolicy(allow: allowPatterns, deny: denyPatterns)
        } catch {
            throw ValidationError("\(error.description) (from --allow/--deny or the config keys \"allow\"/\"deny\")")
        }
        if let mode = try file.value(Settings.socketMode, socketMode) {
            guard let bits = UInt16(mode, radix: 8), bits <= 0o777 else {
                throw ValidationError("\(file.source(Settings.socketMode, socketMode)) must be octal permission bits such as 0600; found '\(mode)'")
            }
            settings.unixSocketMode = bits
        }
        settings.requestTTL = try file.value(Settings.requestTTL, requestTTL) ?? settings.requestTTL
        settings.detachTTL = try file.value(Settings.detachTTL, detachTTL) ?? settings.detachTTL
        settings.drainSeconds = try file.value(Settings.drainSeconds, drainSeconds) ?? settings.drainSeconds
        let level = try file.value(Settings.logLevel, logLevel) ?? Settings.logLevel.fallback
        guard let parsedLevel = Logger.Level(rawValue: level) else {
            throw ValidationError("\(file.source(Settings.logLevel, logLevel)) must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")); found '\(level)'")
        }
        let format = try file.value(Settings.logFormat, logFormat) ?? Settings.logFormat.fallback
        guard let logFormat = StderrLogHandler.Format(rawValue: format) else {
            throw ValidationError("\(file.source(Settings.logFormat, logFormat)) must be text or json; found '\(format)'")
        }
        return (settings, parsedLevel, logFormat)
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
}

/// The `--config` file: a JSON object whose keys are the settings table's config keys,
/// each of its type (checked as the file is loaded).
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
            do {
                try Settings.check(o, in: "the config file \(path)")
            } catch {
                throw ValidationError(error.description)
            }
            return ConfigFile(values: o)
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

    /// The "principals" array: `{"name", "tokenSha256"?, "uid"?, "admin"?, "negotiate"?, "limits"?,
    /// "uploadRoot"?, "downloadRoot"?}` each (the roots: docs/guide/files.md). A token is given only as the hex SHA-256 of its bytes, so the file holds
    /// nothing that opens the server.
    func principals(defaults: PrincipalLimits) throws -> [PrincipalConfig] {
        guard let value = values["principals"] else { return [] }
        guard let items = value.arrayValue else { throw ValidationError("the config key 'principals' must be an array of objects") }
        return try items.enumerated().map { index, item in
            let what = "principals[\(index)]"
            guard case .object(let o) = item else { throw ValidationError("\(what) must be an object") }
            var entry = ConfigFile(values: o)
            try entry.rejectUnknownKeys(["name", "tokenSha256", "uid", "admin", "negotiate", "limits", "uploadRoot", "downloadRoot"],
                                        in: what)
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
            var principal = PrincipalConfig(name: name, tokenHash: hash, uid: uid, isAdmin: admin,
                                            mayNegotiate: try entry.bool("negotiate"), limits: limits)
            for key in ["uploadRoot", "downloadRoot"] where o[key] != nil && entry.string(key) == nil {
                throw ValidationError("\(entry.keyName(key)) must be a directory path")
            }
            principal.uploadRoot = entry.string("uploadRoot")
            principal.downloadRoot = entry.string("downloadRoot")
            return principal
        }
    }
    /// The flag's value, else the file's (already of its type), checked against the
    /// setting's bounds; nil when neither gives one.
    func value<V>(_ setting: Setting<V>, _ flag: V?) throws -> V? {
        do {
            return try setting.resolve(flag: flag, file: values)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// Where a setting's value came from, to name it in a refusal: its flag when the
    /// command line gave one, else its config key.
    func source<V>(_ setting: Setting<V>, _ flag: V?) -> String {
        if flag != nil || setting.key == nil { return "--\(setting.flag ?? "")" }
        return "the config key '\(setting.key ?? "")'"
    }

    /// A repeatable flag's values, else the file's list of the same key (the flags
    /// replace it, they do not add to it).
    func list(_ setting: Setting<[String]>, _ flag: [String]) throws -> [String] {
        try value(setting, flag.isEmpty ? nil : flag) ?? []
    }
}

extension Setting {
    /// The option's name on the command line, from the table.
    var name: NameSpecification { .customLong(flag ?? "") }
    /// The option's `--help` text, from the table.
    var argumentHelp: ArgumentHelp { ArgumentHelp(help, valueName: valueName) }
}
