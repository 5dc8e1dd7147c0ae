import HTTPEngine
import JSON
import JSONRPC

/// The checks on what clients hand us for the HTTP request, every place caller bytes
/// reach the wire: methods are RFC 9110 tokens and not CONNECT, TRACE or TRACK; header
/// names are tokens and not the ones that frame the message or manage the connection;
/// header values and credentials carry no CR, LF or NUL (no header injection); URLs are
/// absolute http or https URLs with a host and no control characters or spaces.
enum HTTPSyntax {
    static func isFieldValue(_ s: String) -> Bool {
        !s.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
    }

    /// A header a caller may send: a token name that is not one of the engine's own
    /// (`TransferRequest.reservedHeaderNames`: `Content-Length`, `Transfer-Encoding`,
    /// `Host`, `Connection`…, any case), and a value without CR, LF or NUL. Every way a
    /// caller supplies headers goes through here (`HTTPRequest.setRequestHeader`).
    static func checkHeader(_ name: String, _ value: String) throws(RPCError) {
        guard HTTPToken.isToken(name) else {
            throw .invalidParams("'\(name)' is not a header name (letters, digits and !#$%&'*+-.^_`|~)")
        }
        guard !TransferRequest.isReservedHeader(name) else {
            throw .invalidParams("'\(name)' is set by the service itself (message framing and connection headers cannot be set)",
                                 reason: .forbiddenHeader, ["header": .string(name)])
        }
        guard isFieldValue(value) else { throw .invalidParams("the value of '\(name)' must not contain CR, LF or NUL") }
    }

    /// Methods that are not requests for a resource: CONNECT asks for a tunnel, TRACE
    /// and TRACK echo the request back (credentials included). Refused as the Fetch
    /// standard refuses them.
    static let forbiddenMethods: Set<String> = ["CONNECT", "TRACE", "TRACK"]

    /// A user name or password: sent in headers that libcurl builds (Digest quotes the
    /// user name without escaping line breaks), so no CR, LF or NUL.
    static func checkCredential(_ value: String?, name: String) throws(RPCError) {
        guard let value else { return }
        guard isFieldValue(value) else { throw .invalidParams("'\(name)' must not contain CR, LF or NUL") }
    }

    /// Longer than any method in use (the longest registered one has 17 letters).
    static let maxMethodBytes = 64

    /// A client's HTTP method, checked (a token of at most `maxMethodBytes`) and, as
    /// XMLHttpRequest does, the standard methods in upper case, others as given.
    static func method(_ m: String) throws(RPCError) -> String {
        guard HTTPToken.isToken(m), m.utf8.count <= maxMethodBytes else {
            throw .invalidParams("'method' must be an HTTP method token of at most \(maxMethodBytes) bytes, such as GET")
        }
        let upper = m.uppercased()
        guard !forbiddenMethods.contains(upper) else {
            throw .invalidParams("the method \(upper) is not allowed", reason: .forbiddenMethod, ["method": .string(m)])
        }
        return ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"].contains(upper) ? upper : m
    }

    /// The `host` parameter of a proxy or a protection space: a host name or an IP
    /// address (IPv6 with or without brackets), returned without brackets.
    static func host(_ p: Params) throws(RPCError) -> String {
        var host = try p.string("host")
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, host.utf8.count <= 253,
              host.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && !"/?#@[]\\".unicodeScalars.contains($0) })
        else {
            throw RPCError.invalidParams("'host' must be a host name or an IP address (IPv6 with or without brackets), without spaces, '/', '@' or '?'")
        }
        return host
    }

    /// A cheap shape check at `open`: an absolute http(s) URL with a host and, if given,
    /// a numeric port. libcurl parses the URL fully when the request is sent.
    static func checkURL(_ url: String) throws(RPCError) {
        // Bytes, not Characters: the delimiters are ASCII, and walking a String by
        // grapheme cluster cost more than the rest of a `fetch` call's checks together.
        // One pass over the string's own bytes for the forbidden ones, no copy.
        var url = url  // `withUTF8` wants it mutable; a native string's bytes stay where they are
        if let problem = url.withUTF8(urlProblem) { throw problem }
    }

    /// What `checkURL` finds wrong with the URL of bytes `b`, or nil.
    private static func urlProblem(_ b: UnsafeBufferPointer<UInt8>) -> RPCError? {
        guard b.count <= 8192 else { return .invalidParams("'url' is longer than 8192 bytes") }
        // Controls (C0 and DEL) and spaces: libcurl refuses them anyway when the request
        // is sent ("Malformed URL"), which is too late for a clear answer.
        guard !b.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return .invalidParams("'url' must not contain spaces or control characters (CR, LF, TAB, NUL, …)")
        }
        let slash = UInt8(ascii: "/"), colon = UInt8(ascii: ":")
        guard let sep = b.indices.dropLast(2).first(where: { b[$0] == colon && b[$0 + 1] == slash && b[$0 + 2] == slash }) else {
            return .invalidParams("'url' must be an absolute http or https URL")
        }
        // Compared without case as bytes: no other characters lower-case to these.
        let scheme = b[..<sep]
        guard equalsIgnoringASCIICase(scheme, "http") || equalsIgnoringASCIICase(scheme, "https") else {
            return .invalidParams("'url' uses the scheme '\(String(decoding: scheme, as: UTF8.self).lowercased())'; only http and https are spoken")
        }
        let rest = b[(sep + 3)...]
        var authority = rest[..<(rest.firstIndex { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex)]
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        var host = authority
        var port = authority[authority.endIndex...]
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return .invalidParams("'url' has an unclosed [ in its host") }
            host = authority[...close]
            port = authority[(close + 1)...]
        } else if let c = authority.lastIndex(of: colon) {
            host = authority[..<c]
            port = authority[c...]
        }
        guard !host.isEmpty, !host.elementsEqual("[]".utf8) else { return .invalidParams("'url' has no host") }
        if !port.isEmpty {
            let digits = port.dropFirst()
            guard port.first == colon, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), digits.count <= 5 else {
                return .invalidParams("'url' has a port that is not a number")
            }
        }
        return nil
    }

    /// Whether `bytes` spell `lower` (lower-case ASCII letters) in any case.
    private static func equalsIgnoringASCIICase(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ lower: StaticString) -> Bool {
        bytes.count == lower.utf8CodeUnitCount
            && zip(bytes, UnsafeBufferPointer(start: lower.utf8Start, count: lower.utf8CodeUnitCount)).allSatisfy { $0 | 0x20 == $1 }
    }
}
