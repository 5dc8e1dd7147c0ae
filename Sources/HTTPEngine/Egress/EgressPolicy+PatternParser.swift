extension EgressPolicy {
    /// Reads one pattern (syntax: `EgressPolicy.Pattern`). It is strict on purpose:
    /// every spelling it accepts has one meaning, and everything else is an error
    /// naming the pattern, so an operator never runs with a rule that matches nothing.
    struct PatternParser {
        let text: String

        init(_ text: String) {
            self.text = text
        }

        func parse() throws(ParseError) -> Pattern {
            guard !text.isEmpty else { throw .empty }
            guard !text.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7f })
            else { throw .containsWhiteSpace(pattern: text) }
            guard !text.contains("://") else { throw .notAHost(pattern: text) }
            let whole = Substring(text)
            if whole.first == "[" { return try parseBracketed(whole) }
            if whole.filter({ $0 == ":" }).count >= 2 {
                let (address, prefix) = split(whole, at: "/")
                let range = try ipv6Range(address, prefix: prefix,
                                          problem: "it is not IPv6 (an IPv6 address with a port is written [2001:db8::1]:443)")
                return Pattern(host: .addresses(range), port: nil)
            }
            let (host, portText) = split(whole, at: ":")
            guard !host.isEmpty else { throw .missingHost(pattern: text) }
            let port = try portText.map { (p) throws(ParseError) in try parsePort(p) }
            return Pattern(host: try parseUnbracketedHost(host), port: port)
        }

        /// `[v6]`, `[v6]:port`, `[v6]/len`, `[v6]/len:port`, `[v6/len]`, `[v6/len]:port`.
        private func parseBracketed(_ whole: Substring) throws(ParseError) -> Pattern {
            guard let close = whole.firstIndex(of: "]") else {
                throw .invalidAddress(pattern: text, problem: "the [ has no matching ]")
            }
            let (address, insidePrefix) = split(whole[whole.index(after: whole.startIndex)..<close], at: "/")
            var prefix = insidePrefix
            var rest = whole[whole.index(after: close)...]
            if rest.first == "/" {
                guard prefix == nil else {
                    throw .invalidAddress(pattern: text, problem: "it has two prefix lengths")
                }
                let (length, remainder) = split(rest.dropFirst(), at: ":")
                prefix = length
                rest = remainder.map { ":" + $0 } ?? ""
            }
            var port: Int?
            if rest.first == ":" {
                port = try parsePort(rest.dropFirst())
            } else if !rest.isEmpty {
                throw .invalidAddress(pattern: text, problem: "only /prefix or :port may follow the ]")
            }
            if IPAddress.parseDottedQuad(address) != nil {
                throw .invalidAddress(pattern: text, problem: "brackets are for IPv6 only; write an IPv4 address as 192.0.2.1:443")
            }
            let range = try ipv6Range(address, prefix: prefix, problem: "it is not IPv6")
            return Pattern(host: .addresses(range), port: port)
        }

        /// A name, a wildcard, an IPv4 address or an IPv4 range.
        private func parseUnbracketedHost(_ host: Substring) throws(ParseError) -> Pattern.Host {
            if host.contains("/") {
                let (address, prefix) = split(host, at: "/")
                guard looksNumeric(address) else { throw .notAHost(pattern: text) }
                guard let value = IPAddress.parseDottedQuad(address) else {
                    throw .invalidAddress(pattern: text, problem: "a CIDR range is an address in dotted decimal and a prefix length (10.0.0.0/8, 2001:db8::/32)")
                }
                return .addresses(try range(.v4(value), prefix: prefix))
            }
            if host.first == "*" {
                guard host.hasPrefix("*."), let domain = try? hostName(host.dropFirst(2)), !looksNumeric(domain)
                else { throw .invalidWildcard(pattern: text) }
                return .subdomains(of: domain)
            }
            if host.contains("*") { throw .invalidWildcard(pattern: text) }
            let withoutDot = host.last == "." ? host.dropLast() : host
            if looksNumeric(withoutDot) {
                if let value = IPAddress.parseDottedQuad(withoutDot) { return .addresses(try range(.v4(value), prefix: nil)) }
                if let value = IPAddress.parseLooseIPv4(withoutDot) {
                    throw .invalidAddress(pattern: text, problem: "libcurl would read it as \(IPAddress.v4(value)); write IPv4 addresses as four decimal numbers without leading zeros")
                }
                throw .invalidAddress(pattern: text, problem: "an IPv4 address is four numbers from 0 to 255 (192.0.2.1)")
            }
            return .name(try hostName(host))
        }

        /// The name in lower case without its trailing dot, checked against DNS rules
        /// (letters, digits, hyphens; `_` too, which some real hosts use).
        private func hostName(_ raw: Substring) throws(ParseError) -> String {
            let name = (raw.last == "." ? raw.dropLast() : raw).lowercased()
            guard name.unicodeScalars.allSatisfy(\.isASCII) else {
                throw .invalidName(pattern: text, problem: "write an internationalised name in its ASCII (xn--) form, as libcurl sends it")
            }
            guard !name.isEmpty, name.utf8.count <= 253 else {
                throw .invalidName(pattern: text, problem: "a name has 1 to 253 characters")
            }
            for label in name.split(separator: ".", omittingEmptySubsequences: false) {
                guard !label.isEmpty else { throw .invalidName(pattern: text, problem: "it has an empty label (two dots in a row, or a leading dot)") }
                guard label.utf8.count <= 63 else { throw .invalidName(pattern: text, problem: "the label \"\(label)\" is longer than 63 characters") }
                if let bad = label.first(where: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
                    throw .invalidName(pattern: text, problem: "it contains \"\(bad)\"; a name has letters, digits, hyphens and dots")
                }
                guard label.first != "-", label.last != "-" else {
                    throw .invalidName(pattern: text, problem: "the label \"\(label)\" begins or ends with a hyphen")
                }
            }
            return name
        }

        private func ipv6Range(_ address: Substring, prefix: Substring?, problem: String) throws(ParseError) -> AddressRange {
            guard !address.contains("%") else {
                throw .invalidAddress(pattern: text, problem: "a zone (%eth0) has no place in a pattern")
            }
            guard let value = IPAddress.parseIPv6(address) else {
                throw .invalidAddress(pattern: text, problem: problem)
            }
            let range = try range(value, prefix: prefix)
            // An IPv4 range spelt in mapped form would cover the mapped addresses but not
            // the plain IPv4 ones: refuse it and suggest the form that covers both.
            if range.prefixLength > 96, case let .v6(high, low) = value, high == 0, low >> 32 == 0xffff {
                let v4 = IPAddress.v4(UInt32(truncatingIfNeeded: low))
                let suggestion = range.prefixLength == 128 ? "\(v4)" : "\(v4)/\(range.prefixLength - 96)"
                throw .ipv4Mapped(pattern: text, ipv4Pattern: suggestion)
            }
            return range
        }

        private func range(_ address: IPAddress, prefix: Substring?) throws(ParseError) -> AddressRange {
            let maximum = address.bitWidth
            guard let prefix else {
                guard let single = AddressRange(address, prefixLength: maximum) else {
                    preconditionFailure("every address is a range of its full length")
                }
                return single
            }
            guard !prefix.isEmpty, prefix.count <= 3, prefix.allSatisfy(\.isASCIIDigit),
                  let length = Int(prefix), length <= maximum else {
                throw .invalidPrefixLength(pattern: text, prefixLength: String(prefix), maximum: maximum)
            }
            guard let range = AddressRange(address, prefixLength: length) else {
                throw .hostBitsSet(pattern: text, range: "\(address.masked(to: length))/\(length)")
            }
            return range
        }

        private func parsePort(_ text: Substring) throws(ParseError) -> Int {
            guard !text.isEmpty, text.count <= 5, text.allSatisfy(\.isASCIIDigit),
                  let port = Int(text), (1...65535).contains(port) else {
                throw .invalidPort(pattern: self.text, port: String(text))
            }
            return port
        }

        /// Whether every dot-separated part is a number as `inet_aton` would read one
        /// (`127`, `0177`, `0x7f`): such a host is an address to libcurl, never a name,
        /// so a pattern spelt that way must be a valid dotted-decimal address.
        private func looksNumeric(_ host: some StringProtocol) -> Bool {
            host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { part in
                let lower = part.lowercased()
                if lower.hasPrefix("0x") { return lower.dropFirst(2).allSatisfy(\.isHexDigit) }
                return !part.isEmpty && part.allSatisfy(\.isASCIIDigit)
            }
        }

        /// Splits at the first `separator`; the second half is nil when there is none.
        private func split(_ s: Substring, at separator: Character) -> (Substring, Substring?) {
            guard let i = s.firstIndex(of: separator) else { return (s, nil) }
            return (s[..<i], s[s.index(after: i)...])
        }
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
