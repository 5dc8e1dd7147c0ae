#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import JSON
@testable import JSONRPC
import Logging
import Testing

/// Connections of a server on a real loop, each to a client socket of a socket pair,
/// with two methods: `tick`, that records the ids it ran and returns null, and `text`,
/// whose result is `{"text": …}` of `params.bytes` letters `x`, written in pieces
/// straight into the response (as a body read is).
final class ConnectionPeer {
    let loop: Loop
    let coalescer: WriteCoalescer
    let connections: [RPCConnection]
    let clients: [Int32]
    /// The ids of the calls run, per connection, in the order they ran.
    final class Ran { var ids: [[Int64]] = [] }
    let ran = Ran()

    init(connections count: Int, limits: ConnectionLimits = ConnectionLimits()) throws {
        loop = try Loop()
        coalescer = try WriteCoalescer(loop: loop)
        let registry = MethodRegistry()
        let ran = ran
        ran.ids = Array(repeating: [], count: count)
        var made: [RPCConnection] = []
        var clients: [Int32] = []
        // Identities, not the connections: the method, held by each connection
        // through its dispatcher, must not hold them back (a cycle LeakSanitizer sees).
        var identities: [ObjectIdentifier] = []
        let indexOf: (RPCPeer) -> Int = { peer in identities.firstIndex(of: ObjectIdentifier(peer)) ?? -1 }
        registry.registerAnyParams("tick") { call in
            ran.ids[indexOf(call.peer)].append(call.id?.int64Value ?? -1)
            return .result(.null)
        }
        registry.registerAnyParams("text") { call in
            let count = Int(call.rawParams?["bytes"]?.int64Value ?? 0)
            let piece = [UInt8](repeating: UInt8(ascii: "x"), count: 1000)
            call.reply { o in
                o.add(JSONKey("text"), unescapedStringOfCount: count) { append in
                    piece.withUnsafeBufferPointer { p in
                        for start in stride(from: 0, to: count, by: p.count) {
                            append(UnsafeBufferPointer(rebasing: p[..<min(p.count, count - start)]))
                        }
                    }
                }
            }
            return .answered
        }
        let dispatcher = Dispatcher(registry: registry)
        for i in 0..<count {
            var fds: [Int32] = [-1, -1]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
            let stream = try Stream.openPipe(loop: loop, fd: fds[0])
            let c = RPCConnection(id: UInt64(i), stream: stream, dispatcher: dispatcher, limits: limits,
                                  logger: Logger(label: "test"), coalescer: coalescer)
            try c.start()
            made.append(c)
            identities.append(ObjectIdentifier(c))
            clients.append(fds[1])
        }
        connections = made
        self.clients = clients
    }

    /// One tick call with id `id`, and a newline.
    static func tick(_ id: Int) -> [UInt8] {
        Array("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"tick\"}\n".utf8)
    }

    /// One text call with id `id` for a text of `bytes` bytes, and a newline.
    static func text(_ id: Int, bytes: Int) -> [UInt8] {
        Array("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"text\",\"params\":{\"bytes\":\(bytes)}}\n".utf8)
    }

    /// Writes `count` tick calls (ids 0..<count) on client `i` in one write.
    func send(_ count: Int, on i: Int) {
        write((0..<count).flatMap { Self.tick($0) }, on: i)
    }

    /// Writes `bytes` on client `i` in one write.
    func write(_ bytes: [UInt8], on i: Int) {
        let n = bytes.withUnsafeBytes { Glibc.write(clients[i], $0.baseAddress, $0.count) }
        #expect(n == bytes.count)
    }

    /// What client `i` has received: the replies so far, and whether the server closed.
    struct Received {
        var replies: [JSONValue] = []
        var closed = false
        /// Every byte received, newlines included.
        var bytes = 0
    }

    /// Runs the loop (at most `turns` times) until client `i` has `count` replies or
    /// the server has closed the connection, and returns what it received.
    func receive(_ count: Int, on i: Int, turns: Int = 10_000) -> Received {
        let decoder = JSONStreamDecoder()
        var got = Received()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var turn = 0
        while turn < turns, got.replies.count < count, !got.closed {
            turn += 1
            loop.runNoWait()
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(clients[i], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n == 0 { got.closed = true }
                guard n > 0 else { break }
                got.bytes += n
                for event in decoder.feed(Array(buffer[..<n])) {
                    if case .value(let v) = event { got.replies.append(v) } else { Issue.record("bad reply: \(event)") }
                }
            }
        }
        return got
    }

    /// Closes everything, the loop last (it fails, naming them, if handles are left).
    func close() throws {
        for c in connections { c.close(reason: nil) }
        coalescer.close()
        for fd in clients { _ = Glibc.close(fd) }
        for _ in 0..<10 { loop.runNoWait() }
        try loop.close()
    }
}
