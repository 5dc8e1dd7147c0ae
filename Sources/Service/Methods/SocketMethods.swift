import HTTPEngine
import JSON
import JSONRPC

/// The raw socket's methods (`socket.*`, api/openrpc.json; docs/internals/SOCKETS.md).
extension Server {
    /// The socket a call names; naming it counts as using it (`--request-ttl`).
    func socket(_ call: RPCCall) throws(RPCError) -> RawSocket {
        let o: RawSocket = try session(call).principal.object(try call.params.string("socket"))
        o.touch()
        return o
    }

    /// Declares a method whose one job is to act on an existing socket.
    private func onSocket(_ name: String, params: [String] = [], _ body: @escaping (RawSocket, RPCCall) throws -> JSONValue) {
        registry.register(name, params: ["socket"] + params) { [unowned self] call in
            .result(try body(try socket(call), call))
        }
    }

    func registerSocketMethods() {
        registry.register("socket.create", params: ["host", "port", "ssl?", "socket?"]) { [unowned self] call in
            let s = try session(call)
            let p = call.params
            let host = try SocketMethodParams.host(try p.string("host"))
            let port = Int(try p.int("port", in: 1...65535))
            let ssl = try p.bool("ssl", default: false)
            try s.principal.check("sockets", current: s.principal.count(of: RawSocket.self), max: s.principal.limits.sockets,
                                  "Too many sockets held; release some first")
            let handle = try newHandle(for: s, named: try p.optionalString("socket"), kind: RawSocket.kind)
            adopt(RawSocket(handle: handle, host: host, port: port, ssl: ssl, principal: s.principal, creator: s,
                            environment: self), by: s)
            return .result(["socket": .string(handle)])
        }

        onSocket("socket.disableHostVerification") { o, _ in
            try o.disableVerification(peer: false)
            return true
        }

        onSocket("socket.disablePeerVerification") { o, _ in
            try o.disableVerification(peer: true)
            return true
        }

        onSocket("socket.connect", params: ["timeout?"]) { [unowned self] o, call in
            try checkAcceptingTransfers()
            try o.connect(timeout: try call.params.optionalSeconds("timeout"))
            return true
        }

        onSocket("socket.write", params: ["data?", "dataBase64?"]) { o, call in
            let bytes: [UInt8]
            switch (try call.params.optionalString("data"), try call.params.optionalString("dataBase64")) {
            case (let text?, nil): bytes = Array(text.utf8)
            case (nil, let b64?): bytes = try Base64Param.decode(b64, name: "dataBase64")
            case (nil, nil): throw RPCError.invalidParams("give 'data' or 'dataBase64'")
            default: throw RPCError.invalidParams("give 'data' or 'dataBase64', not both")
            }
            return ["bytes": .int(Int64(try o.write(bytes)))]
        }

        registry.register("socket.read", params: ["socket", "maxBytes?", "encoding?"]) { [unowned self] call in
            let o = try socket(call)
            let (max, encoding) = try ReadParams.parse(call.params)
            try call.reply { result in
                try o.read(maxBytes: max, encoding: encoding, into: &result)
            }
            return .answered
        }

        onSocket("socket.disconnect") { o, _ in
            try o.disconnect()
            return true
        }

        onSocket("socket.getState") { o, _ in o.stateReply }

        onSocket("socket.release") { [unowned self] o, _ in
            release(o)
            return true
        }
    }
}

/// The checks of `socket.create`'s parameters.
enum SocketMethodParams {
    /// A DNS name or an IP literal (an IPv6 one with or without brackets, returned
    /// without): what could never name a host is refused before anything is looked up.
    static func host(_ text: String) throws(RPCError) -> String {
        var host = Substring(text)
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        let allowed = host.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == UInt8(ascii: ".")
                || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ":") || b == UInt8(ascii: "%")
        }
        guard !host.isEmpty, host.utf8.count <= 253, allowed else {
            throw RPCError.invalidParams("'host' must be a host name or an IP literal (at most 253 of A-Z a-z 0-9 . - _, or an IPv6 address)")
        }
        // ':' and '%' belong to IPv6 literals (and their zones) only: "127.0.0.1:80" is no host.
        if host.utf8.contains(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "%") }),
           IPAddress.parseLiteral(String(host)) == nil {
            throw RPCError.invalidParams("'host' \"\(host)\" has ':' or '%' but is no IPv6 address (give the port as 'port')")
        }
        return String(host)
    }
}
