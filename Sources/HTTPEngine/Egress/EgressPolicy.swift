/// Where the server may send requests for its clients (docs/security/egress.md).
///
/// A server that fetches URLs for others can be turned against the network it sits in:
/// a client asks for `http://169.254.169.254/` (the cloud's metadata service, with its
/// credentials), `http://127.0.0.1:6379/` (a local database), or a name whose DNS
/// answer points inside. The policy is two checks, and a request goes out only when
/// both pass, on every redirect hop:
///
/// 1. `checkHost`, before the transfer starts: the URL's host and port against the
///    operator's `--allow` and `--deny` patterns. A deny pattern always wins; when any
///    allow pattern exists, only hosts it matches pass.
/// 2. `checkAddress`, in libcurl's open-socket callback, on the address about to be
///    connected to: special-purpose ranges (loopback, private, link-local, CGNAT,
///    unspecified, multicast, broadcast, and IPv6 forms that embed IPv4) are denied
///    unless an allow IP/CIDR pattern covers the address, and deny IP/CIDR patterns
///    apply. Checking the connected address, not the resolved name, is what stops DNS
///    rebinding: the answer that counts is the one used.
///
/// The value is pure (no I/O, no DNS, no libcurl), built once from the command line and
/// shared by every transfer, so it is `Sendable` and can be tested alone.
public struct EgressPolicy: Sendable {
    /// The `--allow` patterns, in the order given.
    public let allowPatterns: [Pattern]
    /// The `--deny` patterns, in the order given.
    public let denyPatterns: [Pattern]

    /// The policy with no patterns: every host passes check (1), and check (2) denies
    /// only the special-purpose ranges.
    public init() {
        self.init(allowPatterns: [], denyPatterns: [])
    }

    /// A policy from patterns already parsed.
    public init(allowPatterns: [Pattern], denyPatterns: [Pattern]) {
        self.allowPatterns = allowPatterns
        self.denyPatterns = denyPatterns
    }

    /// Parses the `--allow` and `--deny` arguments; the first bad one is thrown, its
    /// message quoting it, so the server refuses to start rather than run with a rule
    /// that cannot match.
    public init(allow: [String], deny: [String]) throws(ParseError) {
        var allowPatterns: [Pattern] = [], denyPatterns: [Pattern] = []
        for text in allow { allowPatterns.append(try Pattern(parsing: text)) }
        for text in deny { denyPatterns.append(try Pattern(parsing: text)) }
        self.init(allowPatterns: allowPatterns, denyPatterns: denyPatterns)
    }

    /// The outcome of a check.
    public enum Decision: Equatable, Sendable {
        case allowed
        /// `reason` is one sentence naming the host or address and the pattern or range
        /// that decided; it is shown after "Denied by egress policy: ".
        case denied(reason: String)
    }

    /// Check (1): the URL's host, as written in it, and its effective port (the
    /// scheme's default when the URL gives none).
    ///
    /// The host may be in any case, with a trailing dot, and an IPv6 literal with or
    /// without brackets and zone. An IP literal, in any spelling libcurl accepts
    /// (`0177.1`, `2130706433`, `[::ffff:127.0.0.1]`), is compared as the address it
    /// denotes with the IP and CIDR patterns only. An IPv6 literal that embeds IPv4
    /// addresses is also denied by a deny pattern on any of them (6to4 and Teredo relays
    /// included), and admitted by an allow pattern on the embedded address only when
    /// that address is the destination (mapped, compatible, NAT64). A name is compared with the name and wildcard patterns only; what it
    /// resolves to is check (2)'s business. Names should be passed in the ASCII (`xn--`)
    /// form libcurl resolves, which is what patterns are written in.
    ///
    /// This check does not apply the special-purpose ranges, which belong to check (2).
    /// When a proxy is used, check (2) sees the proxy's address only, so the caller
    /// should then also run `checkAddress` on `IPAddress.parseLiteral(host)` for a
    /// literal host: the proxy would otherwise reach 127.0.0.1 on its own machine.
    public func checkHost(_ host: String, port: Int) -> Decision {
        checkHost(host, literal: IPAddress.parseLiteral(host), port: port)
    }

    /// `checkHost` on a host already read as a literal: `literal` is
    /// `IPAddress.parseLiteral(host)` (`URLTarget.literal`).
    func checkHost(_ host: String, literal: IPAddress?, port: Int) -> Decision {
        if let address = literal {
            return checkLiteralHost(host, address, port: port)
        }
        var name = host.lowercased()
        if name.last == "." { name.removeLast() }
        let subject = Self.endpoint(name, port: port)
        if let rule = denyPatterns.first(where: { $0.matches(name: name, port: port) }) {
            return .denied(reason: "\(subject) matches the deny pattern \(rule).")
        }
        guard allowPatterns.isEmpty || allowPatterns.contains(where: { $0.matches(name: name, port: port) }) else {
            return .denied(reason: "\(subject) matches no allow pattern.")
        }
        return .allowed
    }

    private func checkLiteralHost(_ host: String, _ address: IPAddress, port: Int) -> Decision {
        // The host as the reasons name it, written only for a denial: the allowed
        // request, the common one, builds no text.
        func subject() -> String {
            let subject = Self.endpoint(host.lowercased(), port: port)
            return Self.writtenForm(of: host) == address.description ? subject : subject + ", which is \(address),"
        }
        let embedded = Self.embeddedIPv4(in: address)
        if let rule = denyPatterns.first(where: { $0.matches(address: address, port: port) }) {
            return .denied(reason: "\(subject()) matches the deny pattern \(rule).")
        }
        for inner in embedded {
            if let rule = denyPatterns.first(where: { $0.matches(address: inner.address, port: port) }) {
                return .denied(reason: "\(subject()) embeds \(inner.address), which matches the deny pattern \(rule).")
            }
        }
        guard allowPatterns.isEmpty || allowCovers(address, embedded, port: port) else {
            return .denied(reason: "\(subject()) matches no allow pattern.")
        }
        return .allowed
    }

    /// Check (1) as the engine runs it on a URL's target, before the transfer starts and
    /// before each redirect hop is followed: `checkHost`, and for an IP-literal host
    /// also `checkAddress` on the address it denotes. The second part decides early
    /// what check (2) would decide at connect time anyway (the literal is the address
    /// connected to), and it is the only address check a literal gets when a proxy
    /// carries the request, since check (2) then sees the proxy's address.
    public func checkDestination(host: String, port: Int) -> Decision {
        checkDestination(host: host, literal: IPAddress.parseLiteral(host), port: port)
    }

    /// `checkDestination` on a URL's target, whose host was read as a literal once,
    /// when the target was made.
    func checkDestination(_ target: URLTarget) -> Decision {
        checkDestination(host: target.host, literal: target.literal, port: target.port)
    }

    private func checkDestination(host: String, literal: IPAddress?, port: Int) -> Decision {
        let decision = checkHost(host, literal: literal, port: port)
        guard decision == .allowed, let address = literal else { return decision }
        let addressDecision = checkAddress(address, port: port)
        // Say which spelling was refused when it is not the address's own, so that
        // `0x7f.1` reads as the 127.0.0.1 it is.
        if case let .denied(reason) = addressDecision, Self.writtenForm(of: host) != address.description {
            return .denied(reason: "\(host) means \(address); \(reason)")
        }
        return addressDecision
    }

    /// Check (2): the address libcurl is about to connect to, and its port.
    ///
    /// In order: a deny IP/CIDR pattern covering the address or an IPv4 address it
    /// embeds denies; an embedded IPv4 address in a special-purpose range is denied
    /// unless an allow pattern covers that IPv4 address; an address in a
    /// special-purpose range is denied unless an allow pattern covers it. For IPv6
    /// forms whose embedded IPv4 address is the destination (IPv4-mapped `::ffff:0:0/96`,
    /// IPv4-compatible `::/96`, NAT64 `64:ff9b::/96`), an allow pattern covering the
    /// IPv4 address also covers the IPv6 form, since both name the same host: with
    /// `--allow 127.0.0.1`, `::ffff:127.0.0.1` is allowed too. The form alone never
    /// lifts the IPv4 address's own restriction: `--allow ::ffff:0:0/96` admits
    /// `::ffff:93.184.216.34` but not `::ffff:127.0.0.1`, and `--allow 64:ff9b::/96`
    /// (a DNS64 network) still keeps `64:ff9b::a9fe:a9fe` (169.254.169.254) out.
    /// For 6to4 and Teredo the embedded IPv4 addresses are relays, so only an IPv6
    /// pattern lifts the form. Allow patterns do not otherwise restrict this check:
    /// names pass check (1) and may resolve to any public address.
    public func checkAddress(_ address: IPAddress, port: Int) -> Decision {
        let embedded = Self.embeddedIPv4(in: address)
        if let rule = denyPatterns.first(where: { $0.matches(address: address, port: port) }) {
            return .denied(reason: "\(Self.endpoint(address, port: port)) matches the deny pattern \(rule).")
        }
        for inner in embedded {
            if let rule = denyPatterns.first(where: { $0.matches(address: inner.address, port: port) }) {
                return .denied(reason: "\(Self.endpoint(address, port: port)) embeds \(inner.address), which matches the deny pattern \(rule).")
            }
        }
        for inner in embedded {
            if let special = Self.specialRange(of: inner.address), !allowCovers(inner.address, [], port: port) {
                return .denied(reason: "\(address) embeds \(inner.address), which is in the special-purpose range \(special.range) (\(special.name)).")
            }
        }
        if let special = Self.specialRange(of: address) {
            if !allowCovers(address, embedded, port: port) {
                return .denied(reason: "\(address) is in the special-purpose range \(special.range) (\(special.name)).")
            }
        }
        return .allowed
    }

    /// Whether an allow IP/CIDR pattern matches `address` or one of the IPv4 addresses
    /// it embeds as its destination (its other identities) on `port`.
    private func allowCovers(_ address: IPAddress, _ embedded: [EmbeddedIPv4], port: Int) -> Bool {
        allowPatterns.contains { rule in
            rule.matches(address: address, port: port)
                || embedded.contains { $0.isDestination && rule.matches(address: $0.address, port: port) }
        }
    }

    /// `host:port`, with brackets around an IPv6 host, as a URL would write it.
    private static func endpoint(_ host: String, port: Int) -> String {
        host.contains(":") && host.first != "[" ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    private static func endpoint(_ address: IPAddress, port: Int) -> String {
        endpoint(address.description, port: port)
    }

    /// A literal host as `IPAddress.description` would write it if it were already
    /// canonical: lower case, without brackets, zone or trailing dot.
    private static func writtenForm(of host: String) -> String {
        var text = Substring(host.lowercased())
        if text.first == "[", text.last == "]" { text = text.dropFirst().dropLast() }
        if let percent = text.firstIndex(of: "%") { text = text[..<percent] }
        if text.last == "." { text = text.dropLast() }
        return String(text)
    }
}
