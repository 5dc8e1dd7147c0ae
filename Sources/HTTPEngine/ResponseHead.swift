/// The status line and headers of a response: the final one of a transfer, after
/// redirects, auth retries and interim (1xx) responses.
public struct ResponseHead: Sendable {
    public var status: Int
    /// The reason phrase as the server sent it, or the standard phrase for the code when
    /// there was none (HTTP/2 never has one; HTTP/1.1 servers may leave it out).
    public var statusText: String
    /// In the order received, names spelled as sent, repeated names kept; as bytes.
    public var headers: HeaderFields
    /// "1.0", "1.1", "2", "3".
    public var httpVersion: String

    /// Builds a head; the engine makes them from libcurl's header lines, tests and the
    /// Service layer may make their own.
    public init(status: Int, statusText: String, headers: HeaderFields, httpVersion: String) {
        self.status = status
        self.statusText = statusText
        self.headers = headers
        self.httpVersion = httpVersion
    }

    /// The `Location` libcurl follows: the first non-empty one (libcurl skips an empty
    /// value and ignores every later header once it has one). Values are already
    /// trimmed of spaces and tabs by the parser, as libcurl trims them. The egress
    /// check of a redirect hop must judge exactly this one, or a decoy header before it
    /// would let the real target through unchecked.
    public var followedLocation: String? {
        headers.indices.first { !headers.valueIsEmpty($0) && headers.nameIs($0, "Location") }.map(headers.value(at:))
    }

    /// How a head frames its body, as far as its `Content-Length` and
    /// `Transfer-Encoding` tell (RFC 9112 §6.3).
    enum Framing: Equatable {
        case valid
        /// Both: Transfer-Encoding wins, and the connection is not to be trusted after.
        case transferEncodingAndLength
        /// Content-Length values that differ, or one that is not a number: the body's
        /// length cannot be known, so the response is unusable (a network error).
        case invalid(String)
    }

    /// The content codings (RFC 9110 §8.4): every `Content-Encoding` field's value,
    /// joined with ", "; nil without one (nearly every response: the names' lengths
    /// settle it).
    var contentEncoding: String? {
        var joined: String?
        for i in headers.indices where headers.nameLength(i) == 16 && headers.nameIs(i, "content-encoding") {
            let value = headers.value(at: i)
            joined = joined.map { $0 + ", " + value } ?? value
        }
        return joined
    }

    /// Checks the `Content-Length` fields: every value, in every field and every
    /// comma-separated element, must be a decimal number, and all must be the same
    /// (`Content-Length: 5, 5` is one length; `2` and `5` are two). libcurl reads the
    /// first number it finds and would take one of two bodies for the whole response.
    var framing: Framing {
        var length: UInt64?
        var hasTransferEncoding = false
        for i in headers.indices {
            // The names' lengths first: nearly every field is settled without comparing.
            let nameLength = headers.nameLength(i)
            if nameLength == 17, headers.nameIs(i, "transfer-encoding") { hasTransferEncoding = true }
            guard nameLength == 14, headers.nameIs(i, "content-length") else { continue }
            let verdict: Framing? = headers.withBytes(i) { _, value in
                // The comma-separated elements, empty ones included, found in place (a
                // `split` would build an array of them for every response).
                var elementStart = 0
                while elementStart <= value.count {
                    var elementEnd = elementStart
                    while elementEnd < value.count, value[elementEnd] != UInt8(ascii: ",") { elementEnd += 1 }
                    let element = value[elementStart..<elementEnd]
                    elementStart = elementEnd + 1
                    let digits = element.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }
                    guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                        return .invalid("Content-Length \"\(headers.value(at: i))\" is not a number")
                    }
                    let n = digits.reversed().reduce(UInt64(0)) { $0 * 10 + UInt64($1 - 0x30) }
                    if let length, length != n {
                        let values = headers.indices[...i].filter { headers.nameIs($0, "content-length") }.map(headers.value(at:))
                        return .invalid("Content-Length values differ (\(values.joined(separator: "; ")))")
                    }
                    length = n
                }
                return nil
            }
            if let verdict { return verdict }
        }
        if length != nil, hasTransferEncoding { return .transferEncodingAndLength }
        return .valid
    }

    /// The values of a header, case-insensitively, joined with ", " as RFC 9110 §5.3
    /// allows; nil when absent.
    public func value(of name: String) -> String? {
        headers.joinedValues(of: name)
    }
}

/// Builds `ResponseHead`s from the lines libcurl hands to `CURLOPT_HEADERFUNCTION`.
///
/// libcurl passes every header line of every response block the transfer sees — 1xx
/// interim responses, each redirect, each 401 of an auth exchange — one complete line a
/// call, CRLF included. A line beginning with `HTTP/` starts a new block, so the block
/// in progress when the body starts (or the transfer ends) is the final response.
/// Pure: no I/O, fed line by line by the engine and by unit tests.
struct ResponseHeadParser {
    /// The block being collected; nil before the first status line.
    private(set) var current: ResponseHead?

    /// Room for the headers of a typical response, reserved once per block so that
    /// appending them does not regrow the array four times.
    static let typicalHeaderCount = 16
    /// And room for their bytes.
    static let typicalHeaderBytes = 512

    /// Takes one line as libcurl delivered it. Called for every header line of every
    /// block, so it stays cheap: byte comparisons, and the fields' bytes copied into the
    /// head's one buffer (`HeaderFields`), no `String` made.
    mutating func consume(line raw: UnsafeRawBufferPointer) {
        var end = raw.count
        while end > 0, raw[end - 1] == 0x0A || raw[end - 1] == 0x0D { end -= 1 }
        if end == 0 { return }  // the blank line that ends a block
        let line = UnsafeRawBufferPointer(rebasing: raw[0..<end])
        if ResponseHeadParser.isStatusLine(line) {
            current = ResponseHeadParser.parseStatusLine(line)
            current?.headers.reserveCapacity(fields: ResponseHeadParser.typicalHeaderCount, bytes: ResponseHeadParser.typicalHeaderBytes)
            return
        }
        guard current != nil else { return }  // garbage before any status line
        if line[0] == 0x20 || line[0] == 0x09 {
            // obs-fold (RFC 9112 §5.2): a continuation of the previous value.
            let more = trimmed(line, from: 0)
            if !more.isEmpty { current?.headers.foldIntoLast(more) }
            return
        }
        var colon = 0
        while colon < end, line[colon] != 0x3A, HTTPToken.isTokenByte(line[colon]) || line[colon] >= 0x80 { colon += 1 }
        // Not a field: no colon, or a name that is empty or has a control, a space (one
        // before the colon among them, RFC 9112 §5.1) or a delimiter (RFC 9110 §5.1).
        // Dropped, so no client sees a field called "" or "X B". Bytes above 0x7F are
        // not token bytes either, but carry no such risk, and stay readable as text.
        guard colon > 0, colon < end, line[colon] == 0x3A else { return }
        current?.headers.append(line: line, name: 0..<colon, value: trimmedRange(line, from: colon + 1))
    }

    private static let httpPrefixCount = 5

    /// Whether the line starts with `HTTP/`, which begins a new response block.
    static func isStatusLine(_ line: UnsafeRawBufferPointer) -> Bool {
        line.count >= httpPrefixCount && line[0] == 0x48 && line[1] == 0x54 && line[2] == 0x54
            && line[3] == 0x50 && line[4] == 0x2F  // "HTTP/"
    }

    /// `HTTP/1.1 200 OK`, `HTTP/2 200 ` (libcurl's rendering of an HTTP/2 status),
    /// `HTTP/1.1 200` (no phrase): version, three digits, optional phrase.
    static func parseStatusLine(_ line: UnsafeRawBufferPointer) -> ResponseHead {
        var i = httpPrefixCount
        let versionStart = i
        while i < line.count, line[i] != 0x20 { i += 1 }
        let version = decodeHeaderText(UnsafeRawBufferPointer(rebasing: line[versionStart..<i]))
        while i < line.count, line[i] == 0x20 { i += 1 }
        var status = 0
        while i < line.count, line[i] >= 0x30, line[i] <= 0x39, status < 1000 {
            status = status * 10 + Int(line[i] - 0x30)
            i += 1
        }
        let phrase = trimmed(line, from: i)
        var reason: String
        if HeaderFields.hasControls(phrase) {
            // As in a field value: a CR or NUL reads as SP.
            let blanked = phrase.map(HeaderFields.blanked)
            reason = blanked.withUnsafeBytes { decodeHeaderText($0) }
        } else {
            reason = decodeHeaderText(phrase)
        }
        if reason.isEmpty { reason = HTTPStatus.phrase(for: status) }
        return ResponseHead(status: status, statusText: reason, headers: [], httpVersion: version)
    }
}

/// The bytes of `line` from `start`, without leading and trailing spaces and tabs.
private func trimmed(_ line: UnsafeRawBufferPointer, from start: Int) -> UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(rebasing: line[trimmedRange(line, from: start)])
}

/// Where those bytes are in `line`.
private func trimmedRange(_ line: UnsafeRawBufferPointer, from start: Int) -> Range<Int> {
    var s = start, e = line.count
    while s < e, line[s] == 0x20 || line[s] == 0x09 { s += 1 }
    while e > s, line[e - 1] == 0x20 || line[e - 1] == 0x09 { e -= 1 }
    return s..<e
}

/// Header text is ASCII in practice, UTF-8 sometimes, and ISO-8859-1 by the old rules
/// (RFC 9110 §5.5 obs-text). Valid UTF-8 is taken as such; anything else is read as
/// Latin-1, so no byte turns into a replacement character and is lost.
///
/// ASCII, checked first, goes straight through the standard library's specialised
/// UTF-8 path (one copy, or none for up to 15 bytes); only text with a byte above 0x7F
/// pays for `String(validating:)`, which is generic and costs far more per call.
func decodeHeaderText(_ bytes: UnsafeRawBufferPointer) -> String {
    bytes.withMemoryRebound(to: UInt8.self) { u8 in
        var high: UInt8 = 0
        for b in u8 { high |= b }
        if high < 0x80 { return String(decoding: u8, as: UTF8.self) }
        if let s = String(validating: u8, as: UTF8.self) { return s }
        var s = ""
        s.unicodeScalars.append(contentsOf: u8.lazy.map { Unicode.Scalar($0) })
        return s
    }
}
