import JSON
import JSONRPC

/// `detach` and `attach`: a client's requests outlive its connection, for a client
/// that reconnects (a restarted process, a dropped socket) and reads on where it
/// stopped. `ObjectLifetime` keeps the detachments.
extension Server {
    func registerDetachMethods() {
        registry.register("detach", params: []) { [unowned self] call in
            let s = try session(call)
            let (token, handles) = try lifetime.detach(s)
            return .result([
                "token": .string(token), "requests": .array(handles.map(JSONValue.string)),
                "expiresInSeconds": config.detachTTL.secondsJSON,
            ])
        }

        registry.register("attach", params: ["token"]) { [unowned self] call in
            let s = try session(call)
            let handles = try lifetime.attach(try call.params.string("token"), to: s)
            return .result(["requests": .array(handles.map(JSONValue.string))])
        }
    }
}
