import Foundation

/// The principals built from the configuration, checked once at start: names unique and
/// valid, uids and tokens each claimed by one principal only.
struct PrincipalTable {
    static let ownerName = "local"

    var byName: [String: Principal] = [:]
    var byUID: [UInt32: Principal] = [:]
    var tokens: [(digest: [UInt8], principal: Principal)] = []
    let owner: Principal

    init(_ config: ServerConfig) throws {
        let serverUID = UInt32(geteuid())
        var owner: Principal?
        for c in config.principals {
            guard PrincipalConfig.isValidName(c.name) else {
                throw StartupError.invalidPrincipalName(c.name)
            }
            guard c.name != Self.ownerName else {
                throw StartupError.reservedPrincipalName(serverUID: serverUID)
            }
            guard byName[c.name] == nil else { throw StartupError.duplicatePrincipal(c.name) }
            guard c.tokenHash != nil || c.uid != nil else {
                throw StartupError.unreachablePrincipal(c.name)
            }
            let p = try Principal(name: c.name, isAdmin: c.isAdmin, mayNegotiate: c.mayNegotiate, limits: c.limits)
            byName[c.name] = p
            if let uid = c.uid {
                guard byUID[uid] == nil else { throw StartupError.duplicateUID(uid) }
                byUID[uid] = p
                if uid == serverUID { owner = p }
            }
            if let digest = c.tokenHash {
                guard !tokens.contains(where: { TokenDigest.equal($0.digest, digest) }) else {
                    throw StartupError.duplicateToken(principal: c.name)
                }
                tokens.append((digest, p))
            }
        }
        if owner == nil {
            let local = try Principal(name: Self.ownerName, isAdmin: true, mayNegotiate: config.allowNegotiate,
                                      limits: config.limits)
            byName[Self.ownerName] = local
            owner = local
        }
        self.owner = owner!
    }
}
