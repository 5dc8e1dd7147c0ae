import Foundation
import SecureStream

/// What a principal may hold at once. Every field has a server-wide default (a flag);
/// a principal in the config file may override any of them.
public struct PrincipalLimits: Sendable, Equatable {
    /// Request objects held (`create`); past it `create` is refused.
    public var requests = 1000
    /// Transfers in flight (sent and not yet DONE, `fetch` included); past it a send is
    /// refused, not queued: the client sees at once that it must wait, and the server
    /// holds no queue that a client could grow.
    public var transfers = 64
    /// Bytes held for the principal's calls: unread bytes across all its requests and
    /// sockets, socket bytes not yet sent, and what its calls stored (request headers,
    /// post values and bodies, credentials, cookies; docs/operations/budgets.md). At the limit every transfer
    /// and socket of the principal stops receiving until the client reads, new sends are
    /// refused, and so is every call that would store more.
    public var bufferedBytes = 256 << 20
    /// Connections open at once.
    public var connections = 128
    /// Raw sockets held (`socket.create`), open or not; past it `socket.create` is refused.
    public var sockets = 64

    public init() {}

    /// The limits under their config-file names, which are also the `limit` word of a
    /// `limit_exceeded` error.
    public static let keys = ["requests", "transfers", "bufferedBytes", "connections", "sockets"]

    /// The limit named `key` (one of `keys`); nil for an unknown name.
    public func value(_ key: String) -> Int? {
        switch key {
        case "requests": requests
        case "transfers": transfers
        case "bufferedBytes": bufferedBytes
        case "connections": connections
        case "sockets": sockets
        default: nil
        }
    }

    /// Sets the limit named `key` (one of `keys`); false for an unknown name.
    public mutating func set(_ key: String, _ value: Int) -> Bool {
        switch key {
        case "requests": requests = value
        case "transfers": transfers = value
        case "bufferedBytes": bufferedBytes = value
        case "connections": connections = value
        case "sockets": sockets = value
        default: return false
        }
        return true
    }
}

/// A principal as the config file declares it: a name, how it proves who it is (a
/// token, stored only as its SHA-256, and/or the uid of Unix-socket peers) and its
/// limits.
public struct PrincipalConfig: Sendable, Equatable {
    public var name: String
    /// SHA-256 of the token (32 bytes); nil: this principal cannot `auth` with a token.
    public var tokenHash: [UInt8]?
    /// Unix-socket peers with this uid act as this principal without a token.
    public var uid: UInt32?
    /// An admin sees the whole server in `server.stats`.
    public var isAdmin = false
    /// May authenticate with NEGOTIATE, that is as xhrpcd's own Kerberos identity
    /// (`"negotiate": true`; `ServerConfig.allowNegotiate`).
    public var mayNegotiate = false
    public var limits: PrincipalLimits
    /// The principal's own upload and download roots (`"uploadRoot"`, `"downloadRoot"`);
    /// nil: its folder below the server's (`Server.fileRoot`).
    public var uploadRoot: String?
    public var downloadRoot: String?

    public init(name: String, tokenHash: [UInt8]?, uid: UInt32?, isAdmin: Bool, mayNegotiate: Bool = false,
                limits: PrincipalLimits) {
        self.name = name
        self.tokenHash = tokenHash
        self.uid = uid
        self.isAdmin = isAdmin
        self.mayNegotiate = mayNegotiate
        self.limits = limits
    }

    /// Names are used in file names (the cookie store) and logs: 1 to 64 of
    /// A-Z a-z 0-9 . _ -, not starting with a dot. "local" is the socket owner's.
    public static func isValidName(_ name: String) -> Bool {
        !name.hasPrefix(".") && ObjectName.isPlainName(name, maxBytes: 64, also: "._-")
    }
}

/// Tokens are kept and compared only as SHA-256 digests. A token is a long random
/// secret (docs/operations/listeners-and-principals.md says how to make one), so a fast hash is enough: there is no
/// dictionary to slow down, and comparing digests in constant time hides how much of a
/// guess was right.
public enum TokenDigest {
    /// The SHA-256 of `token`'s UTF-8 bytes.
    public static func sha256(_ token: String) -> [UInt8] { Digest.sha256(Array(token.utf8)) }

    /// Parses 64 hexadecimal digits.
    public static func parseHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for i in stride(from: 0, to: 64, by: 2) {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Whether two digests are equal, in time that does not depend on where they differ.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool { Digest.constantTimeEqual(a, b) }
}
