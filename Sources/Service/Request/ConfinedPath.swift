import Foundation
import JSON
import JSONRPC

/// Confines the files a client names to a directory the operator chose: `sendWithFile`
/// and multipart file parts (`resolveRelative`) to the upload root,
/// `setClientCertificate` to the certificate root (`rootName` says which, in
/// messages). The path (relative paths are taken from the root) is resolved
/// with realpath, which follows `..` and every symbolic link, and must then lie inside
/// the resolved root: no way out by either. It must be a regular file the server can
/// read.
enum ConfinedPath {
    /// The real path of `path` (relative to `root` unless absolute), or the error to
    /// answer: `file_error` when it is missing, unreadable or not a regular file,
    /// `forbidden` when it lies outside `root`.
    static func resolve(_ path: String, root: String, rootName: String) throws(RPCError) -> String {
        guard let realRoot = realPath(root) else {
            throw ServiceError.fileError("The \(rootName) \(root) does not exist")
        }
        let candidate = path.hasPrefix("/") ? path : realRoot + "/" + path
        guard let real = realPath(candidate) else {
            throw ServiceError.fileError("No readable file at '\(path)' below the \(rootName)", path: path)
        }
        guard real.hasPrefix(realRoot.hasSuffix("/") ? realRoot : realRoot + "/") else {
            throw ServiceError.outsideRoot(path, rootName: rootName)
        }
        var st = stat()
        guard stat(real, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw ServiceError.fileError("'\(path)' is not a regular file", path: path)
        }
        guard access(real, R_OK) == 0 else {
            throw ServiceError.fileError("'\(path)' is not readable by the server", path: path)
        }
        return real
    }

    /// As `resolve`, for paths that may only be relative to the root (multipart file
    /// parts): an absolute path or a `..` component is refused before the file system
    /// is asked anything, and a path that a symbolic link takes out of the root is
    /// refused too; both as `invalid_params` with `data.reason` `path_not_allowed`.
    /// Nothing is opened or read on the way.
    static func resolveRelative(_ path: String, root: String, rootName: String) throws(RPCError) -> String {
        let notAllowed = RPCError.invalidParams("'\(path)' is not a path below the \(rootName): it must be relative, without '..', and stay inside through links",
                                                reason: .pathNotAllowed, ["path": .string(path)])
        guard !path.isEmpty, !path.hasPrefix("/"), !path.utf8.contains(0),
              !path.split(separator: "/").contains("..")
        else { throw notAllowed }
        do {
            return try resolve(path, root: root, rootName: rootName)
        } catch where error.reason == RPCError.Reason.forbidden.rawValue {
            throw notAllowed
        }
    }

    private static func realPath(_ p: String) -> String? {
        guard let r = realpath(p, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }
}
