import HTTPEngine
import JSON

/// Where a credential may be used (RFC 9110 §11.5): a scheme, host and port (an
/// origin, or a proxy spoken to in `http`), and a realm — nil for "any realm of that
/// origin". The host is kept in lower case without IPv6 brackets, so `[::1]` and `::1`,
/// `Example.com` and `example.com` are one space.
struct ProtectionSpace: Hashable {
    var scheme: String
    var host: String
    var port: Int
    var realm: String?

    init(scheme: String, host: String, port: Int, realm: String?) {
        self.scheme = scheme.lowercased()
        self.host = ProtectionSpace.normalizedHost(host)
        self.port = port
        self.realm = realm
    }

    /// Lower case, brackets of an IPv6 literal removed.
    static func normalizedHost(_ host: String) -> String {
        var h = host.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        return h
    }

    /// The port a scheme uses when none is given.
    static func defaultPort(_ scheme: String) -> Int { scheme == "http" ? 80 : 443 }

    /// Whether this space's origin is `target`'s (realm aside).
    func isOrigin(of target: URLTarget) -> Bool {
        scheme == target.scheme.lowercased() && port == target.port && host == ProtectionSpace.normalizedHost(target.host)
    }

    /// The same space with another realm.
    func withRealm(_ realm: String?) -> ProtectionSpace {
        ProtectionSpace(scheme: scheme, host: host, port: port, realm: realm)
    }
}

/// A credential kept for a protection space (`credentials.set`). `auth` nil: whichever
/// scheme the server challenges with. The password is never logged, listed or shown in
/// an error; it is written only to the principal's credential store file.
struct StoredCredential: Equatable {
    var space: ProtectionSpace
    var auth: AuthScheme?
    var user: String
    var password: String
}

/// What a challenge matched: the credential to send, and the one scheme to offer.
struct CredentialMatch: Equatable {
    var user: String
    var password: String
    var auth: AuthScheme
}

/// One principal's credentials, one per protection space. Lives on the `Principal`,
/// so another principal's table is never looked at; `CredentialPersistence` keeps it on
/// disk. Plain values, no I/O.
struct CredentialTable {
    private(set) var entries: [ProtectionSpace: StoredCredential] = [:]
    /// The bytes the entries hold (`StoredCredential.heldBytes`), kept in step by `set`
    /// and `remove`: they count in the principal's `bufferedBytes`.
    private(set) var byteCount = 0

    /// Most credentials a principal may keep: the table is small by nature (one per
    /// site it logs in to), and a bound keeps a client from growing the server's memory
    /// and store without limit.
    static let maxEntries = 1000

    /// Adds or replaces the credential of `c.space`. Returns false when the table is
    /// full and the space is new.
    mutating func set(_ c: StoredCredential) -> Bool {
        guard entries[c.space] != nil || entries.count < CredentialTable.maxEntries else { return false }
        byteCount += growth(setting: c)
        entries[c.space] = c
        return true
    }

    /// How many bytes `set(c)` would add (negative when it replaces a longer entry).
    func growth(setting c: StoredCredential) -> Int {
        c.heldBytes - (entries[c.space]?.heldBytes ?? 0)
    }

    /// Removes the credential of `space` (only when its user is `user`, if given).
    mutating func remove(_ space: ProtectionSpace, user: String?) -> Bool {
        guard let c = entries[space], user == nil || c.user == user else { return false }
        entries[space] = nil
        byteCount -= c.heldBytes
        return true
    }

    /// Every credential, in a stable order (scheme, host, port, realm).
    var sorted: [StoredCredential] {
        func key(_ c: StoredCredential) -> (String, String, Int, Int, String) {
            (c.space.scheme, c.space.host, c.space.port, c.space.realm == nil ? 0 : 1, c.space.realm ?? "")
        }
        return entries.values.sorted { key($0) < key($1) }
    }

    /// The credential for a response that challenged with `challenges` from `origin`
    /// (`scheme://host:port` of the URL that answered, or of the proxy). The challenges'
    /// realms are tried in order, each against its exact-realm entry, then the
    /// any-realm entry of the origin. An entry with an `auth` is used only when that
    /// scheme was challenged (a Digest credential is never sent as Basic); without,
    /// the strongest scheme challenged for its realm is offered (Negotiate, NTLM,
    /// Digest, Basic — libcurl's order of preference). Schemes libcurl does not speak
    /// are ignored, and so is NEGOTIATE unless the principal `mayNegotiate` (it would
    /// answer with xhrpcd's own Kerberos identity). Nil: nothing matches, and the
    /// response stands as it came.
    func match(origin: ProtectionSpace, challenges: [AuthChallenge], mayNegotiate: Bool = false) -> CredentialMatch? {
        let usable = challenges.compactMap { c in c.known.map { (scheme: $0, realm: c.realm) } }
            .filter { mayNegotiate || $0.scheme != .negotiate }
        guard !usable.isEmpty else { return nil }
        func pick(_ entry: StoredCredential, among offered: [AuthScheme]) -> CredentialMatch? {
            let scheme: AuthScheme?
            if let wanted = entry.auth {
                scheme = offered.contains(wanted) ? wanted : nil
            } else {
                scheme = CredentialTable.preference.first(where: offered.contains)
            }
            return scheme.map { CredentialMatch(user: entry.user, password: entry.password, auth: $0) }
        }
        for c in usable {
            guard let realm = c.realm, let entry = entries[origin.withRealm(realm)] else { continue }
            if let m = pick(entry, among: usable.filter { $0.realm == realm }.map(\.scheme)) { return m }
        }
        if let entry = entries[origin.withRealm(nil)] {
            return pick(entry, among: usable.map(\.scheme))
        }
        return nil
    }

    /// libcurl's preference among the schemes a server offers (`CURLAUTH_ANY`).
    static let preference: [AuthScheme] = [.negotiate, .ntlm, .digest, .basic]
}

extension StoredCredential {
    /// What the entry holds: its strings and one entry's overhead (`HeldBytes.perEntry`).
    var heldBytes: Int {
        HeldBytes.entry(user, password) + space.scheme.utf8.count + space.host.utf8.count + (space.realm?.utf8.count ?? 0)
    }

    /// The entry as `credentials.list` shows it: everything but the password.
    var listEntry: JSONValue {
        ["scheme": .string(space.scheme), "host": .string(space.host), "port": .int(Int64(space.port)),
         "realm": space.realm.map(JSONValue.string) ?? .null, "auth": auth.map { .string($0.rawValue) } ?? .null,
         "user": .string(user)]
    }
}
