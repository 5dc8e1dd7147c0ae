import CCurl

/// Where a URL sends a request: its scheme, host and effective port, as libcurl reads
/// them. The egress policy's host check (`EgressPolicy.checkDestination`) runs on this,
/// so it must be libcurl's reading and not a look-alike: a host that libcurl and the
/// policy read differently would be a way around the policy.
///
/// Two ways produce it. `TransferEngine.plainHTTPTarget` recognises the common URLs in
/// one pass; for those libcurl's reading is the URL's own bytes (an IPv4 literal in a
/// loose spelling such as `0x7f.1` is kept as written: `EgressPolicy` reads every
/// spelling `inet_aton` accepts, so it denotes the same address). Everything else goes
/// through `curl_url`, libcurl's own parser, which normalises what libcurl would
/// normalise before connecting: percent-encoded hosts are decoded, IPv4 literals
/// rewritten in dotted decimal, IPv6 literals compressed and their zone dropped, and
/// international names converted to the ASCII (`xn--`) form libcurl resolves
/// (`CURLU_PUNYCODE`).
public struct URLTarget: Sendable, Equatable, CustomStringConvertible {
    /// `http` or `https` for a URL the engine accepts, lower case; a redirect's target
    /// may carry any other scheme, which is how it gets refused (and then perhaps no
    /// host: `host` is empty).
    public let scheme: String
    /// The host as libcurl reads it: a name, an IPv4 literal, or an IPv6 literal in
    /// brackets.
    public let host: String
    /// The port given in the URL, else the scheme's default (80, 443).
    public let port: Int
    /// The address `host` denotes when it is an IP literal (`IPAddress.parseLiteral`),
    /// nil for a name. Read once here, so that the egress checks on this target
    /// (`EgressPolicy.checkDestination`) do not read the host again.
    public let literal: IPAddress?

    /// A target from parts already read.
    public init(scheme: String, host: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.literal = IPAddress.parseLiteral(host)
    }

    /// `scheme://host:port`, what messages show.
    public var description: String { "\(scheme)://\(host):\(port)" }

    /// Reads an absolute URL with libcurl's parser. The flags are those libcurl 7.88
    /// uses for `CURLOPT_URL` (`CURLU_NON_SUPPORT_SCHEME` so another scheme is reported
    /// by name instead of as a parse error). Throws `CURLE_URL_MALFORMAT` with
    /// libcurl's reason.
    public static func parse(url: String) throws -> URLTarget {
        let u = try makeHandle()
        defer { curl_url_cleanup(u) }
        let rc = curl_url_set(u, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME))
        guard rc == CURLUE_OK else {
            throw TransferFailure(CURLE_URL_MALFORMAT, "Malformed URL: \(String(cString: curl_url_strerror(rc)))")
        }
        return try read(u)
    }

    /// Where a redirect leads: `location` (the `Location` header, absolute or
    /// relative) resolved against `base` (the URL of the response that carried it), the
    /// way libcurl 7.88's `Curl_follow` resolves it before following: `curl_url_set` on
    /// a handle holding the current URL, with `CURLU_URLENCODE` and
    /// `CURLU_ALLOW_SPACE` as it uses for a real redirect. Any scheme is read
    /// (`CURLU_NON_SUPPORT_SCHEME`), so the caller can refuse `ftp:` or `file:` by name.
    /// Throws when either cannot be parsed; the caller then refuses the hop, since a
    /// target it cannot read is a target it cannot check. Returns the absolute URL the
    /// next hop is sent to, and its target.
    static func resolve(location: String, against base: String) throws -> (url: String, target: URLTarget) {
        let u = try makeHandle()
        defer { curl_url_cleanup(u) }
        var rc = curl_url_set(u, CURLUPART_URL, base, UInt32(CURLU_NON_SUPPORT_SCHEME))
        if rc == CURLUE_OK {
            let flags = CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE | CURLU_ALLOW_SPACE
            rc = curl_url_set(u, CURLUPART_URL, location, UInt32(flags))
        }
        guard rc == CURLUE_OK else {
            throw TransferFailure(CURLE_URL_MALFORMAT, "Malformed redirect URL: \(String(cString: curl_url_strerror(rc)))")
        }
        guard let url = part(u, CURLUPART_URL, 0) else {
            throw TransferFailure(CURLE_URL_MALFORMAT, "Malformed redirect URL: it has no absolute form")
        }
        return (url, try read(u))
    }

    /// Whether the host is an IPv4 literal spelt other than in dotted decimal: a loose
    /// form (`0x7f.1`, `127.1`) or one with a trailing dot (`127.0.0.1.`). The policy
    /// judges such a host as the address it names (`IPAddress.parseLiteral`), but
    /// libcurl hands the spelling to the system resolver, which reads the loose forms
    /// as `inet_aton` does and takes `127.0.0.1.` for a name to look up (DNS: it fails,
    /// or finds some other address).
    var isLooselySpeltIPv4: Bool {
        guard case .v4? = literal else { return false }
        return host != literal?.description
    }

    /// `url` with its host written as the address the policy judged, in dotted decimal,
    /// when it is a loosely spelt IPv4 literal (`isLooselySpeltIPv4`), so that the
    /// address connected to is the address judged, as the WHATWG URL parser writes such
    /// a host (`http://127.0.0.1./` is `http://127.0.0.1/`); nil when the URL is fine as
    /// it is. Throws when libcurl cannot rewrite it.
    public static func addressingIPv4Literally(_ url: String, _ target: URLTarget) throws -> (url: String, target: URLTarget)? {
        guard target.isLooselySpeltIPv4, let address = target.literal else { return nil }
        let u = try makeHandle()
        defer { curl_url_cleanup(u) }
        guard curl_url_set(u, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK,
              curl_url_set(u, CURLUPART_HOST, address.description, 0) == CURLUE_OK,
              let rewritten = part(u, CURLUPART_URL, 0)
        else {
            throw TransferFailure(CURLE_URL_MALFORMAT, "Malformed URL: its host \(target.host) cannot be written as \(address)")
        }
        return (rewritten, try read(u))
    }

    /// `url` as it goes on the wire: every byte of 0x80 and above after the authority
    /// (path, query, fragment) percent-encoded as `%XX`. A request target is ASCII (RFC
    /// 9112 §3.2, RFC 3986 §2): libcurl 7.88 encodes such bytes in the path but sends
    /// the query's raw, which strict parsers refuse (h11, llhttp: 400) and lenient ones
    /// read as they please — one request meaning different things to different servers.
    /// The host is left alone: libcurl converts an international name to its `xn--`
    /// form itself. An ASCII URL is returned as it is.
    public static func wireForm(of url: String) -> String {
        guard url.utf8.contains(where: { $0 >= 0x80 }) else { return url }
        let b = Array(url.utf8)
        let slash = UInt8(ascii: "/"), colon = UInt8(ascii: ":")
        // The authority ends at the first '/', '?' or '#' after the "://".
        var start = 0
        if let sep = b.indices.dropLast(2).first(where: { b[$0] == colon && b[$0 + 1] == slash && b[$0 + 2] == slash }) {
            start = b[(sep + 3)...].firstIndex { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? b.endIndex
        }
        let hex = Array("0123456789ABCDEF".utf8)
        var out = Array(b[..<start])
        out.reserveCapacity(b.count + 16)
        for c in b[start...] {
            if c < 0x80 {
                out.append(c)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(c >> 4)], hex[Int(c & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func makeHandle() throws -> OpaquePointer {
        guard let u = curl_url() else { throw TransferFailure(CURLE_OUT_OF_MEMORY, "curl_url failed: out of memory") }
        return u
    }

    private static func read(_ u: OpaquePointer) throws -> URLTarget {
        guard let scheme = part(u, CURLUPART_SCHEME, 0) else {
            throw TransferFailure(CURLE_URL_MALFORMAT, "Malformed URL: no scheme")
        }
        // A host libcurl cannot convert to ASCII fails with PUNYCODE; the plain host is
        // then what libcurl would try to resolve, and what the policy can compare. No
        // host at all (`file:///x`) is an empty one: the scheme is refused first.
        let host = part(u, CURLUPART_HOST, UInt32(CURLU_PUNYCODE)) ?? part(u, CURLUPART_HOST, 0) ?? ""
        let port = part(u, CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT)).flatMap { Int($0) } ?? 0
        return URLTarget(scheme: scheme.lowercased(), host: host, port: port)
    }

    /// One part of the URL, or nil when libcurl cannot give it. The string libcurl hands
    /// back is freed whatever the result: libcurl 7.88 fills it in and then fails for a
    /// host it cannot convert with `CURLU_PUNYCODE` (a name that is not valid IDNA, or
    /// any non-ASCII name in a process whose locale is not UTF-8), and freeing it only
    /// on success leaked it (found by the fuzzer).
    private static func part(_ u: OpaquePointer, _ which: CURLUPart, _ flags: UInt32) -> String? {
        var p: UnsafeMutablePointer<CChar>? = nil
        let rc = curl_url_get(u, which, &p, flags)
        defer { curl_free(p) }
        guard rc == CURLUE_OK, let p else { return nil }
        return String(cString: p)
    }
}
