extension EgressPolicy {
    /// One `--allow` or `--deny` pattern, parsed once at start-up so a typo stops the
    /// server with a clear message instead of silently matching nothing.
    ///
    /// Accepted syntax (a pattern is one of these, with no white space):
    /// - `example.com` — that host name exactly; case and one trailing dot do not matter.
    /// - `*.example.com` — any subdomain of example.com at any depth, not example.com
    ///   itself (list both to mean both).
    /// - `192.0.2.7`, `10.0.0.0/8` — an IPv4 address or CIDR range, in dotted decimal
    ///   with four parts and no leading zeros (`010.0.0.1` is refused: `inet_aton` reads
    ///   it as 8.0.0.1).
    /// - `::1`, `2001:db8::/32`, `[::1]`, `[2001:db8::]/32` — an IPv6 address or range.
    ///   An IPv4-mapped address longer than /96 (`::ffff:10.0.0.0/104`) is refused in
    ///   favour of its IPv4 form, which covers both spellings.
    /// - Any of these followed by `:port` (1–65535) to match that port only:
    ///   `example.com:443`, `*.example.com:8443`, `10.0.0.1:8080`, `10.0.0.0/8:443`.
    ///   An IPv6 address takes a port only in brackets, with the prefix after the
    ///   bracket or inside it: `[::1]:443`, `[2001:db8::]/32:443`,
    ///   `[2001:db8::/32]:443`. (Without brackets, `::1:443` is read as the address ::1:443, not as
    ///   ::1 port 443.)
    /// Without a port a pattern matches every port. A CIDR range must have no bits set
    /// after its prefix (`10.0.0.1/8` is refused as a likely typo).
    public struct Pattern: Sendable, Equatable, CustomStringConvertible {
        /// What a pattern matches, before its port.
        public enum Host: Sendable, Equatable {
            /// One host name, lower case, without a trailing dot.
            case name(String)
            /// Every name ending in `.` + the domain (lower case, no trailing dot).
            case subdomains(of: String)
            /// URL hosts that are IP literals in the range, and (in the address check)
            /// connections to addresses in it.
            case addresses(AddressRange)
        }

        /// What the pattern matches, whatever the port.
        public let host: Host
        /// The only port the pattern matches, or nil for every port.
        public let port: Int?

        /// A pattern built from parts already checked.
        public init(host: Host, port: Int? = nil) {
            self.host = host
            self.port = port
        }

        /// Parses one pattern in the syntax above.
        public init(parsing text: String) throws(ParseError) {
            self = try PatternParser(text).parse()
        }

        /// The pattern in canonical form (lower case, ranges without host bits, single
        /// addresses without /32 or /128); parsing it gives the same pattern back.
        public var description: String {
            let suffix = port.map { ":\($0)" } ?? ""
            switch host {
            case let .name(name):
                return name + suffix
            case let .subdomains(domain):
                return "*." + domain + suffix
            case let .addresses(range):
                guard port != nil, range.base.bitWidth == 128 else { return range.description + suffix }
                let prefix = range.prefixLength == 128 ? "" : "/\(range.prefixLength)"
                return "[\(range.base)]" + prefix + suffix
            }
        }

        /// Whether the pattern admits `port`.
        func matches(port: Int) -> Bool {
            self.port == nil || self.port == port
        }

        /// Whether a host name (lower case, without trailing dot) and port match.
        func matches(name: String, port: Int) -> Bool {
            guard matches(port: port) else { return false }
            switch host {
            case let .name(exact): return name == exact
            case let .subdomains(domain): return name.hasSuffix("." + domain)
            case .addresses: return false
            }
        }

        /// Whether an address and port match: only IP and CIDR patterns do.
        func matches(address: IPAddress, port: Int) -> Bool {
            guard matches(port: port), case let .addresses(range) = host else { return false }
            return range.contains(address)
        }
    }

    /// Why a pattern was refused. Each message quotes the pattern and says how to write
    /// it instead, since it is shown to whoever typed it on the command line.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        /// An empty argument, usually a stray comma or quote in a script.
        case empty
        /// Space or a control character: two patterns run together, or one split badly.
        case containsWhiteSpace(pattern: String)
        /// A URL (`http://…`) or a path where only a host belongs.
        case notAHost(pattern: String)
        /// A port with nothing before it (`:80`).
        case missingHost(pattern: String)
        /// A port that is not a decimal number from 1 to 65535.
        case invalidPort(pattern: String, port: String)
        /// A `*` anywhere but as a whole first label before a domain name.
        case invalidWildcard(pattern: String)
        /// A name that breaks DNS syntax; `problem` says where.
        case invalidName(pattern: String, problem: String)
        /// Something that looks like an address but is not one, or one spelt
        /// ambiguously (`010.0.0.1`, `0x7f.1`); `problem` says how to write it.
        case invalidAddress(pattern: String, problem: String)
        /// A prefix length that is not a number up to 32 (IPv4) or 128 (IPv6).
        case invalidPrefixLength(pattern: String, prefixLength: String, maximum: Int)
        /// A range with bits set after its prefix; `range` is the range it becomes
        /// once they are cleared.
        case hostBitsSet(pattern: String, range: String)
        /// An IPv4-mapped IPv6 address or range; `ipv4Pattern` is its IPv4 form.
        case ipv4Mapped(pattern: String, ipv4Pattern: String)

        /// The pattern as it was given.
        public var pattern: String {
            switch self {
            case .empty: return ""
            case let .containsWhiteSpace(p), let .notAHost(p), let .missingHost(p), let .invalidPort(p, _),
                 let .invalidWildcard(p), let .invalidName(p, _), let .invalidAddress(p, _),
                 let .invalidPrefixLength(p, _, _), let .hostBitsSet(p, _), let .ipv4Mapped(p, _):
                return p
            }
        }

        /// The message to print when the server refuses to start: it quotes the
        /// pattern and says how to write it.
        public var description: String {
            let quoted = "The egress pattern \"\(pattern)\""
            switch self {
            case .empty:
                return "An egress pattern is empty: give a host name, *.domain, an IP address or a CIDR range."
            case .containsWhiteSpace:
                return "\(quoted) contains white space: give one host name, *.domain, IP address or CIDR range per pattern."
            case .notAHost:
                return "\(quoted) is a URL: give only its host, optionally with :port (example.com:443)."
            case .missingHost:
                return "\(quoted) has no host before its port: write host:port (example.com:443)."
            case let .invalidPort(_, port):
                return "\(quoted) has the port \"\(port)\", which is not a number from 1 to 65535."
            case .invalidWildcard:
                return "\(quoted) is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."
            case let .invalidName(_, problem):
                return "\(quoted) is not a valid host name: \(problem)."
            case let .invalidAddress(_, problem):
                return "\(quoted) is not a valid IP address: \(problem)."
            case let .invalidPrefixLength(_, prefixLength, maximum):
                return "\(quoted) has the prefix length \"\(prefixLength)\", but the prefix of an IPv\(maximum == 32 ? 4 : 6) range is 0 to \(maximum)."
            case let .hostBitsSet(_, range):
                return "\(quoted) has bits set after its prefix: write the range as \(range)."
            case let .ipv4Mapped(_, ipv4Pattern):
                return "\(quoted) is an IPv4-mapped IPv6 range: write it as \(ipv4Pattern), which also covers the mapped form."
            }
        }
    }
}
