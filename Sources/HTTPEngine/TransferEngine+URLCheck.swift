import CCurl

/// The URL check at `start`: refuses what libcurl would only refuse at connect time,
/// and gives the egress policy the target as libcurl reads it.
extension TransferEngine {
    /// Refuses what libcurl would only refuse later, at connect time, so `start` can
    /// throw: a URL libcurl cannot parse, or a scheme other than http and https.
    /// Returns where the URL leads (scheme lowercased, host and port as libcurl reads
    /// them), which the egress policy checks.
    ///
    /// libcurl parses the URL again when the transfer runs (it keeps no parse from
    /// `curl_url`), so the URLs nearly every request carries — `http://` or `https://`,
    /// a plain host name or IPv4 address, an optional port, printable ASCII after — are
    /// recognised by `plainHTTPTarget` with one pass over the bytes. Everything else,
    /// and every refusal with its message, comes from libcurl's own parser as before.
    static func validate(url: String) throws -> URLTarget {
        if let target = plainHTTPTarget(url) { return target }
        let target = try URLTarget.parse(url: url)
        guard target.scheme == "http" || target.scheme == "https" else {
            throw TransferFailure(CURLE_UNSUPPORTED_PROTOCOL,
                                  "Protocol \"\(target.scheme)\" not supported: only http and https are allowed")
        }
        guard !target.host.isEmpty else { throw TransferFailure(CURLE_URL_MALFORMAT, "Malformed URL: no host") }
        return target
    }

    /// Scheme, host and port when `url` is `http://` or `https://` (lower case), a host
    /// of ASCII letters, digits, `-`, `.` and `_`, optionally `:` and a port of 1 to
    /// 65535 without leading zeros, then nothing or `/`, `?` or `#` followed by
    /// printable ASCII other than space and `\`. Such a URL is accepted by libcurl's
    /// parser (its host check refuses only other characters, its junk scan only
    /// controls and spaces), with the same host and port — except that libcurl rewrites
    /// a loosely spelt IPv4 literal (`0x7f.1`) in dotted decimal, which the egress
    /// policy reads as the same address (see `URLTarget`). `URLFastPathTests` checks
    /// the agreement against the libcurl in use. nil means "not sure", never
    /// "malformed".
    static func plainHTTPTarget(_ url: String) -> URLTarget? {
        let result: URLTarget?? = url.utf8.withContiguousStorageIfAvailable { u -> URLTarget? in
            let n = u.count
            guard n <= maxPlainURLLength, n > 7, u[0] == 0x68, u[1] == 0x74, u[2] == 0x74, u[3] == 0x70 else {
                return nil  // "http"
            }
            var i = 4
            let scheme: String
            var port: Int
            if u[i] == 0x73 {  // "s"
                scheme = "https"
                port = 443
                i += 1
            } else {
                scheme = "http"
                port = 80
            }
            guard i + 3 <= n, u[i] == 0x3A, u[i + 1] == 0x2F, u[i + 2] == 0x2F else { return nil }  // "://"
            i += 3
            let hostStart = i
            while i < n, isPlainHostByte(u[i]) { i += 1 }
            guard i > hostStart else { return nil }
            let host = String(decoding: UnsafeBufferPointer(rebasing: u[hostStart..<i]), as: UTF8.self)
            if i < n, u[i] == 0x3A {  // ":" port
                i += 1
                let portStart = i
                port = 0
                while i < n, u[i] >= 0x30, u[i] <= 0x39, i - portStart < 5 {
                    port = port * 10 + Int(u[i] - 0x30)
                    i += 1
                }
                guard i > portStart, u[portStart] != 0x30, port <= 65535 else { return nil }
            }
            guard i == n || u[i] == 0x2F || u[i] == 0x3F || u[i] == 0x23 else { return nil }  // "/", "?", "#"
            while i < n {
                let c = u[i]
                guard c > 0x20, c < 0x7F, c != 0x5C else { return nil }
                i += 1
            }
            return URLTarget(scheme: scheme, host: host, port: port)
        }
        return result ?? nil
    }

    /// Longer URLs take the slow path (libcurl refuses beyond 8 MB; nobody is in a hurry
    /// then).
    static let maxPlainURLLength = 8192

    private static func isPlainHostByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
