import EventLoop
import Foundation
import Glibc
import HTTPEngine

/// The upstream of an input in origin mode: a TCP listener on 127.0.0.1 (a port of
/// the kernel's choice) on the harness's own loop, answering each request head it reads
/// with the input's next `TLVInput.Response`, or acting as a raw socket peer on the
/// connections a `peer` record names. It never waits for anything but its peer's bytes,
/// so every input runs in loop turns, not seconds.
///
/// Bounded: an answer is written whole at once; a connection with nothing more to say
/// is half-closed (its peer reads EOF); when the whole loop is quiet while a connection
/// of the origin is still open for writing (`Pacing`), the origin half-closes it
/// (`breakStall`) — that is what ends a body delimited by the close, a truncated body, a TLS handshake
/// the origin cannot speak, or a raw peer's exchange. The origin closes a connection
/// when its peer does, and everything in `close`.
final class Origin {
    let port: Int
    private let listener: Listener
    private var responses: [TLVInput.Response] = []
    private var nextResponse = 0
    private var peers: [Int: [UInt8]] = [:]
    private var connections: [Connection] = []

    /// More connections than any input needs (a redirect chain opens one per hop at
    /// most): the rest are closed at once.
    static let maxConnections = 32
    /// A request head longer than this is answered as if it had ended.
    static let maxHeadBytes = 64 << 10

    private final class Connection {
        let stream: EventLoop.Stream
        /// A raw socket peer: echoes, answers no HTTP.
        let isPeer: Bool
        /// Request bytes read and not yet matched.
        var pending: [UInt8] = []
        /// Bytes of the current request's body still to skip (Content-Length).
        var bodyLeft = 0
        /// The current request's body is chunked: skip it up to its last chunk.
        var inChunkedBody = false
        var writeShut = false
        var closed = false

        init(stream: EventLoop.Stream, isPeer: Bool) {
            self.stream = stream
            self.isPeer = isPeer
        }
    }

    init(loop: Loop) {
        do {
            listener = try Listener.tcp(loop: loop, host: "127.0.0.1", port: 0)
        } catch {
            preconditionFailure("cannot bind the origin: \(error)")
        }
        guard let port = listener.boundPort else { preconditionFailure("the origin has no port") }
        self.port = port
    }

    /// Starts accepting, with the input's answers and peers (already substituted).
    func start(_ input: TLVInput) {
        responses = input.responses
        peers = input.peers
        do {
            try listener.listen { result in self.accepted(result) }
        } catch {
            preconditionFailure("the origin cannot listen: \(error)")
        }
    }

    /// The egress policy of an input with this origin: the harness's, plus this
    /// listener's address and port and nothing else. Check 1 then admits the literal
    /// `127.0.0.1:port` only (no name is allowed but `fuzz.invalid`, which is denied),
    /// and the deny ranges refuse every other IPv4 and every IPv6 address at connect
    /// time too, should anything get there.
    func egressPolicy() -> EgressPolicy {
        do {
            let allow = try EgressPolicy.Pattern(parsing: "127.0.0.1:\(port)")
            return EgressPolicy(allowPatterns: Harness.egressPolicy.allowPatterns + [allow],
                                denyPatterns: Origin.denyAllButLoopbackOne)
        } catch {
            preconditionFailure("the origin's pattern is valid: \(error)")
        }
    }

    /// `fuzz.invalid`, every IPv6 address, and every IPv4 address but 127.0.0.1: for
    /// each bit of 127.0.0.1, the range of the addresses that share the bits before it
    /// and differ in it.
    static let denyAllButLoopbackOne: [EgressPolicy.Pattern] = {
        let one: UInt32 = 0x7F00_0001
        var texts = ["fuzz.invalid", "::/0"]
        for bits in 1...32 {
            let flipped = one ^ (1 << (32 - bits))
            let base = bits == 32 ? flipped : flipped & ~(UInt32.max >> bits)
            let dotted = (0..<4).map { String(base >> (24 - 8 * $0) & 0xFF) }.joined(separator: ".")
            texts.append("\(dotted)/\(bits)")
        }
        do {
            return try texts.map { try EgressPolicy.Pattern(parsing: $0) }
        } catch {
            preconditionFailure("the origin's deny patterns are valid: \(error)")
        }
    }()

    private func accepted(_ result: Result<EventLoop.Stream, UVError>) {
        guard case .success(let stream) = result else { return }
        guard connections.count < Origin.maxConnections else {
            stream.close()
            return
        }
        let peerBytes = peers[connections.count]
        let c = Connection(stream: stream, isPeer: peerBytes != nil)
        connections.append(c)
        stream.onWriteError = { [unowned self] _ in self.close(c) }
        if let peerBytes, !peerBytes.isEmpty { stream.write(peerBytes) }
        do {
            try stream.startReading { [unowned self] event in
                switch event {
                case .data(let bytes): self.received(bytes, on: c)
                case .eof, .error: self.close(c)
                }
            }
        } catch {
            close(c)
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer, on c: Connection) {
        if c.isPeer {
            if !c.writeShut { c.stream.write(bytes) }
            return
        }
        c.pending += bytes
        while !c.pending.isEmpty {
            if c.bodyLeft > 0 {
                let n = min(c.bodyLeft, c.pending.count)
                c.pending.removeFirst(n)
                c.bodyLeft -= n
                continue
            }
            if c.inChunkedBody {
                // The last chunk ("0", no extension, no trailer) ends the body.
                guard let end = Origin.find(Origin.lastChunk, in: c.pending,
                                            where: { $0 == 0 || c.pending[$0 - 1] == UInt8(ascii: "\n") }) else {
                    if c.pending.count > Origin.lastChunk.count { c.pending.removeFirst(c.pending.count - Origin.lastChunk.count) }
                    return
                }
                c.pending.removeFirst(end + Origin.lastChunk.count)
                c.inChunkedBody = false
                continue
            }
            guard let end = Origin.find(Origin.headEnd, in: c.pending, where: { _ in true }) else {
                if c.pending.count > Origin.maxHeadBytes {
                    c.pending.removeAll()
                    answer(c)
                }
                return
            }
            (c.bodyLeft, c.inChunkedBody) = Origin.body(of: c.pending[..<end])
            c.pending.removeFirst(end + Origin.headEnd.count)
            answer(c)
        }
    }

    /// The next answer, or the half-close when there is none.
    private func answer(_ c: Connection) {
        guard !c.writeShut else { return }
        guard nextResponse < responses.count else {
            shut(c)
            return
        }
        let response = responses[nextResponse]
        nextResponse += 1
        if !response.bytes.isEmpty { c.stream.write(response.bytes) }
        if response.closes || nextResponse == responses.count { shut(c) }
    }

    private func shut(_ c: Connection) {
        guard !c.writeShut, !c.closed else { return }
        c.writeShut = true
        c.stream.shutdown { _ in }
    }

    private func close(_ c: Connection) {
        guard !c.closed else { return }
        c.closed = true
        c.stream.close()
    }

    /// Whether a connection is still open for writing: the origin may be what the
    /// server waits for.
    var holdsConnectionOpen: Bool { connections.contains { !$0.closed && !$0.writeShut } }

    /// Half-closes every connection still open for writing (`Pacing`).
    func breakStall() {
        for c in connections where !c.closed && !c.writeShut { shut(c) }
    }

    /// Stops listening and closes every connection.
    func close() {
        listener.close()
        for c in connections { close(c) }
    }

    static let headEnd = Array("\r\n\r\n".utf8)
    static let lastChunk = Array("0\r\n\r\n".utf8)

    /// The first index where `pattern` occurs in `bytes` and `accept` holds.
    static func find(_ pattern: [UInt8], in bytes: [UInt8], where accept: (Int) -> Bool) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        for i in 0...(bytes.count - pattern.count)
        where bytes[i] == pattern[0] && bytes[i..<i + pattern.count].elementsEqual(pattern) && accept(i) {
            return i
        }
        return nil
    }

    /// How a request head says its body is framed: a Content-Length to skip, or chunked.
    static func body(of head: ArraySlice<UInt8>) -> (length: Int, chunked: Bool) {
        var length = 0, chunked = false
        for line in head.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self).lowercased()
            if text.hasPrefix("content-length:") {
                length = Int(text.dropFirst("content-length:".count).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            } else if text.hasPrefix("transfer-encoding:"), text.contains("chunked") {
                chunked = true
            }
        }
        return (max(0, length), chunked)
    }
}
