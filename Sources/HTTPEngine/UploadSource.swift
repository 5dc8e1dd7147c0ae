#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CCurl

/// A request body that libcurl pulls through the read callback, with a seek so libcurl
/// can rewind it (a 307/308 redirect or an auth retry sends the body again).
///
/// `.file` reads the descriptor of an `UploadFile` (opened and checked by whoever built
/// the request) in the pieces libcurl asks for: a 5 GiB upload never sits in memory.
/// The source holds the file while the transfer runs; the file's owner closes it. Reads
/// block the loop for the time a disk read takes, as libcurl's default `fread` would.
final class UploadSource {
    private enum Origin {
        case bytes([UInt8])
        case file(UploadFile)
        /// Pieces in order, each with the offset where it begins in the body.
        case segments([(start: Int64, piece: Piece)])
    }
    /// A piece of a `.segments` body: bytes, or `size` bytes of an open file.
    private enum Piece {
        case bytes([UInt8])
        case file(UploadFile, size: Int64)

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

    /// Sends `file`, its size taken now. Throws a `TransferFailure` (`CURLE_READ_ERROR`)
    /// when it is not a regular file.
    init(file: UploadFile) throws {
        size = try Self.regularSize(file)
        origin = .file(file)
    }

    /// Sends `segments` in order; the body's size is the sum of the pieces, the files'
    /// taken now. Throws as `init(file:)` does.
    init(segments: [BodySegment]) throws {
        var pieces: [(start: Int64, piece: Piece)] = []
        var total: Int64 = 0
        for segment in segments {
            let piece: Piece
            switch segment {
            case .bytes(let b):
                if b.isEmpty { continue }
                piece = .bytes(b)
            case .file(let file):
                piece = .file(file, size: try Self.regularSize(file))
            }
            pieces.append((total, piece))
            total += piece.size
        }
        origin = .segments(pieces)
        size = total
    }

    private static func regularSize(_ file: UploadFile) throws -> Int64 {
        var st = stat()
        guard fstat(file.descriptor, &st) == 0 else {
            let reason = String(cString: strerror(errno))
            throw TransferFailure(CURLE_READ_ERROR, "Cannot read upload file \(file.name): \(reason)")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw TransferFailure(CURLE_READ_ERROR, "Upload file \(file.name) is not a regular file")
        }
        return Int64(st.st_size)
    }

    /// Why `read` aborted the transfer, when it was not a read error of the system's
    /// (`TransferEngine.complete` reports it instead of libcurl's "aborted by callback").
    private(set) var failure: String?

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
        case .file(let file):
            // Never past the size announced in Content-Length, and never short of it: a
            // 0 before it means the file shrank, and libcurl would take it for the end of
            // a body the server still waits for (the request stayed in SENT for ever).
            let wanted = Int(min(Int64(capacity), size - offset))
            guard wanted > 0 else { return 0 }
            while true {
                let n = pread(file.descriptor, buffer, wanted, off_t(offset))
                if n > 0 {
                    offset += Int64(n)
                    return n
                }
                if n == 0 {
                    failure = "Upload file \(file.name) shrank while it was sent: \(offset) of the \(size) bytes announced were read"
                    return Curl.readAbort
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
            case .file(let file, _):
                while true {
                    let got = pread(file.descriptor, buffer, n, off_t(within))
                    if got > 0 {
                        offset += Int64(got)
                        return got
                    }
                    // 0 before the size taken at the start: the file shrank, and what
                    // follows would land at the wrong place of a body already announced.
                    if got == 0 {
                        failure = "Upload file \(file.name) shrank while it was sent: \(within) of its \(piece.size) bytes were read"
                        return Curl.readAbort
                    }
                    if errno != EINTR { return Curl.readAbort }
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
