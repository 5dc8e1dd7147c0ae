import EventLoop
import HTTPEngine
import WebSocket

/// One client of the operations listener: reads one request head, hands it to the
/// server's `respond`, writes the answer with `Connection: close`, then shuts its write
/// side down and closes when the client closes. Closing at once could reset the
/// connection while the client still sends (a head over the limit), and a reset may
/// throw away the answer before the client reads it (RFC 9112 §9.6), so what the client
/// sends after the head is read and dropped until its end of input. Everything runs on
/// the loop and nothing waits: the head is bounded (`HTTPRequestHead.parse`'s limit),
/// and one deadline, from accept to close, ends a client that sends its head too slowly,
/// does not read its answer or does not close.
final class OperationsConnection {
    /// What the server answers.
    struct Response {
        var status: Int
        var body: [UInt8]
        var contentType = "text/plain; charset=utf-8"
        var extraHeaders: [(String, String)] = []
    }

    let id: UInt64
    private let stream: EventLoop.Stream
    private let deadline: EventLoop.Timer?
    private var received: [UInt8] = []
    private var answered = false
    private var closed = false
    /// Told once, when the connection has closed.
    var onClose: ((OperationsConnection) -> Void)?

    init(id: UInt64, stream: EventLoop.Stream, loop: Loop, timeoutMs: UInt64) {
        self.id = id
        self.stream = stream
        deadline = try? EventLoop.Timer(loop: loop)
        deadline?.start(timeout: timeoutMs) { [weak self] in self?.close() }
    }

    /// Starts reading; `respond` makes the answer to a complete head, or returns nil when
    /// it took the connection over with `handOver()` (the `/rpc` WebSocket upgrade).
    func start(respond: @escaping (HTTPRequestHead) -> Response?) {
        do {
            try stream.startReading { [weak self] event in self?.read(event, respond) }
        } catch {
            close()
        }
        stream.onWriteError = { [weak self] _ in self?.close() }
    }

    private func read(_ event: EventLoop.Stream.ReadEvent, _ respond: (HTTPRequestHead) -> Response?) {
        switch event {
        case .data(let bytes):
            guard !answered else { return }  // after the head: dropped
            received.append(contentsOf: bytes)
            switch HTTPRequestHead.parse(received) {
            case .needMore:
                return
            case .tooLarge:
                answer(Response(status: 431, body: Array("request head too large\n".utf8)), head: false)
            case .malformed:
                answer(Response(status: 400, body: Array("bad request\n".utf8)), head: false)
            case .complete(let head):
                guard let response = respond(head) else { return }
                answer(response, head: head.method == "HEAD")
            }
        case .eof, .error:
            close()
        }
    }

    /// Writes the response (only its head for HEAD) and closes once it is out.
    private func answer(_ r: Response, head: Bool) {
        answered = true
        received = []
        var text = "HTTP/1.1 \(r.status) \(Self.reason(r.status))\r\n"
        text += "Content-Type: \(r.contentType)\r\nContent-Length: \(r.body.count)\r\n"
        text += "Cache-Control: no-store\r\nConnection: close\r\n"
        for (name, value) in r.extraHeaders { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        stream.write(Array(text.utf8))
        if !head { stream.write(r.body) }
        // The shutdown goes out after the answer; the client's end of input closes.
        stream.shutdown { [weak self] error in if error != nil { self?.close() } }
    }

    /// Gives the stream, and every byte read from it so far (the complete head and what
    /// followed), to a new owner: this connection stops reading and its deadline, leaves
    /// the stream open, and counts as closed (`onClose` runs). Only while answering a head.
    func handOver() -> (stream: EventLoop.Stream, alreadyRead: [UInt8]) {
        let bytes = received
        answered = true
        received = []
        closed = true
        deadline?.close()
        stream.stopReading()
        stream.onWriteError = nil
        onClose?(self)
        onClose = nil
        return (stream, bytes)
    }

    func close() {
        guard !closed else { return }
        closed = true
        deadline?.close()
        stream.close()
        onClose?(self)
        onClose = nil
    }

    static func reason(_ status: Int) -> String { HTTPStatus.phrase(for: status) }

    /// What a client past the listener's connection limit gets before it is closed.
    static let busyResponse = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        + "Content-Length: 28\r\nRetry-After: 1\r\nConnection: close\r\n\r\ntoo many clients; try again\n"

    /// The client, for logs and for counting its wrong tokens.
    var peerDescription: String { stream.peerDescription }
}
