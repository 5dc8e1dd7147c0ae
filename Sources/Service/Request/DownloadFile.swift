import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// Where a `download`'s body goes instead of the receive buffer: `NAME.part` below the
/// principal's download root (`FileRoot`), renamed to `NAME` only when the body is
/// complete. The request object owns one (`HTTPRequest.download`) from `download` until
/// it reaches DONE or is released; every path closes its descriptors (`close`).
///
/// The path follows `ConfinedPath`'s rule, the one every file a client names follows:
/// walked with `openat(O_NOFOLLOW)` from the root's descriptor, missing folders made
/// 0700; `NAME`, `NAME.part` and `NAME.part.meta` must each be absent or a regular file
/// with one link (a FIFO, a folder, a hard link to a file elsewhere are refused before
/// anything opens them), the part the server's own; the part is opened `O_NONBLOCK`,
/// checked again on its descriptor, and set to 0600.
///
/// Resume: beside the part file, `NAME.part.meta` (0600, small JSON: `etag`,
/// `lastModified`, `url`) keeps the validator of the response the part came from,
/// written when that response's head arrives. A `resume` download with a non-empty part
/// and a validator asks `Range: bytes=N-` with `If-Range`; without a validator it starts
/// from zero (a part of unknown origin is never extended).
///
/// Writes are synchronous `pwrite`s on the loop's thread: each is one libcurl write
/// callback (at most `CURL_MAX_WRITE_SIZE`, 16 KiB, or one HTTP/2 frame), into the page
/// cache; bounded like the copy into the receive buffer it replaces.
final class DownloadFile {
    /// The path as the client gave it, checked (components joined by `/`).
    let path: String
    /// The files this download writes within its principal's root (`FileRoot.key` of
    /// `NAME`, `NAME.part`, `NAME.part.meta`): what `pathsInUse` holds for it.
    private let keys: [String]
    private let name: String
    private let root: FileRoot
    private var dirFD: Int32
    private var partFD: Int32
    /// Bytes of the part kept from an earlier attempt, asked for with `Range`.
    private(set) var keptBytes: Int64
    private let validator: (etag: String?, lastModified: String?)
    /// What the response's head decided (nil before it arrives).
    private(set) var decision: HeadDecision?
    /// Where the next body byte goes.
    private var position: Int64 = 0
    /// The whole file's length when the response says it (Content-Length of a 200,
    /// Content-Range's total of a 206).
    private var expectedTotal: Int64?
    /// The files (`FileRoot.key`) that the downloads whose part files are open write: a
    /// second download of the same path would truncate or interleave the first's part,
    /// and one of `NAME.part` would rename its own part over the first's (whose rename
    /// would then put the wrong bytes at `NAME`), so any file in common is busy. Touched
    /// only on the loop's thread (`open`, `close`), like every session object.
    nonisolated(unsafe) private static var pathsInUse: Set<String> = []
    private var holdsPath = false

    /// What a response head means for the file.
    enum HeadDecision: Equatable {
        /// Body bytes go to the part file from this offset.
        case write
        /// The part was already complete (416 naming its length): renamed as it is.
        case alreadyComplete
        /// Not a body for the file (a non-2xx status): thrown away, the part untouched.
        case discard
        /// The server resumed somewhere else than asked: the request fails.
        case fail(String)
    }

    private init(path: String, keys: [String], name: String, root: FileRoot, dirFD: Int32, partFD: Int32, keptBytes: Int64,
                 validator: (etag: String?, lastModified: String?)) {
        self.path = path
        self.keys = keys
        self.name = name
        self.root = root
        self.dirFD = dirFD
        self.partFD = partFD
        self.keptBytes = keptBytes
        self.validator = validator
    }

    deinit { close() }

    /// Bytes of the whole file that progress counts before this response's: the kept
    /// part while it may still be resumed, 0 once a 200 restarted it.
    var progressOffset: Int64 { decision == .write || decision == nil ? keptBytes : 0 }

    // MARK: Opening

    /// Opens (creating folders and the part file) `path` below `root`. A refused path is
    /// `path_not_allowed` and nothing is opened; other failures are `file_error`.
    static func open(_ path: String, root: FileRoot, resume: Bool) throws(RPCError) -> DownloadFile {
        let components = try ConfinedPath.components(path, in: root)
        let name = components[components.count - 1]
        let leaves = [name, name + ".part", name + ".part.meta"]
        let keys = leaves.map { root.key(Array(components.dropLast()) + [$0]) }
        let shown = components.joined(separator: "/")
        guard pathsInUse.isDisjoint(with: keys) else { throw ServiceError.downloadInProgress(shown) }
        let dir = try ConfinedPath.openParent(components, path: path, in: root, creating: true)
        do throws(RPCError) {
            for leaf in leaves {
                _ = try ConfinedPath.checkEntry(leaf, in: dir, path: path, root: root)
            }
            let part = try ConfinedPath.openRegular(name + ".part", in: dir, flags: O_WRONLY | O_CREAT, path: path, root: root)
            var st = stat()
            guard fstat(part, &st) == 0, st.st_uid == geteuid(), fchmod(part, 0o600) == 0 else {
                Foundation.close(part)
                throw ServiceError.pathNotAllowed(path, rootName: root.name, "'\(name).part' is not the server's own file")
            }
            let validator: (etag: String?, lastModified: String?) = resume ? readMeta(name + ".part.meta", in: dir, root: root) : (nil, nil)
            var kept = Int64(st.st_size)
            if !resume || kept == 0 || (validator.etag == nil && validator.lastModified == nil) {
                kept = 0
                _ = ftruncate(part, 0)
                _ = unlinkat(dir, name + ".part.meta", 0)
            }
            let file = DownloadFile(path: shown, keys: keys, name: name, root: root, dirFD: dir, partFD: part, keptBytes: kept,
                                    validator: validator)
            pathsInUse.formUnion(keys)
            file.holdsPath = true
            return file
        } catch {
            Foundation.close(dir)
            throw error
        }
    }

    private static func readMeta(_ name: String, in dir: Int32, root: FileRoot) -> (etag: String?, lastModified: String?) {
        guard let fd = try? ConfinedPath.openRegular(name, in: dir, flags: O_RDONLY, path: name, root: root) else { return (nil, nil) }
        defer { Foundation.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let n = read(fd, &bytes, bytes.count)
        guard n > 0, let value = try? JSON.decode(Array(bytes[0..<n])) else { return (nil, nil) }
        return (value["etag"]?.stringValue, value["lastModified"]?.stringValue)
    }

    private static func errnoText() -> String { ConfinedPath.errnoText() }

    // MARK: The exchange

    /// The headers that ask for the rest of a kept part.
    var rangeHeaders: [(name: String, value: String)] {
        guard keptBytes > 0, let v = validator.etag ?? validator.lastModified else { return [] }
        return [("Range", "bytes=\(keptBytes)-"), ("If-Range", v)]
    }

    /// Decides what the final response's head means for the file, and keeps its
    /// validator beside the part for a later resume.
    func headArrived(status: Int, headers: HeaderFields, url: String) -> HeadDecision {
        func header(_ n: String) -> String? {
            headers.lastValue(of: n)?.trimmingCharacters(in: .whitespaces)
        }
        let d: HeadDecision
        switch status {
        case 206:
            guard let range = header("content-range").flatMap(Self.contentRange), let start = range.start else {
                d = .fail("The server answered 206 without a byte range in Content-Range")
                break
            }
            guard start == keptBytes else {
                d = .fail("The server resumed at byte \(start), not at byte \(keptBytes) where the part file ends")
                break
            }
            position = start
            expectedTotal = range.total
            d = .write
        case 200..<300:
            // A full body (the validator changed, or the server ignores ranges): from zero.
            keptBytes = 0
            position = 0
            _ = ftruncate(partFD, 0)
            expectedTotal = header("content-length").flatMap { Int64($0) }
            d = .write
        case 416 where keptBytes > 0:
            let total = header("content-range").flatMap(Self.contentRange)?.total
            d = total == keptBytes ? .alreadyComplete : .discard
        default:
            d = .discard
        }
        decision = d
        if d == .write { writeMeta(etag: header("etag"), lastModified: header("last-modified"), url: url) }
        return d
    }

    /// `bytes S-E/T`, `bytes S-E/*` or `bytes */T`.
    static func contentRange(_ value: String) -> (start: Int64?, total: Int64?)? {
        guard value.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        let total = parts[1] == "*" ? nil : Int64(parts[1])
        if parts[0] == "*" { return (nil, total) }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]), end >= start else { return nil }
        return (start, total)
    }

    private func writeMeta(etag: String?, lastModified: String?, url: String) {
        let meta = name + ".part.meta"
        guard etag != nil || lastModified != nil else {
            _ = unlinkat(dirFD, meta, 0)
            return
        }
        var o: JSONObject = ["url": .string(url)]
        if let etag { o["etag"] = .string(etag) }
        if let lastModified { o["lastModified"] = .string(lastModified) }
        let bytes = JSON.encode(.object(o))
        // Checked before it is cut: a hard link put there meanwhile is refused, not emptied.
        guard let fd = try? ConfinedPath.openRegular(meta, in: dirFD, flags: O_WRONLY | O_CREAT, path: path, root: root) else {
            return  // no validator kept: a later resume starts from zero
        }
        _ = ftruncate(fd, 0)
        _ = fchmod(fd, 0o600)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        Foundation.close(fd)
    }

    /// Writes body bytes at the current position; nil, or what went wrong.
    func write(_ bytes: UnsafeRawBufferPointer) -> String? {
        var done = 0
        while done < bytes.count {
            let n = pwrite(partFD, bytes.baseAddress! + done, bytes.count - done, off_t(position))
            if n < 0 {
                if errno == EINTR { continue }
                return "Cannot write '\(path).part': \(Self.errnoText())"
            }
            done += n
            position += Int64(n)
        }
        return nil
    }

    /// Why the body just completed is not the whole file, or nil when it is.
    var incompleteness: String? {
        switch decision {
        case .alreadyComplete: return nil
        case .write:
            if let total = expectedTotal, total != position {
                return "The file has \(position) bytes of \(total); '\(path).part' is kept for a resume"
            }
            return nil
        default: return nil
        }
    }

    /// When the exchange completed: a complete body (a 2xx whose bytes are all there, or
    /// the 416 of a part that was already whole) is renamed into place and its meta
    /// removed; nil then, and when there is nothing to place (the part is kept for a
    /// resume). Else why it could not be moved: the request fails with it, for nothing
    /// is reported done that is not on disk under its name.
    func place() -> String? {
        guard dirFD >= 0, decision == .write || decision == .alreadyComplete, incompleteness == nil else { return nil }
        guard renameat(dirFD, name + ".part", dirFD, name) == 0 else {
            return "Cannot move '\(path).part' to '\(path)': \(Self.errnoText()); the part is kept"
        }
        _ = unlinkat(dirFD, name + ".part.meta", 0)
        return nil
    }

    /// Closes both descriptors; the files stay as they are.
    func close() {
        if holdsPath {
            Self.pathsInUse.subtract(keys)
            holdsPath = false
        }
        if partFD >= 0 { Foundation.close(partFD) }
        if dirFD >= 0 { Foundation.close(dirFD) }
        partFD = -1
        dirFD = -1
    }
}
