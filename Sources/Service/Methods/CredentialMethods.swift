import HTTPEngine
import JSON
import JSONRPC

/// `credentials.set`, `credentials.list`, `credentials.remove`: the caller's principal's
/// credentials per protection space (`CredentialTable`), used when a response challenges
/// one of its requests (`HTTPRequest+Challenge.swift`). Passwords go in, never out.
extension Server {
    func registerCredentialMethods() {
        registry.register("credentials.set", params: ["host", "port?", "scheme?", "realm?", "auth?", "user", "password"]) {
            [unowned self] call in
            let s = try session(call)
            let p = call.params
            let space = try Self.protectionSpace(p)
            let auth = try p.optionalWord("auth", oneOf: ["BASIC", "DIGEST", "NTLM", "NEGOTIATE"]).flatMap(AuthScheme.init(rawValue:))
            try s.principal.checkMayUse(auth)
            let user = try p.string("user")
            let password = try p.string("password")
            try HTTPSyntax.checkCredential(user, name: "user")
            try HTTPSyntax.checkCredential(password, name: "password")
            try Self.checkLength(user, "user")
            try Self.checkLength(password, "password")
            let credential = StoredCredential(space: space, auth: auth, user: user, password: password)
            try s.principal.checkRoom(s.principal.credentials.growth(setting: credential), for: "credentials.set")
            guard s.principal.credentials.set(credential) else {
                throw ServiceError.limitExceeded("credentials", max: CredentialTable.maxEntries,
                                                 "Too many credentials: principal '\(s.principal.name)' keeps at most \(CredentialTable.maxEntries); remove some first")
            }
            try credentials.save(s.principal)
            return .result(true)
        }

        registry.register("credentials.list", params: []) { [unowned self] call in
            let s = try session(call)
            return .result(["credentials": .array(s.principal.credentials.sorted.map(\.listEntry))])
        }

        registry.register("credentials.remove", params: ["host", "port?", "scheme?", "realm?", "user?"]) { [unowned self] call in
            let s = try session(call)
            let p = call.params
            let space = try Self.protectionSpace(p)
            let user = try p.optionalString("user")
            let removed = s.principal.credentials.remove(space, user: user)
            if removed { try credentials.save(s.principal) }
            return .result(["removed": .bool(removed)])
        }
    }

    /// Longest user name, password or realm kept, in bytes: with `CredentialTable.maxEntries`
    /// it bounds a principal's store well below `CredentialPersistence.maxBytes`, so a
    /// store the server wrote is always one it loads again.
    static let maxFieldBytes = 4096

    private static func checkLength(_ value: String, _ name: String) throws(RPCError) {
        guard value.utf8.count <= maxFieldBytes else {
            throw RPCError.invalidParams("'\(name)' must be at most \(maxFieldBytes) bytes")
        }
    }

    /// The protection space named by `host`, `port?`, `scheme?` (default `https`; the
    /// port defaults to the scheme's) and `realm?` (absent: any realm of the origin).
    private static func protectionSpace(_ p: Params) throws(RPCError) -> ProtectionSpace {
        let scheme = try p.optionalWord("scheme", oneOf: ["https", "http"]) ?? "https"
        let host = try HTTPSyntax.host(p)
        let port = Int(try p.optionalInt("port", in: 1...65535) ?? Int64(ProtectionSpace.defaultPort(scheme)))
        let realm = try p.optionalString("realm")
        if let realm {
            try HTTPSyntax.checkCredential(realm, name: "realm")
            try checkLength(realm, "realm")
        }
        return ProtectionSpace(scheme: scheme, host: host, port: port, realm: realm)
    }
}
