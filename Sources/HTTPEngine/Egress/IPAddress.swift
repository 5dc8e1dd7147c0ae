/// An IPv4 or IPv6 address as a number, the form in which the egress policy compares
/// addresses with ranges.
///
/// The policy sees addresses in two ways: written in a URL (`IPAddress.parseLiteral`,
/// which accepts every spelling libcurl and `inet_aton` accept, so `0177.1` cannot pass
/// for something other than 127.0.0.1) and in binary in libcurl's open-socket callback
/// (`IPAddress.endpoint(ofSockaddr:length:)`). Both end here, so a rule is checked
/// against one value whatever the spelling.
///
/// IPv6 is held as two 64-bit halves rather than `UInt128`, which needs macOS 15 on
/// Darwin while the package still builds for macOS 13.
public enum IPAddress: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// An IPv4 address in host byte order: 127.0.0.1 is `0x7f00_0001`.
    case v4(UInt32)
    /// An IPv6 address as its high and low 64 bits, each in host byte order: `::1` is
    /// `.v6(high: 0, low: 1)`.
    case v6(high: UInt64, low: UInt64)

    /// The IPv6 address made of eight 16-bit groups, as written in text.
    init(groups: [UInt16]) {
        precondition(groups.count == 8, "an IPv6 address has eight groups")
        var high: UInt64 = 0, low: UInt64 = 0
        for g in groups[0..<4] { high = high << 16 | UInt64(g) }
        for g in groups[4..<8] { low = low << 16 | UInt64(g) }
        self = .v6(high: high, low: low)
    }

    /// The address made of the bytes of a `sockaddr_in`'s `sin_addr` (4 bytes) or a
    /// `sockaddr_in6`'s `sin6_addr` (16 bytes), in network byte order.
    init?<Bytes: Collection<UInt8>>(networkBytes bytes: Bytes) {
        switch bytes.count {
        case 4:
            self = .v4(bytes.reduce(0) { $0 << 8 | UInt32($1) })
        case 16:
            let high = bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
            let low = bytes.dropFirst(8).reduce(0) { $0 << 8 | UInt64($1) }
            self = .v6(high: high, low: low)
        default:
            return nil
        }
    }

    /// The eight 16-bit groups of an IPv6 address (nil for IPv4), the form RFC 5952's
    /// text is made from.
    var groups: [UInt16]? {
        guard case let .v6(high, low) = self else { return nil }
        return (0..<8).map { i in
            let half = i < 4 ? high : low
            return UInt16(truncatingIfNeeded: half >> (48 - 16 * UInt64(i % 4)))
        }
    }

    /// The text form: dotted decimal for IPv4, RFC 5952 for IPv6 (lower case, the
    /// longest run of two or more zero groups shortened to `::`, IPv4-mapped addresses
    /// as `::ffff:a.b.c.d`). It is what error messages and the policy's reasons show,
    /// so one address always reads the same way.
    public var description: String {
        switch self {
        case let .v4(value):
            return Self.dottedQuad(value)
        case let .v6(high, low):
            if high == 0, low >> 32 == 0xffff {
                return "::ffff:" + Self.dottedQuad(UInt32(truncatingIfNeeded: low))
            }
            return Self.compressedGroups(groups ?? [])
        }
    }

    static func dottedQuad(_ value: UInt32) -> String {
        "\(value >> 24).\(value >> 16 & 0xff).\(value >> 8 & 0xff).\(value & 0xff)"
    }

    /// RFC 5952 §4.2: shorten the longest run of at least two zero groups (the first
    /// such run on a tie); a single zero group stays `0`.
    static func compressedGroups(_ groups: [UInt16]) -> String {
        var bestStart = -1, bestLength = 0, runStart = -1
        for i in 0...groups.count {
            if i < groups.count, groups[i] == 0 {
                if runStart < 0 { runStart = i }
            } else if runStart >= 0 {
                if i - runStart > bestLength { bestStart = runStart; bestLength = i - runStart }
                runStart = -1
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard bestLength >= 2 else { return hex.joined(separator: ":") }
        let head = hex[..<bestStart].joined(separator: ":")
        let tail = hex[(bestStart + bestLength)...].joined(separator: ":")
        return head + "::" + tail
    }
}
