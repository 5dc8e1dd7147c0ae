/// A JSON-RPC call's envelope as the stream decoder picked it out of a top-level object
/// whose members were only `jsonrpc`, `id`, `method` and `params`, each at most once:
/// the same members the object would hold, without the object (its members' array, the
/// lookups and its destruction). A missing member is nil. What the members must be is
/// the dispatcher's business, as for an object; this only says which were there.
///
/// A class, so that an event holding one is copied with one retain, not four members'
/// copies (a struct of four optional values cost a pipelined call some 800 instructions
/// in copies between the decoder and the dispatcher, more than the object it replaced).
public final class JSONCallEnvelope: Equatable, Sendable {
    public let jsonrpc: JSONValue?
    public let id: JSONValue?
    public let method: JSONValue?
    public let params: JSONValue?

    public init(jsonrpc: JSONValue? = nil, id: JSONValue? = nil, method: JSONValue? = nil, params: JSONValue? = nil) {
        self.jsonrpc = jsonrpc
        self.id = id
        self.method = method
        self.params = params
    }

    /// The envelope members of an object, looked up by name (its other members are
    /// passed over).
    public convenience init(_ object: JSONObject) {
        self.init(jsonrpc: object["jsonrpc"], id: object["id"], method: object["method"], params: object["params"])
    }

    public static func == (a: JSONCallEnvelope, b: JSONCallEnvelope) -> Bool {
        a.jsonrpc == b.jsonrpc && a.id == b.id && a.method == b.method && a.params == b.params
    }

    /// The members there as an object, in slot order (`keys`).
    public var object: JSONObject {
        let members = [jsonrpc, id, method, params]
        return JSONObject(distinctMembers: Self.keys.indices.compactMap { slot in members[slot].map { (Self.keys[slot], $0) } })
    }

    /// The member names, in slot order.
    static let keys = ["jsonrpc", "id", "method", "params"]
}
