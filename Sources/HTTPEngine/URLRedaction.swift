/// Removes `user:password@` from a URL, so that `list`, logs, stats and status texts
/// (a refused redirect quotes its target) never show it.
public enum URLRedaction {
    /// The URL without its userinfo: everything between `://` and the last `@` of the
    /// authority (which ends at the first `/`, `?` or `#`). A URL without one is
    /// returned as it is.
    public static func redact(_ url: String) -> String {
        let u = Array(url.utf8)
        var i = 0
        while i + 2 < u.count, !(u[i] == 0x3A && u[i + 1] == 0x2F && u[i + 2] == 0x2F) { i += 1 }  // "://"
        guard i + 2 < u.count else { return url }
        let authorityStart = i + 3
        var at: Int?
        var j = authorityStart
        while j < u.count, u[j] != 0x2F, u[j] != 0x3F, u[j] != 0x23 {  // "/", "?", "#"
            if u[j] == 0x40 { at = j }  // "@"
            j += 1
        }
        guard let at else { return url }
        return String(decoding: u[..<authorityStart] + u[(at + 1)...], as: UTF8.self)
    }
}
