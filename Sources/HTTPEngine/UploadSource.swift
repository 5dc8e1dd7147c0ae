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
        origin = .file(fd: fd)
        size = Int64(st.st_size)
    }

    deinit {
        if case .file(let fd) = origin { close(fd) }
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
