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
    /// The ids of calls sent and not answered yet, oldest first, for a workload that
    /// matches replies to calls by order (`InfoWorkload`).
    var sentIDs = TurnQueue<Int>()
    /// Whether the connection was closed (by us, or because the server closed it).
    private(set) var isClosed = false

    init(index: Int, stream: Stream) {
        self.index = index
        self.stream = stream
        output.reserveCapacity(64 * 1024)
    }

    /// How a workload judges what the server writes.
    enum Replies {
        /// Each JSON value, decoded.
        case value((JSONValue, BenchConnection) -> UnitOutcome)
        /// Each line (without its newline) as bytes, not decoded: for replies whose text is
        /// known but for a few values, where decoding would cost the client more than the
        /// server spends answering (`InfoWorkload`). The server ends every message with a
        /// newline and escapes the ones inside strings.
        case line((UnsafeRawBufferPointer, BenchConnection) -> UnitOutcome)
    }

    /// The longest line `Replies.line` waits for before it gives up on the connection.
    static let maxLine = 1 << 20

    /// Starts reading. `onOutcome` gets what `replies` made of each message the server
    /// wrote; `onProblem` gets undecodable input or the end of the stream (with a
    /// description); `afterRead` runs once after every read, when its messages have been
    /// handled.
    func start(replies: Replies, onOutcome: @escaping (UnitOutcome) -> Void,
               onProblem: @escaping (String, Bool) -> Void, afterRead: @escaping () -> Void) throws {
        stream.onWriteError = { error in onProblem("write failed: \(error)", true) }
        try stream.startReading { [decoder, unowned self] event in
            switch event {
            case .data(let bytes):
                switch replies {
                case .value(let judge):
                    for e in decoder.feed(bytes) {
                        switch e {
                        case .value(let v): onOutcome(judge(v, self))
                        case .call(let c): onOutcome(judge(.object(c.object), self))  // not asked for: never comes
                        case .error(let error): onProblem("server wrote invalid JSON: \(error)", false)
                        case .tooLarge(let limit): onProblem("server message over \(limit) bytes", true)
                        }
                    }
                case .line(let judge):
                    lines.split(bytes) { onOutcome(judge($0, self)) }
                    if lines.partial.count > BenchConnection.maxLine {
                        onProblem("server line over \(BenchConnection.maxLine) bytes", true)
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

    /// The replies, one per line (`Replies.line`).
    private var lines = LineSplitter()

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
