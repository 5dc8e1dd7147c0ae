/// What a URL may show wherever it is shown (`list`, logs, status texts such as a
/// refused redirect's): never the `user:password@` of its authority, and never the
/// values of query parameters whose names say they are secret.
public enum URLRedaction {
    /// The names (compared without case) whose values are hidden by default: tokens,
    /// keys, secrets, passwords and signatures as APIs commonly name them.
    public static let defaultSecretQueryNames: Set<String> = [
        "token", "access_token", "key", "api_key", "apikey", "secret", "password", "sig", "signature",
    ]

    /// What a hidden value is replaced with.
    public static let placeholder = "REDACTED"

    /// The URL without its userinfo (everything between `://` and the last `@` of the
    /// authority, which ends at the first `/`, `?` or `#`), and with the value of every
    /// query parameter named in `secretNames` (lower case) replaced by `REDACTED`. The
    /// rest, fragment included, is kept byte for byte.
    public static func redact(_ url: String, secretNames: Set<String> = defaultSecretQueryNames) -> String {
        // Without an "@" there is no userinfo, without a "?" no query: nothing to hide,
        // and the URL is the answer as it is (nearly every URL; the access log redacts
        // each request's).
        var scanned = url
        if !scanned.withUTF8({ $0.contains { $0 == 0x40 || $0 == 0x3F } }) { return url }  // "@", "?"
        let u = Array(url.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        var i = 0
        while i + 2 < u.count, !(u[i] == 0x3A && u[i + 1] == 0x2F && u[i + 2] == 0x2F) { i += 1 }  // "://"
        var rest = 0
        if i + 2 < u.count {
            let authorityStart = i + 3
            var at: Int?
            var j = authorityStart
            while j < u.count, u[j] != 0x2F, u[j] != 0x3F, u[j] != 0x23 {  // "/", "?", "#"
                if u[j] == 0x40 { at = j }  // "@"
                j += 1
            }
            out += u[..<authorityStart]
            rest = (at ?? (authorityStart - 1)) + 1
        }
        // Up to the query: as it is.
        var q = rest
        while q < u.count, u[q] != 0x3F, u[q] != 0x23 { q += 1 }
        out += u[rest..<q]
        guard q < u.count, u[q] == 0x3F else {
            out += u[q...]
            return String(decoding: out, as: UTF8.self)
        }
        out.append(0x3F)
        var end = q + 1
        while end < u.count, u[end] != 0x23 { end += 1 }
        var first = true
        for pair in u[(q + 1)..<end].split(separator: 0x26, omittingEmptySubsequences: false) {  // "&"
            if !first { out.append(0x26) }
            first = false
            guard let eq = pair.firstIndex(of: 0x3D) else {  // "="
                out += pair
                continue
            }
            let name = String(decoding: pair[..<eq], as: UTF8.self).lowercased()
            out += pair[...eq]
            if secretNames.contains(name) || secretNames.contains(name.removingPercentEncodingLossy) {
                out += Array(placeholder.utf8)
            } else {
                out += pair[(eq + 1)...]
            }
        }
        out += u[end...]
        return String(decoding: out, as: UTF8.self)
    }
}

extension String {
    /// `%XX` sequences decoded where they form UTF-8, others left as they are: a name
    /// spelled `t%6Fken` is still `token`.
    fileprivate var removingPercentEncodingLossy: String {
        let u = Array(utf8)
        var out: [UInt8] = []
        var i = 0
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        while i < u.count {
            if u[i] == 0x25, i + 2 < u.count, let h = hex(u[i + 1]), let l = hex(u[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self).lowercased()
    }
}
