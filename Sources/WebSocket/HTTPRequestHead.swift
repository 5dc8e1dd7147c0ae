/// The head of an HTTP/1.x request, as the operations listener and a WebSocket upgrade
/// read it: a pure parser fed the bytes as they arrive, in pieces of any size, that says
/// when the head is complete, too large, or not HTTP. Nothing after the head is parsed:
/// the operations listener answers GET and HEAD only, and a WebSocket stream hands what
/// follows the head (`endOfHead`) to its frame parser.
public struct HTTPRequestHead: Equatable, Sendable {
    public var method: String
    /// The request target as sent ("/metrics?x=1").
    public var target: String
    /// Header fields in order, names lower-cased, values trimmed.
    public var headers: [(name: String, value: String)]

    public init(method: String, target: String, headers: [(name: String, value: String)]) {
        self.method = method
        self.target = target
        self.headers = headers
    }

    /// The target without its query string or fragment.
    public var path: Substring {
        target.prefix { $0 != "?" && $0 != "#" }
    }

    /// The value of the first field named `name` (lower case).
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    public static func == (a: HTTPRequestHead, b: HTTPRequestHead) -> Bool {
        a.method == b.method && a.target == b.target && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }

    /// What the bytes read so far make.
    public enum Parse: Equatable, Sendable {
        /// No end of head yet, and room for more.
        case needMore
        case complete(HTTPRequestHead)
        /// `limit` bytes came without an end of head (431).
        case tooLarge
        /// Not an HTTP/1.x request head (400).
        case malformed
    }

    /// Parses `bytes`, everything a client sent so far. The head ends at the first empty
    /// line (CRLF CRLF, or a bare LF LF, which RFC 9112 §2.2 lets a server accept);
    /// it may be at most `limit` bytes, that line included.
    public static func parse(_ bytes: [UInt8], limit: Int = 8192) -> Parse {
        guard let end = endOfHead(bytes) else {
            return bytes.count >= limit ? .tooLarge : .needMore
        }
        guard end <= limit else { return .tooLarge }
        // Split on bytes: as Characters, "\r\n" is one grapheme that "\n" does not match.
        var lines: [Substring] = []
        for raw in bytes[..<end].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let line = raw.last == UInt8(ascii: "\r") ? raw.dropLast() : raw
            guard let text = String(validating: line, as: UTF8.self) else { return .malformed }
            lines.append(Substring(text))
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { return .malformed }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, isToken(parts[0]), !parts[1].isEmpty, parts[1].first == "/",
              !parts[1].contains(where: { $0.isWhitespace }),
              parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0"
        else { return .malformed }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            // Obsolete line folding (a field line that starts with white space) is refused.
            guard let colon = line.firstIndex(of: ":"), line.first != " ", line.first != "\t" else { return .malformed }
            let name = line[..<colon]
            guard isToken(name) else { return .malformed }
            let value = line[line.index(after: colon)...].trimmingWhitespace()
            headers.append((name.lowercased(), String(value)))
        }
        return .complete(HTTPRequestHead(method: String(parts[0]), target: String(parts[1]), headers: headers))
    }

    /// The index just past the empty line that ends the head, or nil.
    public static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "\n") {
                // "\n\n" or "\n\r\n"
                if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "\n") { return i + 2 }
                if i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "\r"), bytes[i + 2] == UInt8(ascii: "\n") {
                    return i + 3
                }
            }
            i += 1
        }
        return nil
    }

    /// RFC 9110's token: the characters a method or a field name may have.
    private static func isToken(_ s: Substring) -> Bool {
        !s.isEmpty && s.unicodeScalars.allSatisfy { c in
            c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(c))
        }
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
