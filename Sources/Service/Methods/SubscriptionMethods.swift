import JSON
import JSONRPC

/// `subscribe` and `unsubscribe` (api/openrpc.json).
extension Server {
    func registerSubscriptionMethods() {
        registry.register("subscribe", params: ["request?", "socket?", "all?", "events?", "details?", "progressInterval?"]) { [unowned self] call in
            let s = try session(call)
            let p = call.params
            let all = try p.bool("all", default: false)
            // One object (a request or a socket) or all of them.
            let request = try p.optionalString("request")
            let socket = try p.optionalString("socket")
            let named = [request, socket].compactMap { $0 }.count
            guard named + (all ? 1 : 0) == 1 else {
                throw RPCError.invalidParams("give one of 'request', 'socket' or 'all': true")
            }
            if let request { _ = try s.principal.object(request, as: HTTPRequest.self) }
            if let socket { _ = try s.principal.object(socket, as: RawSocket.self) }
            let handle = request ?? socket
            var events: Set<EventKind> = [.stateChange, .progress]
            if let list = p["events"] {
                guard let items = list.arrayValue, !items.isEmpty else {
                    throw RPCError.invalidParams("'events' must be a non-empty array of \(EventKind.allCases.map(\.rawValue))")
                }
                events = []
                for item in items {
                    guard let word = item.stringValue, let kind = EventKind(rawValue: word) else {
                        throw RPCError.invalidParams("'events' may hold \(EventKind.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    events.insert(kind)
                }
            }
            let details = try p.bool("details", default: false)
            let interval = try progressInterval(p)
            let id = try s.subscribe(to: handle, events: events, details: details, progressInterval: interval)
            return .result(["subscription": .string(id)])
        }

        registry.register("unsubscribe", params: ["subscription"]) { [unowned self] call in
            let s = try session(call)
            let id = try call.params.string("subscription")
            guard s.principal.subscriptions[id] != nil else {
                throw ServiceError.unknownSubscription(id)
            }
            s.unsubscribe(id)
            return .result(true)
        }
    }

    /// `subscribe`'s `progressInterval`: whole milliseconds, at least
    /// `NotificationHub.minimumProgressInterval`, at most a day; the default when absent.
    private func progressInterval(_ p: Params) throws(RPCError) -> UInt64 {
        guard let v = p["progressInterval"] else { return NotificationHub.defaultProgressInterval }
        let least = NotificationHub.minimumProgressInterval, most: Int64 = 86_400_000
        guard let ms = v.int64Value, ms >= Int64(least), ms <= most else {
            throw RPCError.invalidParams("'progressInterval' must be a whole number of milliseconds from \(least) to \(most)")
        }
        return UInt64(ms)
    }
}
