import Foundation

/// The state directory (`--state-dir`) and the one way its files are named, read and
/// written, whatever they hold: the cookie store (`CookieStore`) and the credential
/// store (`CredentialPersistence`) both go through here.
///
/// Names: `<kind>-<principal>.<ext>`, the principal percent-encoded but for letters,
/// digits, `-` and `_`, so no principal name can climb out of the directory or hide a
/// file.
///
/// Writes are atomic: a temporary file `.<kind>-tmp-<pid>-<random>` in the same
/// directory (so `rename` cannot cross a file system), created 0600 with `O_EXCL`,
/// written, `fsync`ed, renamed over the target, and the directory `fsync`ed so the
/// rename itself survives a crash. A reader — the next start, or an operator's `cat` —
/// sees the old file or the new one, never half of one. A process killed in the middle
/// of a save leaves its temporary file behind; `removeLeftoverTemporaries` (run at
/// start, before anything is loaded) deletes those of every kind.
///
/// Trust, decided once here for every kind: a file is read only when it is a regular
/// file (not a symbolic link: `O_NOFOLLOW`), owned by the server's user, and has no
/// permission bits for group or others. A file with a wider mode is refused — not
/// read, and the caller logs why — rather than fixed: someone else could have read it
/// or planted their own, and quietly tightening the mode would hide that. The next save
/// replaces the refused file with a 0600 one.
///
/// Plain file operations, no loop: the owners decide when to call them. A state
/// directory belongs to one xhrpcd at a time (two would overwrite each other's stores,
/// and the second's start would remove the first's temporary files).
struct StateDirectory {
    let path: String

    /// The kinds of files kept here. Every kind is listed so that the start-up cleanup
    /// knows every temporary name a save can leave.
    enum Kind: String, CaseIterable {
        case cookies, credentials
    }

    /// Uses `path`, creating it with mode 0700 (parents too) when it is missing.
    /// Throws when it cannot be made or is not a directory: the operator asked for
    /// persistence, and running without it would lose state quietly.
    init(_ path: String) throws(StartupError) {
        self.path = path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StartupError.stateDirNotADirectory(path)
            }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw StartupError.stateDirUnusable(path, reason: error.localizedDescription)
        }
    }

    /// `<directory>/<kind>-<principal>.<ext>` (see the type's comment for the encoding).
    func file(_ kind: Kind, principal: String, ext: String) -> String {
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
        return "\(path)/\(kind.rawValue)-\(name).\(ext)"
    }

    /// The beginning of the temporary files a save of `kind` makes.
    static func temporaryPrefix(_ kind: Kind) -> String { ".\(kind.rawValue)-tmp-" }

    /// Deletes the temporary files that saves killed halfway left (of every kind), and
    /// returns their names for the log. Only names a save makes are touched; `unlink`
    /// removes a symbolic link itself, never what it points to, and fails on a directory.
    func removeLeftoverTemporaries() -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return [] }
        let prefixes = Kind.allCases.map(StateDirectory.temporaryPrefix)
        var removed: [String] = []
        for name in names.sorted() where prefixes.contains(where: { name.hasPrefix($0) }) {
            if unlink("\(path)/\(name)") == 0 { removed.append(name) }
        }
        return removed
    }

    /// What reading a state file gave.
    enum Read: Equatable {
        /// No file yet.
        case missing
        /// Its bytes.
        case bytes([UInt8])
        /// Not read, and why, in words for the log.
        case refused(String)
    }

    /// Reads the file at `file` if it is trusted (see the type's comment) and at most
    /// `maxBytes` long.
    func load(_ file: String, maxBytes: Int) -> Read {
        let fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            if e == ENOENT { return .missing }
            if e == ELOOP { return .refused("\(file) is a symbolic link; the store must be a regular file") }
            return .refused("cannot open \(file): \(String(cString: strerror(e)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .refused("cannot stat \(file): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFREG else { return .refused("\(file) is not a regular file") }
        guard st.st_uid == geteuid() else {
            return .refused("\(file) belongs to uid \(st.st_uid), not to this server's uid \(geteuid())")
        }
        let mode = st.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            return .refused("\(file) has mode \(String(mode, radix: 8)), wider than 0600, so others could have read or changed it; check it, chmod 600 it and restart to load it (the next save replaces it)")
        }
        guard st.st_size <= maxBytes else { return .refused("\(file) is larger than \(maxBytes) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                if n < 0 { return .refused("cannot read \(file): \(String(cString: strerror(errno)))") }
                break  // shorter than fstat said: it was replaced meanwhile; take what is there
            }
            got += n
        }
        return .bytes(Array(bytes.prefix(got)))
    }

    /// A file that could not be written, said with the path and the system's reason.
    struct WriteError: Error, CustomStringConvertible {
        let description: String
    }

    /// Replaces `target` (a file of `kind` in this directory) with `contents`,
    /// atomically, mode 0600. `what` names the contents in the error ("cookies").
    func save(_ contents: [UInt8], to target: String, kind: Kind, what: String) throws(WriteError) {
        var rng = SystemRandomNumberGenerator()
        let temp = "\(path)/\(StateDirectory.temporaryPrefix(kind))\(getpid())-\(String(rng.next(), radix: 16))"
        func fail(_ step: String) -> WriteError {
            WriteError(description: "cannot save \(what) to \(target): \(step): \(String(cString: strerror(errno)))")
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
        let dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }
}
