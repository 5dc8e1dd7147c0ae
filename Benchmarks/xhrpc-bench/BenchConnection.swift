import EventLoop
import JSON

/// One client connection to xhrpcd: a Unix-socket stream, the decoder of what the server
/// writes, and an output buffer.
///
/// Outgoing calls are collected in `output` and written with one `flush()` after each
/// read has been handled, so the replies of one read turn into one write of the next
/// calls, as an efficient client would do; writing each call separately would cost the
/// client a system call per call and steal CPU from the server on this 2-core machine.
final class BenchConnection {
    let index: Int
    let stream: Stream
    private let decoder = JSONStreamDecoder()
    /// Bytes of calls queued since the last flush.
    var output: [UInt8] = []
    /// Units (requests or calls) started on this connection and not finished.
    var inFlight = 0
    /// Whether the connection was closed (by us, or because the server closed it).
    private(set) var isClosed = false

    init(index: Int, stream: Stream) {
        self.index = index
        self.stream = stream
        output.reserveCapacity(64 * 1024)
    }

    /// Starts reading. `onMessage` gets each complete JSON value the server wrote;
    /// `onProblem` gets undecodable input or the end of the stream (with a description);
    /// `afterRead` runs once after every read, when its messages have been handled.
    func start(onMessage: @escaping (JSONValue) -> Void, onProblem: @escaping (String, Bool) -> Void,
               afterRead: @escaping () -> Void) throws {
        stream.onWriteError = { error in onProblem("write failed: \(error)", true) }
        try stream.startReading { [decoder] event in
            switch event {
            case .data(let bytes):
                for e in decoder.feed(bytes) {
                    switch e {
                    case .value(let v): onMessage(v)
                    case .call(let c): onMessage(.object(c.object))  // not asked for: never comes
                    case .error(let error): onProblem("server wrote invalid JSON: \(error)", false)
                    case .tooLarge(let limit): onProblem("server message over \(limit) bytes", true)
                    }
                }
                afterRead()
            case .eof:
                onProblem("server closed the connection", true)
            case .error(let error):
                onProblem("read failed: \(error)", true)
            }
        }
    }

    /// Writes what was queued since the last flush.
    func flush() {
        guard !output.isEmpty, !isClosed else { return }
        stream.write(output)
        output.removeAll(keepingCapacity: true)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        stream.close()
    }
}

/// Building call text without going through `JSONValue` for every call: the benchmark's
/// calls are fixed templates with a number or a name spliced in, and the client should
/// cost the machine as little as possible so the server gets the CPU.
enum CallText {
    /// Appends the decimal digits of `n` (not negative).
    static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        if n < 10 {
            out.append(UInt8(48 + n))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var v = n
        withUnsafeMutableBytes(of: &digits) { d in
            while v > 0 {
                d[count] = UInt8(48 + v % 10)
                v /= 10
                count += 1
            }
            while count > 0 {
                count -= 1
                out.append(d[count])
            }
        }
    }

    /// The UTF-8 bytes of a literal piece of a template.
    static func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// The compact JSON text of a string (quoted and escaped).
    static func quoted(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        JSON.encode(.string(s), into: &out)
        return out
    }
}
