import Foundation
import HTTPEngine

/// The persistent cookies of each principal on disk, one file per principal in the
/// state directory (`--state-dir`): `cookies-<principal>.txt`, in the Netscape cookie
/// file format libcurl and `curl -b` read. Only cookies with an expiry are written;
/// session cookies end with the process, as a browser's do.
///
/// Writing, reading and trusting the file are the state directory's (`StateDirectory`):
/// an atomic save with mode 0600, and a store loaded only when it is a regular file (not
/// a symbolic link), owned by the server's user, with no permission bits for group or
/// others — a wider one is refused (not loaded, a warning logged) rather than fixed, and
/// the next save replaces it. A store that cannot be read, or lines that are not
/// cookies, are logged and skipped: the server starts regardless.
///
/// Plain file operations, no loop: `CookiePersistence` decides when to call them.
struct CookieStore {
    let state: StateDirectory
    var directory: String { state.path }

    /// Largest store read at start; a bigger file is refused as not ours.
    static let maxBytes = 16 << 20

    /// Uses `directory`, creating it with mode 0700 (parents too) when it is missing
    /// (`StateDirectory.init`).
    init(directory: String) throws(StartupError) {
        state = try StateDirectory(directory)
    }

    /// `cookies-<principal>.txt`, the name percent-encoded but for letters, digits,
    /// `-` and `_`, so no principal name can climb out of the directory or hide a file.
    func path(for principal: String) -> String {
        state.file(.cookies, principal: principal, ext: "txt")
    }

    /// What reading a principal's store gave.
    enum Loaded: Equatable {
        /// No store yet (first start, or never a persistent cookie).
        case missing
        /// The live persistent cookies; `skipped` counts lines that were not cookies
        /// (comments and blank lines aside). Expired and session cookies are dropped
        /// without counting.
        case cookies([Cookie], skipped: Int)
        /// Not loaded, and why, in words for the log.
        case refused(String)
    }

    /// Reads a principal's store, keeping the cookies whose expiry is after `now`.
    func load(principal: String, now: Int64) -> Loaded {
        let path = path(for: principal)
        let bytes: [UInt8]
        switch state.load(path, maxBytes: CookieStore.maxBytes) {
        case .missing: return .missing
        case .refused(let why): return .refused(why)
        case .bytes(let read): bytes = read
        }
        var cookies: [Cookie] = []
        var skipped = 0
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true) {
            let text = line.hasSuffix("\r") ? line.dropLast() : line
            if let c = Cookie(netscapeLine: text) {
                if !c.isSession && !c.isExpired(at: now) { cookies.append(c) }
            } else if !(text.hasPrefix("#") && !text.hasPrefix("#HttpOnly_")) && !text.allSatisfy(\.isWhitespace) {
                skipped += 1
            }
        }
        return .cookies(cookies, skipped: skipped)
    }

    /// The bytes of a store holding `cookies` (the caller has picked the persistent,
    /// live ones), in a stable order so an unchanged jar gives unchanged bytes.
    static func contents(_ cookies: [Cookie], principal: String) -> [UInt8] {
        var text = "# Netscape HTTP Cookie File\n# The persistent cookies of xhrpcd principal \"\(principal)\". Edit only while xhrpcd is stopped.\n"
        for line in cookies.map(\.netscapeLine).sorted() { text += line + "\n" }
        return Array(text.utf8)
    }

    typealias WriteError = StateDirectory.WriteError

    /// Replaces a principal's store with `contents`, atomically, mode 0600.
    func save(_ contents: [UInt8], principal: String) throws(WriteError) {
        try state.save(contents, to: path(for: principal), kind: .cookies, what: "cookies")
    }
}
