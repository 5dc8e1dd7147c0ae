import Foundation
import JSONRPC

/// Confines `sendWithFile` to the upload root. The path (relative paths are taken
/// from the root) is resolved with realpath, which follows `..` and every symbolic
/// link, and must then lie inside the resolved root: no way out by either.
enum UploadRoot {
    static func resolve(_ path: String, root: String) throws(RPCError) -> String {
        guard let realRoot = realPath(root) else {
            throw .app(.fileError, "The upload root \(root) does not exist")
        }
        let candidate = path.hasPrefix("/") ? path : realRoot + "/" + path
        guard let real = realPath(candidate) else {
            throw .app(.fileError, "No readable file at '\(path)' below the upload root", ["path": .string(path)])
        }
        guard real.hasPrefix(realRoot.hasSuffix("/") ? realRoot : realRoot + "/") else {
            throw .app(.forbidden, "'\(path)' is outside the upload root", ["path": .string(path)])
        }
        var st = stat()
        guard stat(real, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw .app(.fileError, "'\(path)' is not a regular file", ["path": .string(path)])
        }
        return real
    }

    private static func realPath(_ p: String) -> String? {
        guard let r = realpath(p, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }
}
