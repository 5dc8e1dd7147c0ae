import HTTPEngine

/// One challenge of a `WWW-Authenticate` or `Proxy-Authenticate` field (RFC 9110 §11.6.1,
/// §11.7.1): a scheme and its parameters, of which only `realm` matters here.
///
/// The grammar (RFC 9110 §11.2, §5.6): a field is a comma-separated list of challenges,
/// and a challenge's parameters are separated by the same commas —
///
///     challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
///     auth-param = token BWS "=" BWS ( token / quoted-string )
///
/// so an element is a parameter of the challenge before it when it reads `name=value`,
/// and a new challenge otherwise. Several challenges may share one field, and a
/// response may carry several fields; all of them count, in order.
struct AuthChallenge: Equatable {
    /// The scheme as sent, compared without regard to case.
    var scheme: String
    /// The `realm` parameter (unquoted), nil when absent (NTLM and Negotiate have none).
    var realm: String?

    /// The scheme as libcurl knows it; nil for one it does not speak (Bearer, …).
    var known: AuthScheme? {
        switch scheme.lowercased() {
        case "basic": .basic
        case "digest": .digest
        case "ntlm": .ntlm
        case "negotiate": .negotiate
        default: nil
        }
    }

    /// The challenges of every field named `fieldName` (any case) in `headers`.
    static func parse(_ headers: [(name: String, value: String)], fieldName: String) -> [AuthChallenge] {
        let wanted = fieldName.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.flatMap { parse(field: $0.value) }
    }

    /// The challenges of one field value. Malformed pieces are skipped up to the next
    /// comma; what can be read is kept.
    static func parse(field: String) -> [AuthChallenge] {
        var p = Reader(Array(field.utf8))
        var out: [AuthChallenge] = []
        while true {
            p.skip { $0 == UInt8(ascii: ",") || isWhitespace($0) }
            guard !p.atEnd else { break }
            let name = p.token()
            guard !name.isEmpty else {
                p.skipElement()
                continue
            }
            let afterName = p.index
            p.skip(isWhitespace)
            if p.peek == UInt8(ascii: "="), !out.isEmpty {
                // `name=value`: a parameter of the current challenge.
                p.advance()
                p.skip(isWhitespace)
                guard let value = p.tokenOrQuoted() else {
                    p.skipElement()
                    continue
                }
                if name.lowercased() == "realm", out[out.count - 1].realm == nil { out[out.count - 1].realm = value }
                continue
            }
            // A new challenge; after its scheme, a token68 or the first parameter.
            p.index = afterName
            out.append(AuthChallenge(scheme: name, realm: nil))
            guard p.peek == UInt8(ascii: " ") else { continue }
            p.skip(isWhitespace)
            let start = p.index
            let first = p.token()
            p.skip(isWhitespace)
            if !first.isEmpty, p.peek == UInt8(ascii: "="), !p.isToken68End(after: p.index) {
                p.advance()
                p.skip(isWhitespace)
                guard let value = p.tokenOrQuoted() else {
                    p.skipElement()
                    continue
                }
                if first.lowercased() == "realm" { out[out.count - 1].realm = value }
            } else {
                // token68 (for instance a Negotiate or NTLM blob): no realm in it.
                p.index = start
                p.skipElement()
            }
        }
        return out
    }

    static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }

    /// A cursor over a field value's bytes.
    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[index] }
        mutating func advance() { index += 1 }

        mutating func skip(_ what: (UInt8) -> Bool) {
            while let b = peek, what(b) { index += 1 }
        }

        mutating func token() -> String {
            let start = index
            skip(HTTPToken.isTokenByte)
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        /// Whether the `=` at `at` is the padding of a token68 (followed only by more
        /// `=`, white space, then a comma or the end) rather than a parameter's `=`.
        func isToken68End(after at: Int) -> Bool {
            var i = at
            while i < bytes.count, bytes[i] == UInt8(ascii: "=") { i += 1 }
            while i < bytes.count, AuthChallenge.isWhitespace(bytes[i]) { i += 1 }
            return i == bytes.count || bytes[i] == UInt8(ascii: ",")
        }

        /// A token or a quoted-string (its escapes undone); nil when neither is here.
        mutating func tokenOrQuoted() -> String? {
            guard peek == UInt8(ascii: "\"") else {
                let t = token()
                return t.isEmpty ? nil : t
            }
            advance()
            var out: [UInt8] = []
            while let b = peek {
                advance()
                if b == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
                if b == UInt8(ascii: "\\") {
                    guard let escaped = peek else { return nil }
                    advance()
                    out.append(escaped)
                } else {
                    out.append(b)
                }
            }
            return nil  // no closing quote
        }

        /// Skips to the next comma outside a quoted string.
        mutating func skipElement() {
            var quoted = false
            while let b = peek {
                if quoted {
                    if b == UInt8(ascii: "\\") { advance() } else if b == UInt8(ascii: "\"") { quoted = false }
                } else if b == UInt8(ascii: "\"") {
                    quoted = true
                } else if b == UInt8(ascii: ",") {
                    return
                }
                advance()
            }
        }
    }
}
