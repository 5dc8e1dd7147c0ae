import Foundation
import JSON
import JSONRPC

/// `rpc.discover`, `server.info` and `server.stats`.
extension Server {
    /// The OpenRPC document, parsed once from the text embedded at build time.
    static let openRPCDocument: JSONValue = {
        do {
            return try JSON.decode(openRPCDocumentText)
        } catch {
            preconditionFailure("api/openrpc.json embedded in the binary is not JSON: \(error)")
        }
    }()

    /// `server.info`'s constant members, and the keys of the others, written once.
    private static let infoConstants = JSONConstantMembers(["name": .string(Server.name), "version": .string(Server.version)])
    private static let infoKeys = (uptimeSeconds: JSONKey("uptimeSeconds"), connections: JSONKey("connections"))

    func registerServerMethods() {
        registry.register("rpc.discover", params: []) { _ in .result(Server.openRPCDocument) }
        // Written straight into the response (no tree of values), as it is what a probe
        // calls over and over: the same bytes as the object `name`, `version`,
        // `uptimeSeconds`, `connections`.
        registry.register("server.info", params: []) { [unowned self] call in
            let uptime = encodedUptime()
            call.reply(object: { info in
                let keys = Server.infoKeys
                info.add(Server.infoConstants)
                info.add(keys.uptimeSeconds, encoded: uptime)
                info.add(keys.connections, int: Int64(connectionCount))
            })
            return .answered
        }
        registry.register("server.stats", params: []) { [unowned self] call in
            let s = try session(call)
            var result = usage(of: [s.principal])
            result["principal"] = .string(s.principal.name)
            if s.principal.isAdmin {
                let all = principals.values.sorted { $0.name < $1.name }
                var total = usage(of: all, anonymous: true)
                total["authFailures"] = .int(Int64(authFailures))
                total["unauthenticatedConnections"] = .int(Int64(connections.values.count { $0.context is PendingAuthentication }))
                result["total"] = .object(total)
                var each = JSONObject()
                for p in all { each[p.name] = .object(usage(of: [p])) }
                result["principals"] = .object(each)
            }
            return .result(.object(result))
        }
    }
}

extension Server {
    /// The server's uptime in seconds, to the millisecond, encoded: the calls of one
    /// millisecond (many, under load) share one encoding, as a double's text is the
    /// dearest member of `server.info` to write (about 1,000 instructions).
    private func encodedUptime() -> EncodedJSON {
        let seconds = (Date().timeIntervalSince(startedAt) * 1000).rounded() / 1000
        if let last = lastUptime, last.seconds == seconds { return last.json }
        let json = EncodedJSON(.double(seconds))
        lastUptime = (seconds, json)
        return json
    }

    /// The figures of `server.stats` summed over `group` (and over the connections that
    /// never authenticated, with `anonymous`). Live figures (connections, requests by
    /// state, sockets by state, transfers, buffered bytes, bytes of open connections) are read now;
    /// the rest are the principals' counters.
    func usage(of group: [Principal], anonymous: Bool = false) -> JSONObject {
        let members = Set(group.map(ObjectIdentifier.init))
        var totals = Principal.Usage()
        var errors: [String: UInt64] = [:]
        func add(_ u: Principal.Usage) {
            totals.bytesIn += u.bytesIn
            totals.bytesOut += u.bytesOut
            totals.httpBytesReceived += u.httpBytesReceived
            totals.httpBytesSent += u.httpBytesSent
            totals.socketBytesReceived += u.socketBytesReceived
            totals.socketBytesSent += u.socketBytesSent
            totals.connectionsAccepted += u.connectionsAccepted
            for (k, v) in u.errors { errors[k, default: 0] += v }
        }
        for p in group { add(p.usage) }
        if anonymous { add(anonymousUsage) }
        for c in connections.values {
            guard let s = c.context as? ClientSession else {
                if anonymous { totals.bytesIn += c.bytesIn; totals.bytesOut += c.bytesOut }
                continue
            }
            if members.contains(ObjectIdentifier(s.principal)) {
                totals.bytesIn += s.bytesIn
                totals.bytesOut += s.bytesOut
            }
        }
        var states = JSONObject()
        for state in RequestState.allCases { states[state.name] = 0 }
        for p in group {
            for r in p.requests { states[r.state.name] = .int((states[r.state.name]?.int64Value ?? 0) + 1) }
        }
        var sockets = JSONObject()
        for state in SocketState.allCases { sockets[state.name] = 0 }
        for p in group {
            for o in p.sockets { sockets[o.state.name] = .int((sockets[o.state.name]?.int64Value ?? 0) + 1) }
        }
        var errorObject = JSONObject()
        for (k, v) in errors.sorted(by: { $0.key < $1.key }) { errorObject[k] = .int(Int64(v)) }
        return [
            "connections": .int(Int64(group.reduce(0) { $0 + $1.connections })),
            "connectionsAccepted": .int(Int64(totals.connectionsAccepted)),
            "requests": .object(states),
            "sockets": .object(sockets),
            "transfersInFlight": .int(Int64(group.reduce(0) { $0 + $1.transfersInFlight })),
            "bufferedBytes": .int(Int64(group.reduce(0) { $0 + $1.bufferedBytes })),
            "bytesIn": .int(Int64(totals.bytesIn)), "bytesOut": .int(Int64(totals.bytesOut)),
            "httpBytesReceived": .int(Int64(totals.httpBytesReceived)), "httpBytesSent": .int(Int64(totals.httpBytesSent)),
            "socketBytesReceived": .int(Int64(totals.socketBytesReceived)),
            "socketBytesSent": .int(Int64(totals.socketBytesSent)),
            "errors": .object(errorObject),
        ]
    }
}
