/// One cookie as libcurl's cookie engine keeps it, in the fields of the Netscape cookie
/// file format — the format libcurl reads (`CURLOPT_COOKIELIST`, `CURLOPT_COOKIEFILE`)
/// and writes (`CURLINFO_COOKIELIST`, `CURLOPT_COOKIEJAR`), so a cookie travels between
/// a jar, the store on disk and `curl -b` without translation.
///
/// A line is seven fields separated by tabs: domain (prefixed `#HttpOnly_` for an
/// HttpOnly cookie), whether subdomains match (`TRUE`/`FALSE`), path, whether only
/// secure connections may carry it (`TRUE`/`FALSE`), expiry in seconds since the epoch
/// (0: a session cookie, which ends with the process), name, value.
public struct Cookie: Equatable, Sendable {
    public var domain: String
    public var includeSubdomains: Bool
    public var path: String
    public var secure: Bool
    public var httpOnly: Bool
    /// Seconds since 1970; 0 for a session cookie.
    public var expires: Int64
    public var name: String
    public var value: String

    public init(domain: String, includeSubdomains: Bool = false, path: String = "/", secure: Bool = false,
                httpOnly: Bool = false, expires: Int64 = 0, name: String, value: String) {
        self.domain = domain
        self.includeSubdomains = includeSubdomains
        self.path = path
        self.secure = secure
        self.httpOnly = httpOnly
        self.expires = expires
        self.name = name
        self.value = value
    }

    static let httpOnlyPrefix = "#HttpOnly_"

    /// Parses one line of the Netscape format; nil for anything else (a comment, a blank
    /// line, a line with the wrong number of fields or a bad flag or expiry). Lines with
    /// CR, LF or NUL are refused too: libcurl would cut them, and a cookie value must
    /// never smuggle a header line.
    public init?(netscapeLine line: Substring) {
        var text = line
        var httpOnly = false
        if text.hasPrefix(Cookie.httpOnlyPrefix) {
            httpOnly = true
            text = text.dropFirst(Cookie.httpOnlyPrefix.count)
        } else if text.hasPrefix("#") {
            return nil
        }
        guard !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { return nil }
        let f = text.split(separator: "\t", omittingEmptySubsequences: false)
        guard f.count == 7, !f[0].isEmpty, !f[2].isEmpty, !f[5].isEmpty,
              let sub = Cookie.flag(f[1]), let secure = Cookie.flag(f[3]), let expires = Int64(f[4]), expires >= 0
        else { return nil }
        self.init(domain: String(f[0]), includeSubdomains: sub, path: String(f[2]), secure: secure, httpOnly: httpOnly,
                  expires: expires, name: String(f[5]), value: String(f[6]))
    }

    private static func flag(_ s: Substring) -> Bool? {
        switch s {
        case "TRUE": return true
        case "FALSE": return false
        default: return nil
        }
    }

    /// The line libcurl reads back as this cookie.
    public var netscapeLine: String {
        (httpOnly ? Cookie.httpOnlyPrefix : "") + [
            domain, includeSubdomains ? "TRUE" : "FALSE", path, secure ? "TRUE" : "FALSE", String(expires), name, value,
        ].joined(separator: "\t")
    }

    /// A session cookie lives until the process ends and is never written to disk.
    public var isSession: Bool { expires == 0 }

    /// Whether a persistent cookie's time is up at `now` (seconds since 1970), as
    /// libcurl judges it: expired once its expiry is not in the future.
    public func isExpired(at now: Int64) -> Bool { expires != 0 && expires <= now }

    /// What identifies a cookie in a jar: a newer cookie with the same domain, path and
    /// name replaces the older one.
    /// libcurl reads `.example.com` and `example.com` as the same domain.
    public var identity: String {
        let d = domain.hasPrefix(".") ? domain.dropFirst() : Substring(domain)
        return "\(d.lowercased())\t\(path)\t\(name)"
    }
}
