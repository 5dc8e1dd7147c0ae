import Foundation

/// Where an xhrpcd listens, and how to reach it.
public enum Endpoint: Sendable, Equatable {
    /// A Unix-domain socket; nil is the server's default path (`defaultSocketPath`).
    case unix(path: String?)
    /// Plain TCP; with a `token`, `auth` is called before `connect` returns.
    case tcp(host: String, port: Int, token: String?)
    /// TCP with TLS: the server's certificate is verified against `caFile` (nil: the
    /// system's CAs) and the host name (`serverName`, default `host`).
    case tls(host: String, port: Int, caFile: String?, serverName: String?, token: String?)

    /// The server's default socket, by the same rule as xhrpcd's: `$XDG_RUNTIME_DIR/xhrpc.sock`
    /// when that variable is set and not empty, else `/tmp/xhrpc-<uid>.sock`.
    public static var defaultSocketPath: String {
        if let dir = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], !dir.isEmpty {
            return dir + "/xhrpc.sock"
        }
        return "/tmp/xhrpc-\(getuid()).sock"
    }

    /// Reads `unix:PATH`, `tcp:HOST:PORT` or `tls:HOST:PORT` (an IPv6 host in brackets),
    /// the spelling of xhrpcd's `--listen`; nil when it is none of them.
    public static func parse(_ text: String, token: String? = nil, caFile: String? = nil) -> Endpoint? {
        if text.hasPrefix("unix:") { return .unix(path: String(text.dropFirst(5))) }
        let isTLS = text.hasPrefix("tls:")
        guard isTLS || text.hasPrefix("tcp:") else { return nil }
        let rest = text.dropFirst(4)
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (1...65535).contains(port) else { return nil }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        return isTLS ? .tls(host: host, port: port, caFile: caFile, serverName: nil, token: token)
            : .tcp(host: host, port: port, token: token)
    }

    var token: String? {
        switch self {
        case .unix: return nil
        case .tcp(_, _, let token), .tls(_, _, _, _, let token): return token
        }
    }
}
