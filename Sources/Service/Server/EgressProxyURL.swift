import Foundation
import HTTPEngine
import JSONRPC

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
