import Foundation
import JSONRPC

/// The syntax checks on what clients hand us for the HTTP request: methods and header
/// names are RFC 9110 tokens, header values carry no CR, LF or NUL (no header
/// injection), and URLs are absolute http or https URLs with a host.
enum HTTPSyntax {
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { b in
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "A")...UInt8(ascii: "Z"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(b)
            }
        }
    }

    static func isFieldValue(_ s: String) -> Bool {
        !s.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
    }

    /// As XMLHttpRequest does: the standard methods in upper case, others as given.
    static func normalizeMethod(_ m: String) -> String {
        let upper = m.uppercased()
        return ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"].contains(upper) ? upper : m
    }

    static func checkURL(_ url: String) throws(RPCError) {
        guard url.utf8.count <= 8192 else { throw .invalidParams("'url' is longer than 8192 bytes") }
        guard isFieldValue(url), !url.contains(" ") else { throw .invalidParams("'url' must not contain spaces, CR, LF or NUL") }
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased() else {
            throw .invalidParams("'url' must be an absolute http or https URL")
        }
        guard scheme == "http" || scheme == "https" else {
            throw .invalidParams("'url' uses the scheme '\(scheme)'; only http and https are spoken")
        }
        guard let host = c.host, !host.isEmpty else { throw .invalidParams("'url' has no host") }
    }
}
