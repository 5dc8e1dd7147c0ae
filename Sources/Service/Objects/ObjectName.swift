import CShims
import Glibc
import Synchronization

/// Object handles (and the other ids the server hands out: subscriptions, detach
/// tokens): the client's own names, or generated ones that cannot be guessed.
enum ObjectName {
    static let generatedPrefix = "req_"

    static func isValid(_ name: String) -> Bool {
        !name.hasPrefix(generatedPrefix) && isPlainName(name, maxBytes: 128, also: ".:_-")
    }

    /// Whether `name` is 1 to `maxBytes` of ASCII letters, digits and the characters of
    /// `also`: the one syntax of the names clients and operators choose (request
    /// handles, principals).
    static func isPlainName(_ name: String, maxBytes: Int, also: String) -> Bool {
        let extra = Set(also.utf8)
        return !name.isEmpty && name.utf8.count <= maxBytes
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || extra.contains(b)
            }
    }

    /// `prefix` and 128 random bits from the system's generator (getrandom on Linux),
    /// as 32 hex digits; drawn again in the unlikely case that `taken` says so.
    static func generate(prefix: String = generatedPrefix, taken: (String) -> Bool) -> String {
        while true {
            let (a, b) = randomBits.withLock { $0.next128() }
            let name = prefix + hex(a) + hex(b)
            if !taken(name) { return name }
        }
    }

    private static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }

    /// One pool for the process: a `fetch` names itself on every call, and a system
    /// call per 8 bytes was two of the six a `fetch` made.
    private static let randomBits = Mutex(RandomBits())
}

/// Bits from getrandom(2), drawn 256 bytes at a time (the most one call always returns
/// whole) rather than 8 per call; each bit is handed out once.
struct RandomBits {
    private var pool = [UInt64](repeating: 0, count: 32)
    private var used = 32

    mutating func next128() -> (UInt64, UInt64) {
        if used == pool.count {
            let got = pool.withUnsafeMutableBytes { getrandom($0.baseAddress, $0.count, 0) }
            precondition(got == pool.count * 8, "getrandom(2) failed: \(errno)")
            used = 0
        }
        defer { used += 2 }
        return (pool[used], pool[used + 1])
    }
}
