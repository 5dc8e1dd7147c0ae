// SOCK_STREAM and the other socket constants come from a header that libcurl's module
// (CCurl, through curl.h) can own: with Glibc alone, a fresh build cache sometimes
// leaves them unseen (Swift 6.3.1), so the module is imported by name.
import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import Testing
import CCurl
@testable import HTTPEngine

/// The poll of a pooled connection is left armed when libcurl stops watching it (lazy
/// disarm, `TransferEngine+Sockets.swift`): reusing the connection restarts nothing, and
/// a connection the server closes (FIN or RST) while it idles in the cache neither spins
/// the loop nor breaks the next request to that host. Neither does a paused transfer
/// whose socket has bytes waiting.
@Suite struct IdleConnectionTests {
    /// Whether `events` (POLLIN, POLLOUT) are ready on `fd` now; a hang-up or an error
    /// counts as ready, as epoll reports them whatever it was asked for.
    static func ready(_ fd: Int32, _ events: Int16) -> Bool {
        var p = pollfd(fd: fd, events: events, revents: 0)
        return Glibc.poll(&p, 1, 0) > 0
    }

    /// The engine's descriptors whose poll is armed for events that are ready now. epoll
    /// is level-triggered: each of them would wake the loop on every turn, so the loop
    /// spins. Asked of the kernel with a zero timeout, so no time window decides it.
    func spinning(_ h: Harness) -> [Int32] {
        h.engine.watches.compactMap { $0 }.filter { w in
            guard w.armed else { return false }
            var events: Int16 = 0
            if w.armedEvents.contains(.readable) { events |= Int16(POLLIN) }
            if w.armedEvents.contains(.writable) { events |= Int16(POLLOUT) }
            return IdleConnectionTests.ready(w.fd, events)
        }.map(\.fd)
    }

    func get(_ h: Harness, _ url: String) throws -> (Transfer, Recorder) {
        let (t, r) = try h.start(TransferRequest(url: url))
        h.run(seconds: 10) { r.completions > 0 }
        return (t, r)
    }

    @Test func reusedConnectionKeepsItsPollArmed() throws {
        let h = try Harness()
        let server = try IdleCloseServer(loop: h.loop)
        let (first, r1) = try get(h, server.url("/a"))
        #expect(r1.succeeded && r1.bodyText == "ok")
        let w = try #require(first.lastConnection)
        // Idle in the cache: libcurl no longer watches it, the poll is still armed.
        #expect(!w.watching && w.armed)
        // Writable while connecting and sending, then readable for the response.
        #expect(w.starts == 2)
        for i in 0..<5 {
            let (t, r) = try get(h, server.url("/b\(i)"))
            #expect(r.succeeded && r.bodyText == "ok")
            #expect(t.metrics?.connectionsOpened == 0)
            #expect(t.lastConnection === w)
        }
        #expect(w.starts == 2)
        #expect(server.accepted == 1 && server.requests == 6)
        // Idle and armed for reading only: nothing wakes the loop.
        #expect(w.armedEvents == .readable)
        #expect(spinning(h) == [])
        server.close()
        #expect(try h.finish() == [])
    }

    func serverClosesIdleConnection(reset: Bool) throws {
        let h = try Harness()
        let server = try IdleCloseServer(loop: h.loop)
        let (first, r1) = try get(h, server.url("/a"))
        #expect(r1.succeeded)
        let w = try #require(first.lastConnection)
        #expect(!w.watching && w.armed)

        server.closeConnections(reset: reset)
        // The event is seen and the poll stopped, so the closed socket cannot make the
        // loop spin; the socket stays libcurl's until it notices the connection is dead.
        #expect(h.run(seconds: 10) { !w.armed }, "the poll of the closed connection is still armed")
        #expect(spinning(h) == [])

        let (second, r2) = try get(h, server.url("/b"))
        #expect(r2.succeeded && r2.bodyText == "ok", "\(String(describing: r2.failure))")
        #expect(second.metrics?.connectionsOpened == 1)
        #expect(server.accepted == 2 && server.requests == 2)
        #expect(spinning(h) == [])
        server.close()
        #expect(try h.finish() == [])
    }

    @Test func serverClosesIdleConnection() throws {
        try serverClosesIdleConnection(reset: false)
    }

    @Test func serverResetsIdleConnection() throws {
        try serverClosesIdleConnection(reset: true)
    }

    /// Bytes that come on an idle pooled connection (here a whole second response,
    /// unasked) are never read as the answer to the next request: that connection is
    /// given up before the request is sent, and the request goes on a fresh one
    /// (`TransferEngine+PooledConnections.swift`). libcurl 7.88 alone reuses it and
    /// answers the next request with the stray response.
    @Test func bytesOnAnIdleConnectionAreNobodysAnswer() throws {
        let h = try Harness()
        let server = try IdleCloseServer(loop: h.loop)
        let (first, r1) = try get(h, server.url("/a"))
        #expect(r1.succeeded && r1.bodyText == "ok")
        let w = try #require(first.lastConnection)
        #expect(h.engine.pooledConnection(peer: .v4(0x7f00_0001), peerPort: server.port, localPort: w.localPort) === w)

        server.sendToEveryConnection("HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED")
        #expect(h.run(seconds: 10) { IdleConnectionTests.ready(w.fd, Int16(POLLIN)) })

        // A body read through the read callback, which the fresh attempt rewinds.
        let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        #expect(body.count > TransferEngine.copiedBodyLimit)
        var post = TransferRequest(method: "POST", url: server.url("/b"))
        post.body = .bytes(body)
        let (second, r2) = try h.start(post)
        h.run(seconds: 10) { r2.completions > 0 }
        let expected = "got \(body.count) \(body.reduce(0) { $0 &+ Int($1) })"
        #expect(r2.succeeded && r2.bodyText == expected, "\(String(describing: r2.failure)) \(r2.bodyText)")
        #expect(second.metrics?.connectionsOpened == 1)
        #expect(server.accepted == 2 && server.requests == 2)
        // The fresh connection is reused as usual.
        let (third, r3) = try get(h, server.url("/c"))
        #expect(r3.succeeded && r3.bodyText == "ok")
        #expect(third.metrics?.connectionsOpened == 0)
        #expect(server.accepted == 2 && server.requests == 3)
        #expect(spinning(h) == [])
        server.close()
        #expect(try h.finish() == [])
    }

    /// A paused transfer: libcurl stops watching its socket while bytes wait there. The
    /// poll fires once, is stopped, and the transfer resumes and completes byte-exact.
    @Test func pausedTransferDoesNotSpin() throws {
        let h = try Harness()
        let r = Recorder(expectingSeed: 3)
        var refused = false
        r.accept = { _ in
            if refused { return true }
            refused = true
            return false
        }
        let (t, _) = try h.start(TransferRequest(url: h.url("/bytes/1000000?seed=3")), r)
        h.run(seconds: 10) { refused }
        #expect(t.isPaused)
        // Bytes wait on the socket libcurl no longer watches, and its poll is stopped.
        let stopped = h.run(seconds: 10) {
            h.engine.watches.contains { w in
                guard let w, !w.watching else { return false }
                return !w.armed && IdleConnectionTests.ready(w.fd, Int16(POLLIN))
            }
        }
        #expect(stopped, "no stopped poll on the paused transfer's socket with bytes waiting")
        #expect(spinning(h) == [])
        t.resume()
        h.run(seconds: 10) { r.completions > 0 }
        #expect(r.succeeded)
        #expect(r.checker?.matches(count: 1_000_000) == true)
        #expect(try h.finish() == [])
    }
}

/// A loopback HTTP/1.1 server on the test's loop that answers every request with
/// `200 ok` on a keep-alive connection, and closes its connections when told: with a
/// FIN, or with a reset (`SO_LINGER` 0). Raw sockets watched by `Poll`, so the test
/// chooses exactly how a connection ends.
final class IdleCloseServer {
    let loop: Loop
    let listenFD: Int32
    let port: Int
    private var listenPoll: Poll?
    private var connections: [Int32: (poll: Poll, pending: [UInt8])] = [:]
    private(set) var accepted = 0
    private(set) var requests = 0

    struct Failure: Error, CustomStringConvertible { var description: String }

    init(loop: Loop) throws {
        self.loop = loop
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, sa, &length) == 0
            }
        }
        guard ok else {
            Glibc.close(fd)
            throw Failure(description: "bind/listen: \(errno)")
        }
        listenFD = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let poll = try Poll(loop: loop, socket: fd)
        listenPoll = poll
        try poll.start(.readable) { [unowned self] _, _ in self.acceptAll() }
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    private func acceptAll() {
        while true {
            let c = accept(listenFD, nil, nil)
            guard c >= 0 else { return }
            _ = fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK)
            guard let poll = try? Poll(loop: loop, socket: c) else {
                Glibc.close(c)
                continue
            }
            accepted += 1
            connections[c] = (poll, [])
            try? poll.start(PollEvents.readable) { [unowned self] (_: Int32, _: PollEvents) in self.readable(c) }
        }
    }

    private func readable(_ c: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { read(c, $0.baseAddress, $0.count) }
        guard n > 0 else {
            if n == 0 || (errno != EAGAIN && errno != EINTR) { drop(c, reset: false) }
            return
        }
        connections[c]?.pending.append(contentsOf: buffer[0..<n])
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while let pending = connections[c]?.pending,
              let i = pending.indices.dropLast(3).first(where: { Array(pending[$0..<$0 + 4]) == end }) {
            let length = Self.contentLength(String(decoding: pending[..<i], as: UTF8.self))
            guard pending.count >= i + 4 + length else { return }  // the rest of the body is still coming
            let body = pending[(i + 4)..<(i + 4 + length)]
            connections[c]?.pending.removeFirst(i + 4 + length)
            requests += 1
            // "ok" to a request without a body; to one with a body, its length and sum.
            let text = length == 0 ? "ok" : "got \(length) \(body.reduce(0) { $0 &+ Int($1) })"
            let reply = Array("HTTP/1.1 200 OK\r\nContent-Length: \(text.utf8.count)\r\n\r\n\(text)".utf8)
            _ = reply.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
        }
    }

    private static func contentLength(_ head: String) -> Int {
        for line in head.split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                return Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        return 0
    }

    private func drop(_ c: Int32, reset: Bool) {
        guard let entry = connections.removeValue(forKey: c) else { return }
        entry.poll.close()  // stops watching before the number can be reused
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(c, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        Glibc.close(c)
    }

    /// Writes `text` on every accepted connection, whatever it was asked.
    func sendToEveryConnection(_ text: String) {
        let bytes = Array(text.utf8)
        for c in connections.keys {
            _ = bytes.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
        }
    }

    /// Closes every accepted connection (FIN, or RST when `reset`); keeps listening.
    func closeConnections(reset: Bool) {
        for c in Array(connections.keys) { drop(c, reset: reset) }
    }

    /// Closes everything; the polls finish closing on the loop's next turn.
    func close() {
        closeConnections(reset: false)
        listenPoll?.close()
        listenPoll = nil
        Glibc.close(listenFD)
    }
}
