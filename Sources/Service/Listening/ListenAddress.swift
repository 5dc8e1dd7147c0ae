import Foundation
import HTTPEngine
import JSONRPC

/// Where the server listens: `unix:PATH`, `tcp:HOST:PORT`, `tls:HOST:PORT` (TCP with
/// TLS, which needs a certificate and key), `ws:HOST:PORT` (WebSocket, one JSON-RPC
/// message per text frame) or `wss:HOST:PORT` (WebSocket over TLS); an IPv6 host in
/// brackets.
public enum ListenAddress: Equatable, Sendable, CustomStringConvertible {
    case unix(path: String)
    case tcp(host: String, port: Int)
    case tls(host: String, port: Int)
    case ws(host: String, port: Int)
    case wss(host: String, port: Int)

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
        if text.hasPrefix("ws:") {
            let (host, port) = try hostAndPort(text, scheme: "ws")
            return .ws(host: host, port: port)
        }
        if text.hasPrefix("wss:") {
            let (host, port) = try hostAndPort(text, scheme: "wss")
            return .wss(host: host, port: port)
        }
        throw ParseError(description: "'\(text)': a listen address is unix:PATH, tcp:HOST:PORT, tls:HOST:PORT, ws:HOST:PORT or wss:HOST:PORT")
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
        case .ws(let host, let port): "ws:" + Self.hostPort(host, port)
        case .wss(let host, let port): "wss:" + Self.hostPort(host, port)
        }
    }

    /// Whether a listener at this address speaks TLS (and needs the certificate).
    public var usesTLS: Bool {
        switch self {
        case .tls, .wss: true
        case .unix, .tcp, .ws: false
        }
    }

    /// Whether a listener at this address speaks WebSocket.
    public var isWebSocket: Bool {
        switch self {
        case .ws, .wss: true
        case .unix, .tcp, .tls: false
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
