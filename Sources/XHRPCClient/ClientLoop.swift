#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import Foundation
import JSON
import SecureStream

/// The client's I/O: a libuv loop on a thread of its own carrying one connection, the
/// same `Stream` and `TLSStream` the server runs on. Other threads reach it only by
/// posting jobs (`post`), which the loop runs in order after an `AsyncWakeup`.
///
/// What crosses threads, and how:
/// - jobs, into `jobs` under `lock`, then `wakeup.send()`;
/// - answers, by resuming the `CheckedContinuation` a caller waits on (registered in
///   `waiters` under `lock` before its request is posted, so no answer can beat it);
/// - notifications, by yielding to an `AsyncStream` continuation.
/// Everything else (`stream`, `decoder`) is touched on the loop thread only.
final class ClientLoop: @unchecked Sendable {
    private let loop: Loop
    private var wakeup: AsyncWakeup?
    private var stream: (any ByteStream)?
    private let decoder = JSONStreamDecoder()

    private let lock = NSLock()
    private var jobs: [() -> Void] = []
    /// Callers waiting for an answer, by request id (a batch: every id of it maps to the
    /// same waiter).
    private var waiters: [Int64: Waiter] = [:]
    private var ended: String?
    private let notificationSink: AsyncStream<ServerNotification>.Continuation

    final class Waiter: @unchecked Sendable {
        let continuation: CheckedContinuation<JSONValue, Error>
        init(_ c: CheckedContinuation<JSONValue, Error>) { continuation = c }
    }

    init(notifications: AsyncStream<ServerNotification>.Continuation) throws {
        // libuv writes with write(2): a server that closed first would otherwise end the
        // whole program with SIGPIPE. Ignored process-wide, once, as swift-nio does on
        // Linux; the failed write is reported as the connection's end instead.
        ClientLoop.ignoreSIGPIPE
        loop = try Loop()
        notificationSink = notifications
        wakeup = try AsyncWakeup(loop: loop) { [unowned self] in runJobs() }
        // The thread holds the loop, not this object: a thread that held its owner
        // would keep both alive for ever. Jobs hold this object until they have run.
        let owned = LoopOwnership(loop)
        let thread = Thread {
            owned.loop.run()
            try? owned.loop.close()
        }
        thread.name = "xhrpc-client"
        thread.start()
    }

    // MARK: Any thread

    /// Runs `job` on the loop thread, after the jobs posted before it; once the
    /// connection has ended, drops it (nothing would ever run it, and the closure would
    /// keep this object alive through `jobs`).
    func post(_ job: @escaping () -> Void) {
        lock.lock()
        guard ended == nil else {
            lock.unlock()
            return
        }
        jobs.append(job)
        lock.unlock()
        wakeup?.sender.send()
    }

    /// Registers a waiter for `ids` and sends `bytes`; the waiter is resumed with the
    /// answer (an object, or an array for a batch) or with the connection's end.
    func send(_ bytes: [UInt8], awaiting ids: [Int64]) async throws -> JSONValue {
        try await withCheckedThrowingContinuation { c in
            let waiter = Waiter(c)
            lock.lock()
            if let why = ended {
                lock.unlock()
                c.resume(throwing: XHRPCError.connection(why))
                return
            }
            for id in ids { waiters[id] = waiter }
            lock.unlock()
            post { [self] in write(bytes) }
        }
    }

    /// Sends bytes that expect no answer (notifications).
    func sendWithoutAnswer(_ bytes: [UInt8]) {
        post { [self] in write(bytes) }
    }

    /// Closes the connection and stops the loop; waiting callers get a connection error.
    func shutdown() {
        post { [self] in end("the client closed the connection") }
    }

    // MARK: Loop thread

    private func runJobs() {
        lock.lock()
        let due = jobs
        jobs = []
        lock.unlock()
        for job in due { job() }
    }

    /// Connects to `endpoint`; `done` runs on the loop thread with nil or the failure.
    func connect(_ endpoint: Endpoint, _ done: @escaping (XHRPCError?) -> Void) {
        let connected: (Result<EventLoop.Stream, UVError>) -> Void = { [self] result in
            switch result {
            case .failure(let e):
                done(.connection("cannot connect to \(endpoint): \(e)"))
                end("not connected")
            case .success(let s):
                do {
                    if case let .tls(host, _, caFile, serverName, _) = endpoint {
                        let context = try caFile.map { try TLSContext(trusting: $0) } ?? TLSContext.trustingSystemCAs()
                        stream = try TLSStream(wrapping: s, context: context, serverName: serverName ?? host)
                    } else {
                        stream = s
                    }
                    try stream?.startReading { [unowned self] event in received(event) }
                    done(nil)
                } catch {
                    s.close()
                    done(.connection("cannot start with \(endpoint): \(error)"))
                    end("not connected")
                }
            }
        }
        switch endpoint {
        case .unix(let path):
            EventLoop.Stream.connectPipe(loop: loop, path: path ?? Endpoint.defaultSocketPath, connected)
        case .tcp(let host, let port, _), .tls(let host, let port, _, _, _):
            guard let address = ClientLoop.resolve(host) else {
                done(.connection("cannot resolve \(host)"))
                end("not connected")
                return
            }
            EventLoop.Stream.connectTCP(loop: loop, host: address, port: port, connected)
        }
    }

    private func write(_ bytes: [UInt8]) {
        guard let stream else { return }
        stream.write(bytes)
    }

    private func received(_ event: EventLoop.Stream.ReadEvent) {
        switch event {
        case .data(let bytes):
            handle(decoder.feed(bytes))
        case .eof:
            handle(decoder.finish())
            end("the server closed the connection")
        case .error(let e):
            end("the connection failed: \(e)")
        }
    }

    private func handle(_ events: [JSONStreamEvent]) {
        for event in events {
            switch event {
            case .value(let v): deliver(v)
            case .call(let envelope): deliver(.object(envelope.object))  // not asked for: never comes
            case .error(let e): end("the server sent something that is not JSON: \(e)")
            case .tooLarge: end("the server sent a message too large to read")
            }
        }
    }

    /// An answer resumes its waiter; a notification goes to the stream of them; an
    /// error with id null (a refused connection, a parse error) ends every waiter.
    private func deliver(_ message: JSONValue) {
        if case .array(let items) = message {
            let ids = items.compactMap { $0["id"]?.int64Value }
            lock.lock()
            let waiter = ids.lazy.compactMap { self.waiters[$0] }.first
            for id in ids { waiters[id] = nil }
            lock.unlock()
            waiter?.continuation.resume(returning: message)
            return
        }
        if let method = message["method"]?.stringValue, message["id"] == nil {
            notificationSink.yield(ServerNotification(method: method, params: message["params"] ?? .null))
            return
        }
        guard let id = message["id"]?.int64Value else {
            if let e = message["error"] { end(XHRPCError(errorObject: e).description) }
            return
        }
        lock.lock()
        let waiter = waiters.removeValue(forKey: id)
        lock.unlock()
        waiter?.continuation.resume(returning: message)
    }

    /// Ends the connection once: every waiter fails with `why`, the notifications end,
    /// the stream and the wakeup close, and the loop thread returns.
    private func end(_ why: String) {
        lock.lock()
        guard ended == nil else { lock.unlock(); return }
        ended = why
        let waiting = waiters
        waiters = [:]
        jobs = []
        lock.unlock()
        var resumed = Set<ObjectIdentifier>()
        for w in waiting.values where resumed.insert(ObjectIdentifier(w)).inserted {
            w.continuation.resume(throwing: XHRPCError.connection(why))
        }
        notificationSink.finish()
        stream?.close()
        stream = nil
        wakeup?.close()
    }

    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// An IP literal for `host`: itself when it is one, else the first address the
    /// system resolves it to.
    static func resolve(_ host: String) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        guard getnameinfo(first.pointee.ai_addr, first.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0,
                          NI_NUMERICHOST) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The loop, handed to its thread. Unchecked: the thread is the only one that runs or
/// closes it, and the other threads touch it only through the `AsyncWakeup` door.
private final class LoopOwnership: @unchecked Sendable {
    let loop: Loop
    init(_ loop: Loop) { self.loop = loop }
}
