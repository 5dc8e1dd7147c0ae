import JSONRPC

/// The service's state for one connection: its principal, the objects it created
/// (released when it closes) and the subscriptions it holds.
final class ClientSession {
    unowned let connection: RPCConnection
    let principal: Principal
    /// Handles of the objects it created, of every kind.
    var createdObjects: Set<String> = []
    var subscriptionIDs: Set<String> = []
    /// `fetch` calls under way, by handle: their request objects live here (they are in
    /// no table) until they are answered, or until the connection closes. By handle,
    /// so that a named fetch's uniqueness check and `pause`/`resume` by name are one
    /// lookup, not a walk over every fetch in flight.
    var fetches: [String: HTTPRequest] = [:]
    /// The connection's byte counts when it came to act for the principal: what came
    /// before (the `auth` exchange of a TCP client) is the anonymous connections'.
    let bytesBefore: (in: UInt64, out: UInt64)

    /// Counts the connection as one of the principal's; `end` uncounts it.
    init(connection: RPCConnection, principal: Principal) {
        self.connection = connection
        self.principal = principal
        bytesBefore = (connection.bytesIn, connection.bytesOut)
        principal.connections += 1
        principal.usage.connectionsAccepted += 1
    }

    /// A new subscription of this connection (`subscribe`, `fetch {subscribe: true}`).
    /// Subscriptions cost the server as requests do, and share their limit.
    func subscribe(to handle: String?, events: Set<EventKind>, details: Bool = false,
                   progressInterval: UInt64 = NotificationHub.defaultProgressInterval) throws(RPCError) -> String {
        try principal.check("subscriptions", current: principal.subscriptions.count, max: principal.limits.requests,
                            "Too many subscriptions; unsubscribe some first")
        let id = ObjectName.generate(prefix: "sub_") { principal.subscriptions[$0] != nil }
        principal.subscriptions[id] = Subscription(id: id, session: self, handle: handle, events: events,
                                                   details: details, progressInterval: progressInterval)
        subscriptionIDs.insert(id)
        return id
    }

    /// Ends one of this connection's subscriptions.
    func unsubscribe(_ id: String) {
        principal.subscriptions[id] = nil
        subscriptionIDs.remove(id)
    }

    /// JSON-RPC bytes received and sent for the principal so far.
    var bytesIn: UInt64 { connection.bytesIn - bytesBefore.in }
    var bytesOut: UInt64 { connection.bytesOut - bytesBefore.out }

    /// The connection closed: the principal keeps what it sent and received.
    func end() {
        principal.connections -= 1
        principal.usage.bytesIn += bytesIn
        principal.usage.bytesOut += bytesOut
    }
}
