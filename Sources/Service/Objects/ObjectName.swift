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
    /// handles, principals). `also` is a handful of characters, looked through for each
    /// other byte rather than made into a set on every call.
    static func isPlainName(_ name: String, maxBytes: Int, also: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maxBytes
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || also.utf8.contains(b)
            }
    }

    /// `prefix` and 128 random bits from the system's generator (getrandom on Linux),
    /// as 32 hex digits; drawn again in the unlikely case that `taken` says so.
    static func generate(prefix: String = generatedPrefix, taken: (String) -> Bool) -> String {
        while true {
            let (a, b) = randomBits.withLock { $0.next128() }
            let name = named(prefix, hex: a, b)
            if !taken(name) { return name }
        }
    }

    /// `prefix` and the 32 lower-case hex digits of `a` and `b`, written into one new
    /// string (a `fetch` names itself on every call: joining `String(radix:)` pieces
    /// made six strings for one).
    static func named(_ prefix: String, hex a: UInt64, _ b: UInt64) -> String {
        let start = prefix.utf8.count
        return String(unsafeUninitializedCapacity: start + 32) { out in
            _ = out.initialize(fromContentsOf: prefix.utf8)
            writeHex(a, into: out, at: start)
            writeHex(b, into: out, at: start + 16)
            return start + 32
        }
    }

    /// The 16 hex digits of `v`, most significant first, at `out[at...]`.
    private static func writeHex(_ v: UInt64, into out: UnsafeMutableBufferPointer<UInt8>, at: Int) {
        for d in 0..<16 {
            let nibble = UInt8(truncatingIfNeeded: v >> UInt64(60 - 4 * d)) & 0xF
            out[at + d] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
        }
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
