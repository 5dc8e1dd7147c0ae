extension IPAddress {
    /// Reads the host of a URL as an IP address, or returns nil when the host is a name.
    ///
    /// The egress policy must see the address libcurl will connect to, whatever the
    /// spelling, or a deny rule on 127.0.0.0/8 would let `http://0177.1/` through. So
    /// this accepts everything libcurl (7.88's URL parser normalises IPv4 hosts the way
    /// `inet_aton` reads them) and the system resolver treat as a literal:
    /// - IPv4 in one to four parts, each decimal, octal (leading `0`) or hexadecimal
    ///   (leading `0x`), the last part filling the remaining bytes: `127.0.0.1`,
    ///   `0177.0.0.1`, `0x7f.1`, `127.1`, `2130706433`. A single trailing dot is
    ///   ignored (`127.0.0.1.`), as the WHATWG URL standard does; taking it for a
    ///   literal can only make the policy stricter.
    /// - IPv6 in brackets, as in a URL (`[::1]`, `[0:0:0:0:0:0:0:1]`,
    ///   `[::ffff:127.0.0.1]`), or without them, as `CURLUPART_HOST` callers sometimes
    ///   strip them; the zone of a scoped address is dropped, written either as in RFC
    ///   6874 (`[fe80::1%25eth0]`) or raw (`[fe80::1%eth0]`), since the address alone
    ///   decides which rules apply.
    /// Anything else (a part too large, `08`, five parts, a bracketed IPv4) is not a
    /// literal: libcurl treats it as a name, and so does the policy.
    ///
    /// It reads the bytes of the host, not its `Character`s: every literal is ASCII, and a
    /// host with any other byte is not one whichever way it is read.
    public static func parseLiteral(_ host: String) -> IPAddress? {
        var host = host
        return host.withUTF8 { text -> IPAddress? in
            guard let first = text.first else { return nil }
            if first == UInt8(ascii: "[") {
                guard text.count >= 2, text[text.count - 1] == UInt8(ascii: "]") else { return nil }
                return parseIPv6(droppingZone: Substring(decoding: text[1..<(text.count - 1)], as: UTF8.self))
            }
            if text.contains(UInt8(ascii: ":")) { return parseIPv6(droppingZone: Substring(decoding: text, as: UTF8.self)) }
            let end = text[text.count - 1] == UInt8(ascii: ".") ? text.count - 1 : text.count
            return parseLooseIPv4(UnsafeBufferPointer(rebasing: text[..<end])).map(IPAddress.v4)
        }
    }

    /// An IPv6 address that may carry a zone (`fe80::1%25eth0` or `fe80::1%eth0`).
    static func parseIPv6(droppingZone text: Substring) -> IPAddress? {
        guard let percent = text.firstIndex(of: "%") else { return parseIPv6(text) }
        var zone = text[text.index(after: percent)...]
        if zone.hasPrefix("25"), zone.count > 2 { zone = zone.dropFirst(2) }
        guard !zone.isEmpty else { return nil }
        return parseIPv6(text[..<percent])
    }

    /// IPv4 as `inet_aton` reads it: one to four parts, each decimal, octal or hex.
    static func parseLooseIPv4(_ text: Substring) -> UInt32? {
        var text = text
        return text.withUTF8 { parseLooseIPv4($0) }
    }

    /// The same, on the text's bytes: this runs on the host of every request URL, so it
    /// walks the bytes once instead of splitting them into arrays.
    static func parseLooseIPv4(_ text: UnsafeBufferPointer<UInt8>) -> UInt32? {
        var value: UInt32 = 0
        var parts = 0
        var start = 0
        while true {
            var end = start
            while end < text.count, text[end] != UInt8(ascii: ".") { end += 1 }
            parts += 1
            guard parts <= 4, let number = looseNumber(UnsafeBufferPointer(rebasing: text[start..<end])) else { return nil }
            guard end < text.count else {
                // The last part fills the bytes the others left.
                let bits = 8 * (5 - parts)
                guard number < UInt64(1) << bits else { return nil }
                return value << bits | UInt32(number)
            }
            // Every part but the last is one byte.
            guard number < 256 else { return nil }
            value = value << 8 | UInt32(number)
            start = end + 1
        }
    }

    /// One part of a loose IPv4 address; nil when it is empty, has a stray character
    /// (an `8` in octal, a sign, a space) or exceeds 32 bits.
    private static func looseNumber(_ part: UnsafeBufferPointer<UInt8>) -> UInt64? {
        var digits = part[...]
        var radix: UInt64 = 10
        if digits.count >= 2, digits[digits.startIndex] == UInt8(ascii: "0"),
           digits[digits.startIndex + 1] | 0x20 == UInt8(ascii: "x") {
            radix = 16
            digits = digits.dropFirst(2)
        } else if digits.count >= 2, digits[digits.startIndex] == UInt8(ascii: "0") {
            radix = 8
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard let digit = hexDigitValue(byte), UInt64(digit) < radix else { return nil }
            value = value * radix + UInt64(digit)
            guard value <= UInt64(UInt32.max) else { return nil }
        }
        return value
    }

    /// IPv4 in the only form patterns and the tail of an IPv6 address accept: four
    /// decimal parts of 0 to 255 without leading zeros (`inet_pton`'s rule). A leading
    /// zero is refused because `010` means 8 to `inet_aton` and 10 to a reader.
    static func parseDottedQuad(_ text: Substring) -> UInt32? {
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard (1...3).contains(part.count), part.count == 1 || part.first != UInt8(ascii: "0") else { return nil }
            var byte: UInt32 = 0
            for c in part {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                byte = byte * 10 + UInt32(c - UInt8(ascii: "0"))
            }
            guard byte <= 255 else { return nil }
            value = value << 8 | byte
        }
        return value
    }

    /// IPv6 as `inet_pton` reads it (RFC 4291 §2.2): eight groups of one to four hex
    /// digits, at most one `::` standing for one or more zero groups, and optionally a
    /// dotted-quad IPv4 address as the last 32 bits.
    static func parseIPv6(_ text: Substring) -> IPAddress? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 45 else { return nil }
        let colon = UInt8(ascii: ":")
        var gap: Int?
        var i = 0
        while i + 1 < bytes.count {
            if bytes[i] == colon, bytes[i + 1] == colon {
                guard gap == nil else { return nil }
                gap = i
                i += 2
            } else {
                i += 1
            }
        }
        if let gap {
            guard let head = ipv6Groups(bytes[..<gap], mayEndInIPv4: false),
                  let tail = ipv6Groups(bytes[(gap + 2)...], mayEndInIPv4: true),
                  head.count + tail.count <= 7 else { return nil }
            return IPAddress(groups: head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail)
        }
        guard let all = ipv6Groups(bytes[...], mayEndInIPv4: true), all.count == 8 else { return nil }
        return IPAddress(groups: all)
    }

    /// The groups of one side of `::` (or of a whole address without one).
    private static func ipv6Groups(_ text: ArraySlice<UInt8>, mayEndInIPv4: Bool) -> [UInt16]? {
        guard !text.isEmpty else { return [] }
        let parts = text.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        var groups: [UInt16] = []
        for (i, part) in parts.enumerated() {
            if mayEndInIPv4, i == parts.count - 1, part.contains(UInt8(ascii: ".")) {
                guard let v4 = parseDottedQuad(Substring(decoding: part, as: UTF8.self)) else { return nil }
                groups.append(UInt16(v4 >> 16))
                groups.append(UInt16(v4 & 0xffff))
            } else {
                guard (1...4).contains(part.count) else { return nil }
                var group: UInt16 = 0
                for c in part {
                    guard let digit = hexDigitValue(c) else { return nil }
                    group = group << 4 | UInt16(digit)
                }
                groups.append(group)
            }
            guard groups.count <= 8 else { return nil }
        }
        return groups
    }

    private static func hexDigitValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
