import Foundation
import HTTPEngine

/// The persistent cookies of each principal on disk, one file per principal in the
/// state directory (`--state-dir`): `cookies-<principal>.txt`, in the Netscape cookie
/// file format libcurl and `curl -b` read. Only cookies with an expiry are written;
/// session cookies end with the process, as a browser's do.
///
/// Writes are atomic: a temporary file in the same directory (so `rename` cannot cross
/// a file system), created 0600 with `O_EXCL`, written, `fsync`ed, renamed over the
/// store, and the directory `fsync`ed so the rename itself survives a crash. A reader —
/// the next start, or an operator's `cat` — sees the old file or the new one, never half
/// of one.
///
/// Trust, decided once here: a store is loaded only when it is a regular file (not a
/// symbolic link: `O_NOFOLLOW`), owned by the server's user, and has no permission bits
/// for group or others. A store with a wider mode is refused — not loaded, a warning
/// logged — rather than fixed: someone else could have read its cookies or planted
/// their own, and quietly tightening the mode would hide that. The next save replaces
/// the refused file with a 0600 one. A store that cannot be read, or lines that are not
/// cookies, are logged and skipped: the server starts regardless.
///
/// Plain file operations, no loop: `CookiePersistence` decides when to call them.
struct CookieStore {
    let directory: String

    /// Largest store read at start; a bigger file is refused as not ours.
    static let maxBytes = 16 << 20

    /// Uses `directory`, creating it with mode 0700 (parents too) when it is missing.
    /// Throws when it cannot be made or is not a directory: the operator asked for
    /// persistence, and running without it would lose cookies quietly.
    init(directory: String) throws(StartupError) {
        self.directory = directory
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StartupError.stateDirNotADirectory(directory)
            }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw StartupError.stateDirUnusable(directory, reason: error.localizedDescription)
        }
    }

    /// `cookies-<principal>.txt`, the name percent-encoded but for letters, digits,
    /// `-` and `_`, so no principal name can climb out of the directory or hide a file.
    func path(for principal: String) -> String {
        var name = ""
        for b in principal.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                name.append(Character(UnicodeScalar(b)))
            default:
                name += String(format: "%%%02X", b)
            }
        }
        return directory + "/cookies-" + name + ".txt"
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
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            if e == ENOENT { return .missing }
            if e == ELOOP { return .refused("\(path) is a symbolic link; the store must be a regular file") }
            return .refused("cannot open \(path): \(String(cString: strerror(e)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .refused("cannot stat \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFREG else { return .refused("\(path) is not a regular file") }
        guard st.st_uid == geteuid() else {
            return .refused("\(path) belongs to uid \(st.st_uid), not to this server's uid \(geteuid())")
        }
        let mode = st.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            return .refused("\(path) has mode \(String(mode, radix: 8)), wider than 0600, so others could have read or changed it; check it, chmod 600 it and restart to load it (the next save replaces it)")
        }
        guard st.st_size <= CookieStore.maxBytes else { return .refused("\(path) is larger than \(CookieStore.maxBytes) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                if n < 0 { return .refused("cannot read \(path): \(String(cString: strerror(errno)))") }
                break  // shorter than fstat said: it was replaced meanwhile; take what is there
            }
            got += n
        }
        var cookies: [Cookie] = []
        var skipped = 0
        for line in String(decoding: bytes.prefix(got), as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true) {
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

    /// A store that could not be written, said with the path and the system's reason.
    struct WriteError: Error, CustomStringConvertible {
        let description: String
    }

    /// Replaces a principal's store with `contents`, atomically, mode 0600.
    func save(_ contents: [UInt8], principal: String) throws(WriteError) {
        let target = path(for: principal)
        var rng = SystemRandomNumberGenerator()
        let temp = "\(directory)/.cookies-tmp-\(getpid())-\(String(rng.next(), radix: 16))"
        func fail(_ what: String) -> WriteError {
            WriteError(description: "cannot save cookies to \(target): \(what): \(String(cString: strerror(errno)))")
        }
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw fail("creating \(temp)") }
        var ok = false
        defer { if !ok { unlink(temp) } }
        // The umask may have narrowed the mode; 0600 exactly is the promise.
        guard fchmod(fd, 0o600) == 0 else { let e = fail("chmod"); close(fd); throw e }
        var written = 0
        while written < contents.count {
            let n = contents.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { let e = fail("writing"); close(fd); throw e }
            written += n
        }
        guard fsync(fd) == 0 else { let e = fail("fsync"); close(fd); throw e }
        guard close(fd) == 0 else { throw fail("closing") }
        guard rename(temp, target) == 0 else { throw fail("renaming \(temp)") }
        ok = true
        // The rename is durable once the directory is on disk; failing that only
        // weakens crash safety, so it is not an error.
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }
}
