#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Cuts a byte stream into lines at each `\n`, keeping an unfinished last line until the
/// bytes that end it arrive. A line that came whole within one piece is handed over in
/// place; only one that spans pieces is copied. Used where a stream is framed by lines:
/// the WebSocket transport (one text frame per JSON-RPC message) and the benchmark's
/// client (replies checked by their bytes).
public struct LineSplitter {
    /// The start of a line the last piece ended in.
    public private(set) var partial: [UInt8] = []

    public init() {}

    /// Hands each line `bytes` completes to `line`, without its newline, in order, and
    /// keeps what follows the last newline.
    public mutating func split(_ bytes: UnsafeRawBufferPointer, _ line: (UnsafeRawBufferPointer) -> Void) {
        guard let base = bytes.baseAddress else { return }
        var start = 0
        while start < bytes.count, let nl = memchr(base + start, 0x0A, bytes.count - start) {
            let end = base.distance(to: UnsafeRawPointer(nl))
            let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            if partial.isEmpty {
                line(piece)
            } else {
                partial.append(contentsOf: piece)
                partial.withUnsafeBytes { line($0) }
                partial.removeAll(keepingCapacity: true)
            }
            start = end + 1
        }
        partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
    }

    /// Forgets an unfinished line.
    public mutating func reset() {
        partial = []
    }
}
