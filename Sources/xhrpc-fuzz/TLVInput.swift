/// The payload of an input in origin mode (`Harness.Mode.hasOrigin`): what the client
/// sends and what the upstream answers, as type-length-value records, after
/// curl-fuzzer's format.
///
/// A record is one type byte, a two-byte big-endian length, then that many bytes. A
/// record whose length runs past the end takes what is left; a record of an unknown type
/// is skipped, so the fuzzer's mutations of a type byte are cheap to run.
///
/// - `rpc` (1): bytes the client sends. Each record is a step: the harness sends the
///   next one (and, after the last, its EOF) only once the loop has gone quiet, so
///   what the previous one started (a connect, a transfer) has run as far as it can.
/// - `response` (2): the origin's answer to the next request head it reads, on any
///   connection, in the order given; the connection stays open for another request
///   while more answers remain (keep-alive), and is half-closed after the last.
/// - `responseThenClose` (3): an answer after which the origin half-closes that
///   connection, whatever remains.
/// - `peer` (0x10 + k, k < 16): the `k`th connection the origin accepts (from 0) is a raw
///   socket peer: it sends these bytes at once, then echoes whatever it reads, and
///   answers no HTTP.
///
/// In every record, `ORIGIN` stands for the origin's `127.0.0.1:port` and `OPORT` for
/// its port alone (`substituting`), so a URL (`http://ORIGIN/x`), a redirect's
/// `Location` or `socket.create`'s `"port":OPORT` can name it.
struct TLVInput: Equatable {
    /// One answer of the origin.
    struct Response: Equatable {
        var bytes: [UInt8]
        /// Whether the origin half-closes the connection after writing it.
        var closes: Bool
    }

    enum RecordType: UInt8 {
        case rpc = 1
        case response = 2
        case responseThenClose = 3
        /// The first of the 16 peer types.
        case peer = 0x10
    }

    /// The highest connection number a peer record can name, plus one.
    static let peerSlots = 16

    /// The `rpc` records, in order.
    var rpc: [[UInt8]] = []
    var responses: [Response] = []
    /// The raw-peer connections, by the order in which the origin accepts them.
    var peers: [Int: [UInt8]] = [:]

    /// Reads the records of `bytes`; never fails (see the type's documentation).
    init(parsing bytes: UnsafeRawBufferPointer) {
        var at = 0
        while at + 3 <= bytes.count {
            let type = bytes[at]
            let length = Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let start = at + 3
            let end = min(start + length, bytes.count)
            let value = Array(bytes[start..<end])
            at = end
            switch type {
            case RecordType.rpc.rawValue: rpc.append(value)
            case RecordType.response.rawValue: responses.append(Response(bytes: value, closes: false))
            case RecordType.responseThenClose.rawValue: responses.append(Response(bytes: value, closes: true))
            case RecordType.peer.rawValue..<RecordType.peer.rawValue + UInt8(TLVInput.peerSlots):
                peers[Int(type - RecordType.peer.rawValue)] = value
            default: continue
            }
        }
    }

    init(rpc: [[UInt8]], responses: [Response], peers: [Int: [UInt8]]) {
        self.rpc = rpc
        self.responses = responses
        self.peers = peers
    }

    /// The same input with `ORIGIN` and `OPORT` replaced by the origin's address and port.
    func substituting(port: Int) -> TLVInput {
        let origin = Array("127.0.0.1:\(port)".utf8), portText = Array("\(port)".utf8)
        func replace(_ bytes: [UInt8]) -> [UInt8] {
            TLVInput.replacing(Array("OPORT".utf8), with: portText,
                               in: TLVInput.replacing(Array("ORIGIN".utf8), with: origin, in: bytes))
        }
        return TLVInput(rpc: rpc.map(replace),
                        responses: responses.map { Response(bytes: replace($0.bytes), closes: $0.closes) },
                        peers: peers.mapValues(replace))
    }

    /// The client's bytes, and the end of each step in them.
    var clientBytes: (bytes: [UInt8], stepEnds: [Int]) {
        var bytes: [UInt8] = [], ends: [Int] = []
        for step in rpc where !step.isEmpty {
            bytes += step
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    /// `bytes` with every occurrence of `pattern` (left to right, not overlapping)
    /// replaced by `replacement`.
    static func replacing(_ pattern: [UInt8], with replacement: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        guard let first = pattern.first, bytes.count >= pattern.count else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == first, i + pattern.count <= bytes.count, bytes[i..<i + pattern.count].elementsEqual(pattern) {
                out += replacement
                i += pattern.count
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }
}
