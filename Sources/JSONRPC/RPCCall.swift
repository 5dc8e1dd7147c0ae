import JSON

/// The far end of a connection as the dispatcher and the handlers see it: where replies
/// and notifications go, and a slot for the service's per-connection state. The real one
/// is `RPCConnection`; tests use their own to run the dispatcher without sockets.
public protocol RPCPeer: AnyObject {
    /// Writes one message (a response, a batch array or a notification).
    func send(_ message: JSONValue)
    /// Writes one message already encoded (a response whose result was written with
    /// `JSONObjectWriter`, a batch's array). A peer that does not implement it gets the
    /// decoded value.
    func send(encoded message: EncodedJSON)
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
    public func send(encoded message: EncodedJSON) {
        send(message.decoded())
    }

    /// Sends a notification (`method` with `params`, no id).
    public func notify(_ method: String, _ params: JSONValue) {
        send(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }
}

/// One call being handled: its method, parameters and id, and the way to answer it.
/// A call is answered exactly once; a notification (no id) is never answered on the wire.
public final class RPCCall {
    public let method: String
    /// The declared method of that name, nil when there is none: looked up once, when
    /// the call is made, for the dispatcher and the `onAnswer` observers.
    public let registered: RPCMethod?
    /// Parameters by name, checked against the declaration.
    public let params: Params
    /// The parameters as sent, for methods declared with `.any`.
    public let rawParams: JSONValue?
    /// The request id; nil for a notification.
    public let id: JSONValue?
    public let peer: RPCPeer
    /// The batch the call belongs to; nil for a single call, answered straight to `peer`.
    private let sink: ReplySink?
    /// The dispatcher's `onError`, told of the error this call is answered with, whether
    /// the handler threw it or answered later.
    private let onError: ((RPCPeer, RPCError) -> Void)?
    /// The dispatcher's `onAnswer`, told once when the call is answered.
    private let onAnswer: ((RPCCall, RPCError?) -> Void)?
    /// The dispatcher's memory for writing responses in (`ResponseBuffer`).
    private let responseBuffer: ResponseBuffer
    public private(set) var isAnswered = false
    private var isDeferred = false

    init(method: String, registered: RPCMethod?, params: Params, rawParams: JSONValue?, id: JSONValue?, peer: RPCPeer,
         sink: ReplySink?, onError: ((RPCPeer, RPCError) -> Void)?, onAnswer: ((RPCCall, RPCError?) -> Void)? = nil,
         responseBuffer: ResponseBuffer) {
        self.method = method
        self.registered = registered
        self.params = params
        self.rawParams = rawParams
        self.id = id
        self.peer = peer
        self.sink = sink
        self.onError = onError
        self.onAnswer = onAnswer
        self.responseBuffer = responseBuffer
    }

    public var isNotification: Bool { id == nil }

    /// Answers with a result.
    public func reply(_ result: JSONValue) {
        answer(response { $0.add(Self.resultKey, result) })
    }

    /// Answers with a result object that `write` adds the members of, straight into the
    /// response's text: the same message as `reply(_:)` with the equal `JSONObject`, for
    /// results answered often (`server.info`) or large (a body read) with neither a tree
    /// nor a second buffer. When `write` throws, the call is not answered and the error
    /// is rethrown, for the handler to answer with.
    public func reply(object write: (inout JSONObjectWriter) throws -> Void) rethrows {
        answer(try response { try $0.addObject(Self.resultKey, write) })
    }

    /// Answers with an error.
    public func fail(_ error: RPCError) {
        guard !isAnswered else { return }
        onError?(peer, error)
        answer(response { $0.add(Self.errorKey, error.json) }, error: error)
    }

    /// The response message, written straight as bytes with the outcome (`result` or
    /// `error`) between `jsonrpc` and `id`; nil for a notification, which gets none, and
    /// for a peer that has gone, which would drop it: nothing is written then (a fetch
    /// that ended after its client left had its result written, body and all, only for
    /// the bytes to be dropped).
    private func response(_ writeOutcome: (inout JSONObjectWriter) throws -> Void) rethrows -> EncodedJSON? {
        guard !isNotification, !isAnswered, peer.isOpen else { return nil }
        var message = JSONObjectWriter(reusing: &responseBuffer.bytes)
        message.add(Self.version)
        try writeOutcome(&message)
        message.add(Self.idKey, id ?? .null)
        return message.finish()
    }

    /// Every response's `jsonrpc` member, written once.
    private static let version = JSONConstantMembers(["jsonrpc": "2.0"])
    /// A response's other keys, written once (`JSONKey`).
    private static let resultKey = JSONKey("result")
    private static let errorKey = JSONKey("error")
    private static let idKey = JSONKey("id")

    func markDeferred() {
        isDeferred = true
        peer.deferredCallStarted()
    }

    private func answer(_ response: EncodedJSON?, error: RPCError? = nil) {
        guard !isAnswered else { return }
        isAnswered = true
        onAnswer?(self, error)
        deliverAnswer(response, to: sink, peer: peer)
        if let response { responseBuffer.keep(response) }
        if isDeferred { peer.deferredCallEnded() }
    }
}

/// Memory that responses are written in, one after another: a response's bytes are
/// copied on as soon as it is answered (into its peer's out-queue or its batch's
/// array), so the next call can write its response in the same memory instead of
/// allocating and freeing a buffer of its own (about 300 instructions a call). One per
/// dispatcher, on the loop's thread.
final class ResponseBuffer {
    /// Empty between responses; `JSONObjectWriter(reusing:)` takes it over.
    var bytes: [UInt8] = []

    /// Keeps the memory of a response that has been delivered. If the peer kept the
    /// response itself, the writer that takes the memory next gets new memory instead
    /// (arrays copy on write), so no response is ever overwritten. A large buffer is
    /// not kept: it would stay allocated for as long as the server runs.
    func keep(_ response: EncodedJSON) {
        guard response.bytes.capacity <= 16 << 10 else { return }
        bytes = response.bytes
    }
}

/// Where an answer goes: into the batch it belongs to, which is written as one array once
/// its last call is answered.
class ReplySink {
    func deliver(_ response: EncodedJSON?) {}
}

/// Delivers an answer (nil for a notification's) into its batch's `sink`, or, for a
/// single call (no sink), straight to the peer: a single call needs no object of its own
/// for that.
func deliverAnswer(_ response: EncodedJSON?, to sink: ReplySink?, peer: RPCPeer) {
    if let sink {
        sink.deliver(response)
    } else if let response, peer.isOpen {
        peer.send(encoded: response)
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
    /// The responses so far, written one after another as they are answered.
    private var responses = JSONArrayWriter()
    private var outstanding: Int
    private var sealed = false

    init(peer: RPCPeer, count: Int) {
        self.peer = peer
        outstanding = count
    }

    /// Adds an answer that needs no call object (an invalid member of the batch).
    func add(_ response: JSONValue) { deliver(EncodedJSON(response)) }

    override func deliver(_ response: EncodedJSON?) {
        if let response, peer.isOpen {
            responses.append(response)
            if !peer.admits(replyBytes: responses.byteCount) { responses = JSONArrayWriter() }
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
        // Taken out of the property first, so that closing the array does not copy it.
        var done = JSONArrayWriter()
        swap(&done, &responses)
        if done.count > 0, peer.isOpen { peer.send(encoded: done.finish()) }
    }
}
