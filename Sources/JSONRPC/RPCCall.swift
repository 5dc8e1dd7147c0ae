import JSON

/// The far end of a connection as the dispatcher and the handlers see it: where replies
/// and notifications go, and a slot for the service's per-connection state. The real one
/// is `RPCConnection`; tests use their own to run the dispatcher without sockets.
public protocol RPCPeer: AnyObject {
    /// Writes one message (a response, a batch array or a notification).
    func send(_ message: JSONValue)
    /// Writes one message already encoded as compact JSON text (a batch's array, built
    /// as its answers come).
    func send(encoded message: [UInt8])
    /// Whether replies of `bytes` more can still be queued for this peer. When they
    /// cannot, the peer has closed the connection: its client does not read what it is
    /// sent, or one batch asked for more than the out-queue holds.
    func admits(replyBytes bytes: Int) -> Bool
    /// False once the connection is gone: late replies are dropped.
    var isOpen: Bool { get }
    /// The service's state for this connection (principal, subscriptions, …).
    var context: AnyObject? { get set }
    /// Counts calls answered later, so that a half-closed connection stays open until
    /// its last deferred reply has gone out.
    func deferredCallStarted()
    func deferredCallEnded()
}

extension RPCPeer {
    /// Sends a notification (`method` with `params`, no id).
    public func notify(_ method: String, _ params: JSONValue) {
        send(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }
}

/// One call being handled: its method, parameters and id, and the way to answer it.
/// A call is answered exactly once; a notification (no id) is never answered on the wire.
public final class RPCCall {
    public let method: String
    /// Parameters by name, checked against the declaration.
    public let params: Params
    /// The parameters as sent, for methods declared with `.any`.
    public let rawParams: JSONValue?
    /// The request id; nil for a notification.
    public let id: JSONValue?
    public let peer: RPCPeer
    private let sink: ReplySink
    /// The dispatcher's `onError`, told of the error this call is answered with, whether
    /// the handler threw it or answered later.
    private let onError: ((RPCPeer, RPCError) -> Void)?
    /// The dispatcher's `onAnswer`, told once when the call is answered.
    private let onAnswer: ((RPCCall, RPCError?) -> Void)?
    public private(set) var isAnswered = false
    private var isDeferred = false

    init(method: String, params: Params, rawParams: JSONValue?, id: JSONValue?, peer: RPCPeer, sink: ReplySink,
         onError: ((RPCPeer, RPCError) -> Void)?, onAnswer: ((RPCCall, RPCError?) -> Void)? = nil) {
        self.method = method
        self.params = params
        self.rawParams = rawParams
        self.id = id
        self.peer = peer
        self.sink = sink
        self.onError = onError
        self.onAnswer = onAnswer
    }

    public var isNotification: Bool { id == nil }

    /// Answers with a result.
    public func reply(_ result: JSONValue) {
        answer(["jsonrpc": "2.0", "result": result, "id": id ?? .null])
    }

    /// Answers with an error.
    public func fail(_ error: RPCError) {
        guard !isAnswered else { return }
        onError?(peer, error)
        answer(["jsonrpc": "2.0", "error": error.json, "id": id ?? .null], error: error)
    }

    func markDeferred() {
        isDeferred = true
        peer.deferredCallStarted()
    }

    private func answer(_ response: JSONValue, error: RPCError? = nil) {
        guard !isAnswered else { return }
        isAnswered = true
        onAnswer?(self, error)
        sink.deliver(isNotification ? Optional<JSONValue>.none : response)
        if isDeferred { peer.deferredCallEnded() }
    }
}

/// Where an answer goes: straight to the peer for a single call, or into the batch it
/// belongs to, which is written as one array once its last call is answered.
class ReplySink {
    func deliver(_ response: JSONValue?) {}
}

final class DirectSink: ReplySink {
    unowned let peer: RPCPeer
    init(peer: RPCPeer) { self.peer = peer }
    override func deliver(_ response: JSONValue?) {
        if let response, peer.isOpen { peer.send(response) }
    }
}

/// Collects a batch's responses in the order they are answered. Calls answered later (a
/// synchronous `send`) hold the array back until they are answered; a batch of only
/// notifications writes nothing at all, as the specification says.
///
/// Each answer is encoded into the array's text as it comes, and the peer is asked
/// whether the text so far still fits its out-queue: a batch of 2,500 `rpc.discover`
/// (260 MB of answers) ends the connection at the limit, after 64 MiB of encoding,
/// instead of holding the event loop for seconds building the whole array first.
final class BatchSink: ReplySink {
    unowned let peer: RPCPeer
    /// `[` and the answers so far, comma-separated; empty until the first answer.
    private var text: [UInt8] = []
    private var outstanding: Int
    private var sealed = false

    init(peer: RPCPeer, count: Int) {
        self.peer = peer
        outstanding = count
    }

    /// Adds an answer that needs no call object (an invalid member of the batch).
    func add(_ response: JSONValue) { deliver(response) }

    override func deliver(_ response: JSONValue?) {
        if let response, peer.isOpen {
            text.append(text.isEmpty ? UInt8(ascii: "[") : UInt8(ascii: ","))
            JSON.encode(response, into: &text)
            if !peer.admits(replyBytes: text.count) { text = [] }
        }
        outstanding -= 1
        flushIfDone()
    }

    /// Called once every member was dispatched; until then the batch cannot be complete.
    func seal() {
        sealed = true
        flushIfDone()
    }

    private func flushIfDone() {
        guard sealed, outstanding == 0 else { return }
        if !text.isEmpty, peer.isOpen {
            text.append(UInt8(ascii: "]"))
            peer.send(encoded: text)
        }
        text = []
    }
}
