import HTTPEngine
import JSON
import JSONRPC

/// Proxies: a request's own HTTP proxy (`enableHttpProxy`, `disableHttpProxy`,
/// pre-send options) and the principal's routing through the server's egress proxy
/// (`enableSecureCommunication` and its two companions;
/// docs/guide/tls-proxies-and-auth.md). A request's own proxy wins over the egress proxy.
extension Server {
    func registerProxyMethods() {
        onRequest("enableHttpProxy", params: ["host", "port", "user?", "password?", "auth?"]) { r, call in
            let proxy = try Self.proxySettings(call.params)
            try r.checkOptionsAllowed("enableHttpProxy")
            r.proxy = proxy
            return true
        }

        onRequest("disableHttpProxy") { r, _ in
            try r.checkOptionsAllowed("disableHttpProxy")
            r.proxy = nil
            return true
        }

        registry.register("enableSecureCommunication", params: []) { [unowned self] call in
            let s = try session(call)
            guard config.egressProxy != nil else {
                throw ServiceError.needsConfiguration("No egress proxy is configured; start the server with --egress-proxy http://host:port to offer secure communication")
            }
            s.principal.secureCommunication = true
            return .result(true)
        }

        registry.register("disableSecureCommunication", params: []) { [unowned self] call in
            try session(call).principal.secureCommunication = false
            return .result(true)
        }

        registry.register("isSecureCommunicationEnabled", params: []) { [unowned self] call in
            .result(.bool(try session(call).principal.secureCommunication))
        }
    }

    /// The proxy of `enableHttpProxy`'s parameters, and of `fetch`'s `proxy`.
    static func proxySettings(_ p: Params) throws(RPCError) -> ProxySettings {
        let host = try HTTPSyntax.host(p)
        let port = Int(try p.int("port", in: 1...65535))
        let auth = try p.optionalWord("auth", oneOf: ["BASIC", "DIGEST", "NTLM"]).flatMap(AuthScheme.init(rawValue:)) ?? .basic
        let user = try p.optionalString("user")
        let password = try p.optionalString("password")
        try HTTPSyntax.checkCredential(user, name: "user")
        try HTTPSyntax.checkCredential(password, name: "password")
        return ProxySettings(host: host, port: port, user: user, password: password, auth: auth)
    }
}
