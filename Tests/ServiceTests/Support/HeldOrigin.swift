import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP origin on 127.0.0.1 for one request, answered only when the test says so:
/// it reads the request's head (`waitForRequest`), holds the answer until `release()`,
/// writes it, and then reads until the client closes the connection (`waitClosed`).
/// That close is what tells a test that the client has given the connection up, so
/// nothing of the held answer can reach it any more. Every wait is bounded (30 s on the
/// origin's thread); `MSG_NOSIGNAL` keeps a write into a closed connection from raising
/// SIGPIPE in the test process.
final class HeldOrigin: @unchecked Sendable {
    let port: Int
    private let listenFD: Int32
    private let requestArrived = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)
    private let connectionClosed = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    struct Failure: Error, CustomStringConvertible { var description: String }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(fd)
            throw Failure(description: "bind/listen on 127.0.0.1: errno \(errno)")
        }
        listenFD = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in
            serve()
            finished.signal()
        }
        thread.start()
    }

    var url: String { "http://127.0.0.1:\(port)/held" }

    /// Whether the request's head has arrived within `timeout` s.
    func waitForRequest(timeout: Double = 10) -> Bool {
        requestArrived.wait(timeout: .now() + timeout) == .success
    }

    /// Lets the held answer go.
    func release() { released.signal() }

    /// Whether the client closed the connection within `timeout` s.
    func waitClosed(timeout: Double = 10) -> Bool {
        connectionClosed.wait(timeout: .now() + timeout) == .success
    }

    /// Releases the answer, stops listening and waits (bounded) for the thread.
    func close() {
        release()
        shutdown(listenFD, Int32(SHUT_RDWR))
        _ = finished.wait(timeout: .now() + 35)
        Glibc.close(listenFD)
    }

    /// Waits up to `ms` for `fd` to be readable.
    private func readable(_ fd: Int32, ms: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, ms) == 1
    }

    private func serve() {
        guard readable(listenFD, ms: 30_000) else { return }
        let c = accept(listenFD, nil, nil)
        guard c >= 0 else { return }
        defer { Glibc.close(c) }
        var head: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while !(head.count >= 4 && Array(head.suffix(4)) == end) {
            guard head.count < 65536, readable(c, ms: 30_000) else { return }
            let n = read(c, &chunk, 1)  // byte by byte: nothing past the head is taken
            guard n == 1 else { return }
            head.append(chunk[0])
        }
        requestArrived.signal()
        _ = released.wait(timeout: .now() + 30)
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale".utf8)
        _ = answer.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        for _ in 0..<1000 {
            guard readable(c, ms: 30_000) else { return }
            if chunk.withUnsafeMutableBytes({ read(c, $0.baseAddress, $0.count) }) <= 0 {
                connectionClosed.signal()
                return
            }
        }
    }
}
