import EventLoop
import Foundation

/// The Unix socket's file: created with the configured mode from the start (the umask
/// is narrowed around the bind, so there is no moment where it is wider), a stale file
/// from a server that died is replaced, and a live server's socket is left alone.
enum UnixSocketFile {
    static func listen(loop: Loop, path: String, mode: UInt16) throws -> Listener {
        try removeIfStale(path)
        let old = umask(~mode_t(mode) & 0o777)
        defer { umask(old) }
        do {
            let listener = try Listener.pipe(loop: loop, path: path)
            chmod(path, mode_t(mode))
            return listener
        } catch let e as UVError {
            // libuv's bind turns ENOENT into EACCES (as Windows reports it), which sends
            // an operator to look at permissions when the folder is simply missing.
            let folder = (path as NSString).deletingLastPathComponent
            var st = stat()
            if e.name == "EACCES", !folder.isEmpty, stat(folder, &st) != 0, errno == ENOENT {
                throw StartupError.cannotListen(path: path, reason: "the folder \(folder) does not exist (create it, or listen elsewhere)")
            }
            throw StartupError.cannotListen(path: path, reason: "\(e.message) (\(e.name))")
        }
    }

    /// Deletes `path` if it is a socket nobody listens on; refuses if a server answers
    /// there or if it is not a socket at all.
    private static func removeIfStale(_ path: String) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw StartupError.notASocket(path: path)
        }
        if isLive(path) {
            throw StartupError.socketInUse(path: path)
        }
        unlink(path)
    }

    /// Whether something accepts connections on the socket (a blocking local connect
    /// answers at once: refused for a stale file).
    private static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return rc == 0
    }
}
