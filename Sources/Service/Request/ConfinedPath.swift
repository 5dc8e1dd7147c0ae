import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// One principal's folder for the files it names for one purpose (docs/guide/files.md):
/// its own root from the config file (`"uploadRoot"`, `"downloadRoot"` of its entry),
/// else its folder below the server's `--upload-root` / `--download-root`, named by the
/// principal and made 0700 on first use. The socket owner (`local`) keeps the server's
/// root itself, without the top-level names that are other principals' folders.
struct FileRoot: Equatable {
    enum Purpose {
        case upload, download

        var name: String { self == .upload ? "upload root" : "download root" }
        var flag: String { self == .upload ? "--upload-root" : "--download-root" }
        var configKey: String { self == .upload ? "uploadRoot" : "downloadRoot" }
    }

    /// The root of the principal called `principal`: its own from the config file, else
    /// its folder (named by it) below the server's root; the socket owner (`local`)
    /// keeps the server's root itself, less the folders of the principals that share
    /// it. Nil when neither is configured.
    static func of(_ purpose: Purpose, principal: String, config: ServerConfig) -> FileRoot? {
        func own(_ c: PrincipalConfig) -> String? { purpose == .upload ? c.uploadRoot : c.downloadRoot }
        if let entry = config.principals.first(where: { $0.name == principal }), let directory = own(entry) {
            return FileRoot(purpose: purpose, directory: directory, subfolder: nil)
        }
        guard let shared = purpose == .upload ? config.uploadRoot : config.downloadRoot else { return nil }
        guard principal == PrincipalTable.ownerName else {
            return FileRoot(purpose: purpose, directory: shared, subfolder: principal)
        }
        let sharing = config.principals.filter { own($0) == nil }.map(\.name)
        return FileRoot(purpose: purpose, directory: shared, subfolder: nil, reserved: Set(sharing))
    }

    let purpose: Purpose
    /// The directory the operator chose.
    let directory: String
    /// The principal's folder below `directory`; nil: `directory` itself.
    let subfolder: String?
    /// Top-level names the principal may not use: the folders of the principals that
    /// share `directory` (for the owner, whose root holds them).
    var reserved: Set<String> = []

    var name: String { purpose.name }

    /// What tells two downloads of the same file apart from those of two principals.
    func key(_ components: [String]) -> String {
        ([directory, subfolder ?? ""] + components).joined(separator: "\u{0}")
    }

    /// A descriptor of the principal's folder (the caller closes it), for the client's
    /// `path` (named in errors). Its subfolder is made 0700 when missing and is never a
    /// symbolic link.
    func open(for path: String) throws(RPCError) -> Int32 {
        let base = Foundation.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard base >= 0 else {
            throw ServiceError.fileError("The \(name) \(directory) cannot be opened: \(ConfinedPath.errnoText())")
        }
        guard let subfolder else { return base }
        defer { Foundation.close(base) }
        return try ConfinedPath.folder(subfolder, in: base, creating: true, path: path, root: self)
    }
}

/// The one rule for the files a client names below its root (`download`, `upload
/// {path}`, `sendWithFile`, multipart file parts): the path is relative, without
/// empty, `.` or `..` components; it is walked one component at a time with
/// `openat(O_NOFOLLOW)` from a descriptor of the principal's root, so no symbolic link
/// is followed, in the middle or as the name. The file it names is a regular file with
/// one link: a FIFO, device, socket, folder or a second hard link to some other file is
/// refused by `fstatat` before anything opens it, and checked again with `fstat` on the
/// descriptor, which is opened `O_NONBLOCK` (a FIFO swapped in meanwhile cannot block
/// the loop). Every refusal is -32602 with `data.reason` `path_not_allowed`; a file that
/// is simply missing or unreadable is `file_error`.
enum ConfinedPath {
    /// The components of `path`, refusing what could leave the root by name.
    static func components(_ path: String, in root: FileRoot) throws(RPCError) -> [String] {
        func refuse(_ why: String) -> RPCError { ServiceError.pathNotAllowed(path, rootName: root.name, why) }
        guard !path.isEmpty, !path.utf8.contains(0) else { throw refuse("give a non-empty path without NUL") }
        if path.hasPrefix("/") { throw refuse("it is absolute; give a path relative to the root") }
        let components = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        for c in components {
            if c == ".." { throw refuse("it contains '..'") }
            if c.isEmpty || c == "." { throw refuse("it has an empty or '.' component") }
            // Room for the `.part.meta` beside the file within NAME_MAX.
            if c.utf8.count > 245 { throw refuse("a component is longer than 245 bytes") }
        }
        if root.reserved.contains(components[0]) { throw refuse("'\(components[0])' is another principal's folder") }
        return components
    }

    /// Opens the file `path` names for reading (an upload's body).
    static func openForReading(_ path: String, in root: FileRoot) throws(RPCError) -> UploadFile {
        let components = try self.components(path, in: root)
        let dir = try openParent(components, path: path, in: root, creating: false)
        defer { Foundation.close(dir) }
        let name = components[components.count - 1]
        guard try checkEntry(name, in: dir, path: path, root: root) else {
            throw ServiceError.fileError("No file '\(path)' below the \(root.name)", path: path)
        }
        return UploadFile(descriptor: try openRegular(name, in: dir, flags: O_RDONLY, path: path, root: root), name: path)
    }

    /// A descriptor of the folder holding the last component (the caller closes it);
    /// with `creating`, missing folders are made 0700.
    static func openParent(_ components: [String], path: String, in root: FileRoot, creating: Bool) throws(RPCError) -> Int32 {
        var dir = try root.open(for: path)
        for folder in components.dropLast() {
            let next: Int32
            do throws(RPCError) { next = try self.folder(folder, in: dir, creating: creating, path: path, root: root) } catch {
                Foundation.close(dir)
                throw error
            }
            Foundation.close(dir)
            dir = next
        }
        return dir
    }

    /// A descriptor of the folder `name` in `dir`; a symbolic link or anything but a
    /// folder there is refused.
    static func folder(_ name: String, in dir: Int32, creating: Bool, path: String, root: FileRoot) throws(RPCError) -> Int32 {
        var st = stat()
        if fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) != S_IFDIR {
            throw ServiceError.pathNotAllowed(path, rootName: root.name, "'\(name)' is \(kind(st)), not a folder")
        }
        let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        var fd = openat(dir, name, flags)
        if fd < 0, errno == ENOENT, creating {
            let made = mkdirat(dir, name, 0o700) == 0
            guard made || errno == EEXIST else {
                throw ServiceError.fileError("Cannot create the folder '\(name)' of '\(path)': \(errnoText())", path: path)
            }
            fd = openat(dir, name, flags)
            // 0700 exactly: the process umask may have narrowed it (a Unix listener's
            // socket file is made under a temporary one, `UnixSocketFile`).
            if made, fd >= 0 { _ = fchmod(fd, 0o700) }
        }
        guard fd >= 0 else {
            if errno == ELOOP || errno == ENOTDIR {
                throw ServiceError.pathNotAllowed(path, rootName: root.name, "'\(name)' is a symbolic link or not a folder")
            }
            if errno == ENOENT { throw ServiceError.fileError("No file '\(path)' below the \(root.name)", path: path) }
            throw ServiceError.fileError("'\(name)' of '\(path)' cannot be opened: \(errnoText())", path: path)
        }
        return fd
    }

    /// Whether `name` exists in `dir`: false when absent, true for a regular file with
    /// one link; anything else is refused before it is opened.
    static func checkEntry(_ name: String, in dir: Int32, path: String, root: FileRoot) throws(RPCError) -> Bool {
        var st = stat()
        guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return false }
            throw ServiceError.fileError("Cannot look at '\(name)' of '\(path)': \(errnoText())", path: path)
        }
        try checkRegular(st, name, path: path, root: root)
        return true
    }

    /// Opens `name` in `dir` with `flags` (and `O_CREAT`'s mode 0600), never following
    /// a link and never blocking, and checks what was opened: it may not be what
    /// `checkEntry` saw. The caller closes the descriptor.
    static func openRegular(_ name: String, in dir: Int32, flags: Int32, path: String, root: FileRoot) throws(RPCError) -> Int32 {
        let fd = openat(dir, name, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            switch errno {
            case ELOOP: throw ServiceError.pathNotAllowed(path, rootName: root.name, "'\(name)' is a symbolic link")
            // A FIFO opened for writing with no reader.
            case ENXIO: throw ServiceError.pathNotAllowed(path, rootName: root.name, "'\(name)' is not a regular file")
            case ENOENT: throw ServiceError.fileError("No file '\(path)' below the \(root.name)", path: path)
            default: throw ServiceError.fileError("Cannot open '\(name)' of '\(path)': \(errnoText())", path: path)
            }
        }
        var st = stat()
        do throws(RPCError) {
            guard fstat(fd, &st) == 0 else {
                throw ServiceError.fileError("Cannot look at '\(name)' of '\(path)': \(errnoText())", path: path)
            }
            try checkRegular(st, name, path: path, root: root)
        } catch {
            Foundation.close(fd)
            throw error
        }
        return fd
    }

    /// Refuses anything but a regular file with one link.
    static func checkRegular(_ st: stat, _ name: String, path: String, root: FileRoot) throws(RPCError) {
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw ServiceError.pathNotAllowed(path, rootName: root.name, "'\(name)' is \(kind(st)), not a regular file")
        }
        guard st.st_nlink == 1 else {
            throw ServiceError.pathNotAllowed(path, rootName: root.name,
                                              "'\(name)' has \(st.st_nlink) hard links; only a file with one is used")
        }
    }

    private static func kind(_ st: stat) -> String {
        switch st.st_mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a folder"
        case S_IFLNK: "a symbolic link"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "of an unknown kind"
        }
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    // MARK: The certificate root

    /// `setClientCertificate`'s rule for `--cert-root`, whose files libcurl opens by
    /// path: the real path of `path` (relative to `root` unless absolute), resolved
    /// with realpath (which follows `..` and every symbolic link), must lie inside the
    /// resolved root and be a regular file the server can read. `file_error` when it is
    /// missing, unreadable or not a regular file, `forbidden` when it lies outside.
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

    private static func realPath(_ p: String) -> String? {
        guard let r = realpath(p, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }
}
