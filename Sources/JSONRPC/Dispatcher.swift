import JSON

/// What a peer answered to a request of ours: its result, or its error object as sent.
public enum RPCResponse {
    case result(JSONValue)
    case error(JSONValue)
}

/// Turns decoded JSON values into calls of registered methods, and their outcomes into
/// responses. Pure with respect to I/O: it writes only through the `RPCPeer`, so the
/// specification's examples run against it with no socket.
///
/// Calls run in the order they arrive, the members of a batch included, so one batch may
/// create, open and send a request.
public final class Dispatcher {
    public let registry: MethodRegistry
    /// Called for every call before its handler runs (metrics, logging, authentication
    /// checks). Throwing refuses the call with that error.
    public var gate: ((RPCCall) throws -> Void)?
    /// Called for every error answered, by this dispatcher or later by a deferred call
    /// (statistics).
    public var onError: ((RPCPeer, RPCError) -> Void)?
    /// Called for every response the peer sends to a request of ours (a server → client
    /// request, DESIGN §3): its id and its result, or its error object. A response is
    /// never answered, whether or not anyone was waiting for it.
    public var onResponse: ((RPCPeer, JSONValue, RPCResponse) -> Void)?
    /// Called once for every call when it is answered (a notification too, though
    /// nothing goes on the wire): with nil for a result, or the error (metrics).
    public var onAnswer: ((RPCCall, RPCError?) -> Void)?

    /// Where calls write their responses (`ResponseBuffer`).
    private let responseBuffer = ResponseBuffer()

    public init(registry: MethodRegistry) { self.registry = registry }

    /// Handles one top-level value read from a connection.
    public func dispatch(_ value: JSONValue, from peer: RPCPeer) {
        if case .array(let members) = value {
            guard !members.isEmpty else {
                send(.invalidRequest("an empty batch"), id: .null, to: peer)
                return
            }
            let batch = BatchSink(peer: peer, count: members.count)
            // The rest of a batch is not run once the connection has closed (its
            // answers passed the out-queue limit): nobody would hear of their effects.
            for member in members where peer.isOpen { run(member, peer: peer, sink: batch) }
            batch.seal()
        } else {
            run(value, peer: peer, sink: nil)
        }
    }

    /// Handles a single call whose envelope the decoder picked out of its object
    /// (`JSONStreamEvent.call`): the same as `dispatch` with that object.
    public func dispatch(_ envelope: JSONCallEnvelope, from peer: RPCPeer) {
        run(envelope, peer: peer, sink: nil)
    }

    /// Answers a value the decoder could not parse.
    public func parseFailed(_ error: JSONParseError, peer: RPCPeer) {
        send(.parseError(error.message, offset: error.offset), id: .null, to: peer)
    }

    private func send(_ error: RPCError, id: JSONValue, to peer: RPCPeer) {
        guard peer.isOpen else { return }
        onError?(peer, error)
        peer.send(["jsonrpc": "2.0", "error": error.json, "id": id])
    }

    /// Runs one call; `sink` is its batch, nil for a single call.
    private func run(_ value: JSONValue, peer: RPCPeer, sink: ReplySink?) {
        guard case .object(let o) = value else {
            return refuse(Invalid(error: .invalidRequest("a request must be an object"), id: .null), peer: peer, sink: sink)
        }
        // The envelope's `method`, read once: an object without one may be a response
        // (which an envelope picked by the decoder cannot be: it has neither `result`
        // nor `error`).
        let method = o["method"]
        if method == nil, let response = Self.response(o) {
            deliverAnswer(nil, to: sink, peer: peer)
            onResponse?(peer, response.id, response.outcome)
            return
        }
        run(jsonrpc: o["jsonrpc"], id: o["id"], method: method, params: o["params"], peer: peer, sink: sink)
    }

    /// Answers a request that is not a valid call.
    private func refuse(_ invalid: Invalid, peer: RPCPeer, sink: ReplySink?) {
        onError?(peer, invalid.error)
        deliverAnswer(EncodedJSON(["jsonrpc": "2.0", "error": invalid.error.json, "id": invalid.id]), to: sink, peer: peer)
    }

    /// Runs one call from its envelope's members.
    private func run(_ envelope: JSONCallEnvelope, peer: RPCPeer, sink: ReplySink?) {
        run(jsonrpc: envelope.jsonrpc, id: envelope.id, method: envelope.method, params: envelope.params, peer: peer,
            sink: sink)
    }

    /// Runs the call an envelope's members make, or answers why they make none.
    private func run(jsonrpc: JSONValue?, id: JSONValue?, method: JSONValue?, params: JSONValue?, peer: RPCPeer,
                     sink: ReplySink?) {
        let call: RPCCall
        let paramError: RPCError?
        switch makeCall(jsonrpc: jsonrpc, id: id, method: method, params: params, peer: peer, sink: sink) {
        case .failure(let invalid):
            return refuse(invalid, peer: peer, sink: sink)
        case .success(let made):
            (call, paramError) = made
        }
        do {
            try gate?(call)
            guard let method = call.registered else { throw RPCError.methodNotFound(call.method) }
            if let paramError { throw paramError }
            switch try method.handler(call) {
            case .result(let result): call.reply(result)
            case .deferred: if !call.isAnswered { call.markDeferred() }
            case .answered: break
            }
        } catch {
            call.fail(error as? RPCError ?? .internalError(String(describing: error)))
        }
    }

    /// An object without `method` read as a response (an id, and `result` or `error`),
    /// or nil when it is not one.
    static func response(_ o: JSONObject) -> (id: JSONValue, outcome: RPCResponse)? {
        guard let id = o["id"] else { return nil }
        if let error = o["error"], o["result"] == nil { return (id, .error(error)) }
        if let result = o["result"], o["error"] == nil { return (id, .result(result)) }
        return nil
    }

    private struct Invalid: Error {
        let error: RPCError
        let id: JSONValue
    }

    /// Checks the request object's shape, and the parameters against the declaration. A
    /// well-formed request with bad parameters still makes a call (so a notification
    /// stays silent); its parameter error comes back beside it. The members are the
    /// request object's, or a `JSONCallEnvelope`'s (nil when missing); its other
    /// members are ignored.
    private func makeCall(jsonrpc: JSONValue?, id rawID: JSONValue?, method methodValue: JSONValue?,
                          params raw: JSONValue?, peer: RPCPeer,
                          sink: ReplySink?) -> Result<(RPCCall, RPCError?), Invalid> {
        // An id that is no JSON-RPC id cannot be echoed; answer with null as the spec
        // says, before anything runs. Integers are echoed as sent, however large (their
        // digits, `.bigInteger`); a number no double can hold (`1e400`, read as
        // infinity) has no value to echo: it is refused, not answered with id null.
        var id: JSONValue? = nil
        if let given = rawID {
            switch given {
            case .string, .int, .bigInteger, .null: id = given
            case .double(let d) where d.isFinite: id = given
            case .double:
                return .failure(Invalid(error: .invalidRequest("'id' is a number out of a double's range: use a string, an integer or a smaller number"), id: .null))
            default: return .failure(Invalid(error: .invalidRequest("'id' must be a string, a number or null"), id: .null))
            }
        }
        let echoID = id ?? .null
        guard jsonrpc == .string("2.0") else {
            return .failure(Invalid(error: .invalidRequest("'jsonrpc' must be \"2.0\""), id: echoID))
        }
        guard case .string(let method)? = methodValue else {
            return .failure(Invalid(error: .invalidRequest("'method' must be a string"), id: echoID))
        }
        switch raw {
        case nil, .array?, .object?: break
        default: return .failure(Invalid(error: .invalidRequest("'params' must be an array or an object"), id: echoID))
        }
        var params = Params()
        var paramError: RPCError?
        let registered = registry.method(named: method)
        if let registered, case .named(let specs) = registered.schema {
            switch normalize(raw, specs) {
            case .success(let p): params = p
            case .failure(let e): paramError = e
            }
        }
        let call = RPCCall(method: method, registered: registered, params: params, rawParams: raw, id: id, peer: peer,
                           sink: sink, onError: onError, onAnswer: onAnswer, responseBuffer: responseBuffer)
        return .success((call, paramError))
    }

    /// Maps positional parameters to names and checks names against the declaration.
    private func normalize(_ raw: JSONValue?, _ specs: [ParamSpec]) -> Result<Params, RPCError> {
        var o = JSONObject()
        switch raw {
        case .array(let items)?:
            guard items.count <= specs.count else {
                return .failure(.invalidParams("at most \(specs.count) positional parameters"))
            }
            for (spec, item) in zip(specs, items) { o[spec.name] = item }
        case .object(let given)?:
            for key in given.keys where !specs.contains(where: { $0.name == key }) {
                let known = specs.map(\.name).joined(separator: ", ")
                return .failure(.invalidParams("unknown parameter '\(key)'" + (known.isEmpty ? "" : "; known: \(known)")))
            }
            o = given
        default:
            break
        }
        for spec in specs where spec.required && (o[spec.name] == nil || o[spec.name] == .null) {
            return .failure(.invalidParams("'\(spec.name)' is required"))
        }
        return .success(Params(o))
    }
}
