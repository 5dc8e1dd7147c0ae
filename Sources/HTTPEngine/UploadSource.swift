#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CCurl

/// A request body that libcurl pulls through the read callback, with a seek so libcurl
/// can rewind it (a 307/308 redirect or an auth retry sends the body again).
///
/// `.file` keeps a descriptor opened by `TransferEngine.start` and reads it in the
/// pieces libcurl asks for: a 5 GiB upload never sits in memory. The descriptor is closed
/// when the source is dropped, which is when the transfer ends. Reads block the loop for
/// the time a disk read takes, as libcurl's default `fread` would.
final class UploadSource {
    private enum Origin {
        case bytes([UInt8])
        case file(fd: Int32)
        /// Pieces in order, each with the offset where it begins in the body.
        case segments([(start: Int64, piece: Piece)])
    }
    /// A piece of a `.segments` body: bytes, or `size` bytes of an open file.
    private enum Piece {
        case bytes([UInt8])
        case file(fd: Int32, size: Int64)

        var size: Int64 {
            switch self {
            case .bytes(let b): Int64(b.count)
            case .file(_, let size): size
            }
        }
    }
    private let origin: Origin
    /// Bytes in the body: `Content-Length`.
    let size: Int64
    private var offset: Int64 = 0

    /// A body held in memory; read in place, never copied.
    init(bytes: [UInt8]) {
        origin = .bytes(bytes)
        size = Int64(bytes.count)
    }

    /// Opens `path` for reading. Throws a `TransferFailure` (`CURLE_READ_ERROR`) naming
    /// the file and the system's reason when it cannot be opened or is not a regular file.
    init(path: String) throws {
        let (fd, size) = try Self.openRegular(path)
        origin = .file(fd: fd)
        self.size = size
    }

    /// Opens every file of `segments` (each must be a regular file); the body's size is
    /// the sum of the pieces, the files' taken now. Throws as `init(path:)` does, having
    /// closed what it opened.
    init(segments: [BodySegment]) throws {
        var pieces: [(start: Int64, piece: Piece)] = []
        var total: Int64 = 0
        do {
            for segment in segments {
                let piece: Piece
                switch segment {
                case .bytes(let b):
                    if b.isEmpty { continue }
                    piece = .bytes(b)
                case .file(let path):
                    let (fd, size) = try Self.openRegular(path)
                    piece = .file(fd: fd, size: size)
                }
                pieces.append((total, piece))
                total += piece.size
            }
        } catch {
            for case (_, .file(let fd, _)) in pieces { close(fd) }
            throw error
        }
        origin = .segments(pieces)
        size = total
    }

    private static func openRegular(_ path: String) throws -> (Int32, Int64) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw TransferFailure(CURLE_READ_ERROR, "Cannot open upload file \(path): \(reason)")
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw TransferFailure(CURLE_READ_ERROR, "Upload file \(path) is not a regular file")
        }
        return (fd, Int64(st.st_size))
    }

    deinit {
        switch origin {
        case .file(let fd): close(fd)
        case .segments(let pieces): for case (_, .file(let fd, _)) in pieces { close(fd) }
        case .bytes: break
        }
    }

    /// Copies up to `capacity` bytes from the current offset; 0 at the end; on a read
    /// error `CURL_READFUNC_ABORT`, which fails the transfer with `CURLE_ABORTED_BY_CALLBACK`.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        switch origin {
        case .bytes(let bytes):
            let n = min(capacity, Int(size - offset))
            guard n > 0 else { return 0 }
            bytes.withUnsafeBytes { src in
                guard let base = src.baseAddress else { return }  // n > 0: never empty
                buffer.copyMemory(from: base + Int(offset), byteCount: n)
            }
            offset += Int64(n)
            return n
        case .file(let fd):
            while true {
                let n = pread(fd, buffer, capacity, off_t(offset))
                if n >= 0 {
                    offset += Int64(n)
                    return n
                }
                if errno != EINTR { return Curl.readAbort }
            }
        case .segments(let pieces):
            // One piece per call (libcurl calls again for the rest): the last piece that
            // begins at or before the offset.
            guard offset < size, let (start, piece) = pieces.last(where: { $0.start <= offset }) else { return 0 }
            let within = offset - start
            let n = Int(min(Int64(capacity), piece.size - within))
            switch piece {
            case .bytes(let bytes):
                bytes.withUnsafeBytes { src in
                    guard let base = src.baseAddress else { return }  // n > 0: never empty
                    buffer.copyMemory(from: base + Int(within), byteCount: n)
                }
                offset += Int64(n)
                return n
            case .file(let fd, _):
                while true {
                    let got = pread(fd, buffer, n, off_t(within))
                    if got > 0 {
                        offset += Int64(got)
                        return got
                    }
                    // 0 before the size taken at the start: the file shrank, and what
                    // follows would land at the wrong place of a body already announced.
                    if got == 0 || errno != EINTR { return Curl.readAbort }
                }
            }
        }
    }

    /// Moves the read position (libcurl rewinds to 0 before sending the body again).
    func seek(to position: Int64) -> Bool {
        guard position >= 0, position <= size else { return false }
        offset = position
        return true
    }
}

extension TransferFailure {
    /// A failure with one of libcurl's codes and our own sentence.
    init(_ code: CURLcode, _ text: String) {
        self.init(code: Int32(code.rawValue), text: text)
    }
}
