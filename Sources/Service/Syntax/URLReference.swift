import JSON
import JSONRPC

/// `fetch`'s `baseURL` and `query`: a URL reference resolved against a base, and
/// query parameters appended to a URL. Pure string work, tested without sockets.
enum URLReference {
    /// The components of RFC 3986 Appendix B's split; nil when absent (which differs
    /// from empty: `?` alone is an empty query).
    struct Parts {
        var scheme: String?
        var authority: String?
        var path: String
        var query: String?
        var fragment: String?

        init(_ s: String) {
            var rest = Substring(s)
            if let hash = rest.firstIndex(of: "#") {
                fragment = String(rest[rest.index(after: hash)...])
                rest = rest[..<hash]
            }
            if let q = rest.firstIndex(of: "?") {
                query = String(rest[rest.index(after: q)...])
                rest = rest[..<q]
            }
            // A scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) before the first ':'
            // that comes before any '/'.
            if let colon = rest.firstIndex(of: ":"), !rest[..<colon].contains("/"),
               let first = rest.first, first.isASCII, first.isLetter,
               rest[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) {
                scheme = rest[..<colon].lowercased()
                rest = rest[rest.index(after: colon)...]
            }
            if rest.hasPrefix("//") {
                rest = rest.dropFirst(2)
                let end = rest.firstIndex(of: "/") ?? rest.endIndex
                authority = String(rest[..<end])
                rest = rest[end...]
            }
            path = String(rest)
        }

        var text: String {
            var s = ""
            if let scheme { s += scheme + ":" }
            if let authority { s += "//" + authority }
            s += path
            if let query { s += "?" + query }
            if let fragment { s += "#" + fragment }
            return s
        }
    }

    /// RFC 3986 §5.2.2 (strict: a reference with a scheme is absolute and the base is
    /// ignored), which is what the WHATWG URL standard does for http and https URLs
    /// apart from its repairs of malformed input (backslashes as slashes, `http:x`
    /// taken as relative), which are not made here.
    static func resolve(_ reference: String, against base: String) -> String {
        let r = Parts(reference)
        if r.scheme != nil {
            var t = r
            t.path = removeDotSegments(r.path)
            return t.text
        }
        let b = Parts(base)
        var t = r
        t.scheme = b.scheme
        if r.authority != nil {
            t.path = removeDotSegments(r.path)
        } else {
            t.authority = b.authority
            if r.path.isEmpty {
                t.path = b.path
                t.query = r.query ?? b.query
            } else if r.path.hasPrefix("/") {
                t.path = removeDotSegments(r.path)
            } else {
                t.path = removeDotSegments(merge(base: b, r.path))
            }
        }
        return t.text
    }

    /// §5.2.3.
    private static func merge(base b: Parts, _ path: String) -> String {
        if b.authority != nil && b.path.isEmpty { return "/" + path }
        guard let slash = b.path.lastIndex(of: "/") else { return path }
        return String(b.path[...slash]) + path
    }

    /// §5.2.4, segment by segment.
    static func removeDotSegments(_ path: String) -> String {
        var input = Substring(path)
        var output: [Substring] = []  // each starts with "/" unless it is the first of a relative path
        while !input.isEmpty {
            if input.hasPrefix("../") { input = input.dropFirst(3) }
            else if input.hasPrefix("./") { input = input.dropFirst(2) }
            else if input.hasPrefix("/./") { input = input.dropFirst(2) }
            else if input == "/." { input = "/" }
            else if input.hasPrefix("/../") {
                input = input.dropFirst(3)
                if !output.isEmpty { output.removeLast() }
            } else if input == "/.." {
                input = "/"
                if !output.isEmpty { output.removeLast() }
            } else if input == "." || input == ".." {
                input = ""
            } else {
                let start = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[start...].firstIndex(of: "/") ?? input.endIndex
                output.append(input[..<end])
                input = input[end...]
            }
        }
        return output.joined()
    }

    /// `url` with `query` appended: each name with each of its values (a value or an
    /// array of them; strings, numbers and booleans, a number as its JSON text), in
    /// the order given, encoded as application/x-www-form-urlencoded (`FormEncoding`:
    /// space as `+`, every byte but `A-Z a-z 0-9 * - . _` as `%XX` of the UTF-8), after
    /// the URL's own query and before its fragment.
    static func appendingQuery(_ query: JSONObject, to url: String) throws(RPCError) -> String {
        var pairs: [(key: String, value: String)] = []
        for m in query.members {
            for v in m.value.arrayValue ?? [m.value] {
                switch v {
                case .string(let s): pairs.append((m.key, s))
                case .bool(let b): pairs.append((m.key, b ? "true" : "false"))
                case .int, .bigInteger, .double: pairs.append((m.key, JSON.encodeString(v)))
                default:
                    throw .invalidParams("'query' values must be strings, numbers, booleans or arrays of them ('\(m.key)')")
                }
            }
        }
        guard !pairs.isEmpty else { return url }
        let encoded = FormEncoding.encode(pairs)
        var head = Substring(url)
        var fragment: Substring = ""
        if let hash = head.firstIndex(of: "#") {
            fragment = head[hash...]
            head = head[..<hash]
        }
        let joiner = !head.contains("?") ? "?" : (head.hasSuffix("?") || head.hasSuffix("&") ? "" : "&")
        return head + joiner + encoded + fragment
    }
}
