extension EgressPolicy {
    /// A CIDR range of IPv4 or IPv6 addresses: a base address with every bit after the
    /// prefix clear, and the prefix length. A single address is the range of its full
    /// length (/32, /128).
    public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
        /// The first address of the range; the bits after `prefixLength` are zero.
        public let base: IPAddress
        /// How many leading bits every address of the range shares with `base`.
        public let prefixLength: Int

        /// The range of `prefixLength` leading bits of `address`, or nil when the
        /// prefix is longer than the address or `address` has bits set after it (a
        /// range written that way is usually a typo for another one).
        public init?(_ address: IPAddress, prefixLength: Int) {
            guard prefixLength >= 0, prefixLength <= address.bitWidth,
                  address.masked(to: prefixLength) == address else { return nil }
            self.base = address
            self.prefixLength = prefixLength
        }

        /// Builds a range of the constant tables, which are written correctly.
        init(_ text: String, _ prefixLength: Int) {
            let address = IPAddress.parseLiteral(text)
            guard let address, let range = AddressRange(address, prefixLength: prefixLength) else {
                preconditionFailure("bad built-in range \(text)/\(prefixLength)")
            }
            self = range
        }

        /// Whether `address` lies in the range. An IPv4 range holds no IPv6 address and
        /// the reverse; the embedded IPv4 of an IPv6 address is compared separately
        /// (see `EgressPolicy.embeddedIPv4`).
        public func contains(_ address: IPAddress) -> Bool {
            address.bitWidth == base.bitWidth && address.masked(to: prefixLength) == base
        }

        /// `10.0.0.0/8`, `2001:db8::/32`; a single address has no suffix (`::1`).
        public var description: String {
            prefixLength == base.bitWidth ? base.description : "\(base)/\(prefixLength)"
        }
    }

    /// A range the address check denies unless an allow pattern covers it
    /// (docs/security/egress.md): addresses that reach the host itself, its private
    /// networks, its cloud's metadata service, or that hide an IPv4 destination inside IPv6.
    struct SpecialRange: Sendable {
        let range: AddressRange
        /// What the range is, as the denial's reason names it.
        let name: String
    }

    /// The special-purpose ranges, in the order they are tried: for IPv6, `::` and
    /// `::1` come before the IPv4-compatible `::/96` that contains them, so they are
    /// reported as what they are.
    static let specialRanges: [SpecialRange] = [
        SpecialRange(range: AddressRange("0.0.0.0", 8), name: "unspecified"),
        SpecialRange(range: AddressRange("10.0.0.0", 8), name: "private, RFC 1918"),
        SpecialRange(range: AddressRange("100.64.0.0", 10), name: "shared address space, CGNAT"),
        SpecialRange(range: AddressRange("127.0.0.0", 8), name: "loopback"),
        SpecialRange(range: AddressRange("169.254.0.0", 16), name: "link-local, cloud metadata"),
        SpecialRange(range: AddressRange("172.16.0.0", 12), name: "private, RFC 1918"),
        SpecialRange(range: AddressRange("192.168.0.0", 16), name: "private, RFC 1918"),
        SpecialRange(range: AddressRange("224.0.0.0", 4), name: "multicast"),
        SpecialRange(range: AddressRange("255.255.255.255", 32), name: "broadcast"),
        SpecialRange(range: AddressRange("::", 128), name: "unspecified"),
        SpecialRange(range: AddressRange("::1", 128), name: "loopback"),
        SpecialRange(range: AddressRange("::ffff:0:0", 96), name: "IPv4-mapped"),
        SpecialRange(range: AddressRange("::", 96), name: "IPv4-compatible"),
        SpecialRange(range: AddressRange("64:ff9b::", 96), name: "NAT64"),
        SpecialRange(range: AddressRange("64:ff9b:1::", 48), name: "local-use NAT64"),
        SpecialRange(range: AddressRange("2001::", 32), name: "Teredo"),
        SpecialRange(range: AddressRange("2002::", 16), name: "6to4"),
        SpecialRange(range: AddressRange("fc00::", 7), name: "unique local, ULA"),
        SpecialRange(range: AddressRange("fe80::", 10), name: "link-local"),
        SpecialRange(range: AddressRange("ff00::", 8), name: "multicast"),
    ]

    /// The first special-purpose range holding `address`, if any.
    static func specialRange(of address: IPAddress) -> SpecialRange? {
        specialRanges.first { $0.range.contains(address) }
    }

    /// An IPv4 address carried inside an IPv6 one.
    struct EmbeddedIPv4: Sendable, Equatable {
        let address: IPAddress
        /// True when the IPv4 address is where the connection ends up (IPv4-mapped,
        /// IPv4-compatible, NAT64 64:ff9b::/96), so the IPv6 address is merely another
        /// spelling of it; false when it is a relay on the way (the 6to4 router, the
        /// Teredo server and client).
        let isDestination: Bool
    }

    /// The IPv4 addresses `address` embeds.
    ///
    /// Each is checked against the deny patterns and the special ranges like a plain
    /// IPv4 address, so `::ffff:127.0.0.1` or `64:ff9b::a9fe:a9fe` cannot reach what
    /// `127.0.0.1` or `169.254.169.254` may not. The local-use NAT64 prefix
    /// 64:ff9b:1::/48 is not decoded: where the IPv4 address sits depends on the
    /// prefix length the network chose (RFC 6052 §2.2), so the range is only special.
    static func embeddedIPv4(in address: IPAddress) -> [EmbeddedIPv4] {
        guard case let .v6(high, low) = address else { return [] }
        let low32 = IPAddress.v4(UInt32(truncatingIfNeeded: low))
        if high == 0, low >> 32 == 0xffff {                                    // ::ffff:0:0/96
            return [EmbeddedIPv4(address: low32, isDestination: true)]
        }
        if high == 0, low >> 32 == 0, low > 1 {                                // ::/96 but :: and ::1
            return [EmbeddedIPv4(address: low32, isDestination: true)]
        }
        if high == 0x0064_ff9b_0000_0000, low >> 32 == 0 {                      // 64:ff9b::/96
            return [EmbeddedIPv4(address: low32, isDestination: true)]
        }
        if high >> 48 == 0x2002 {                                              // 2002:V4ADDR::/48
            return [EmbeddedIPv4(address: .v4(UInt32(truncatingIfNeeded: high >> 16)), isDestination: false)]
        }
        if high >> 32 == 0x2001_0000 {                                         // RFC 4380 §4
            let server = IPAddress.v4(UInt32(truncatingIfNeeded: high))
            let client = IPAddress.v4(~UInt32(truncatingIfNeeded: low))       // stored inverted
            return [EmbeddedIPv4(address: server, isDestination: false),
                    EmbeddedIPv4(address: client, isDestination: false)]
        }
        return []
    }
}

extension IPAddress {
    /// 32 or 128.
    var bitWidth: Int {
        if case .v4 = self { return 32 }
        return 128
    }

    /// The address with every bit after the first `prefixLength` cleared.
    func masked(to prefixLength: Int) -> IPAddress {
        switch self {
        case let .v4(value):
            let mask: UInt32 = prefixLength <= 0 ? 0 : prefixLength >= 32 ? .max : ~(UInt32.max >> UInt32(prefixLength))
            return .v4(value & mask)
        case let .v6(high, low):
            func mask(_ bits: Int) -> UInt64 { bits <= 0 ? 0 : bits >= 64 ? .max : ~(UInt64.max >> UInt64(bits)) }
            return .v6(high: high & mask(prefixLength), low: low & mask(prefixLength - 64))
        }
    }
}
