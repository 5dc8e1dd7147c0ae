import Foundation
import JSON
import JSONRPC

/// How bytes are handed to the client (`getReceiveBuffer`, `socket.read`).
enum BodyEncoding: String {
    case base64, utf8
}

/// Bytes an object received for its client and the client has not read yet: a
/// request's response body, a socket's inbound stream. One place for what every kind
/// does with them: each change of size keeps the principal's total in step
/// (`Principal.buffered`, which the `bufferedBytes` limit is measured on), and reading
/// hands out base64, or UTF-8 with a character split at the end held back until the
/// rest arrives. A byte is handed out once and never lost.
///
/// A class, not a struct: telling the principal can wake objects that paused for its
/// budget, and they look at their own buffer (this one among them) from inside that
/// call; a struct would still be under its mutating access then, which Swift's
/// exclusivity checking stops the process for.
final class UnreadBytes {
    private var queue = ByteQueue()
    unowned let principal: Principal

    init(principal: Principal) { self.principal = principal }

    var count: Int { queue.count }
    var isEmpty: Bool { queue.isEmpty }

    func append(_ bytes: UnsafeRawBufferPointer) {
        queue.append(bytes)
        principal.buffered(bytes.count)
    }

    /// Takes up to `maxBytes` from the front, encoded. `complete` says that no more bytes
    /// will come, so a character cut at the very end is an error rather than held back.
    /// Bytes that are not UTF-8 are refused (and stay unread) with `utf8`.
    func read(maxBytes: Int, encoding: BodyEncoding, complete: Bool) throws(RPCError) -> (text: String, bytes: Int) {
        let n = try readableCount(maxBytes: maxBytes, encoding: encoding, complete: complete)
        let chunk = queue.peek(n)
        let text = switch encoding {
        case .base64: Base64Text.encode(chunk)
        case .utf8: String(decoding: chunk, as: UTF8.self)
        }
        consume(n)
        return (text, n)
    }

    /// `read`, with the text written as the string member `key` of `object` (the same
    /// text, without making a `String`); returns the number of bytes taken.
    func read(maxBytes: Int, encoding: BodyEncoding, complete: Bool,
              as key: JSONKey, into object: inout JSONObjectWriter) throws(RPCError) -> Int {
        let n = try readableCount(maxBytes: maxBytes, encoding: encoding, complete: complete)
        queue.peek(n).withUnsafeBufferPointer { chunk in
            switch encoding {
            case .base64:
                object.add(key, unescapedStringOfCount: Base64Text.encodedCount(n)) { Base64Text.encode(chunk, into: $0) }
            case .utf8:
                object.add(key, utf8String: chunk)
            }
        }
        consume(n)
        return n
    }

    /// How many of the first `maxBytes` bytes a read hands out: all of them with
    /// `base64`; with `utf8` those before a character cut at the end (unless `complete`
    /// and nothing is left after it), and none at all if they are not UTF-8 (thrown).
    private func readableCount(maxBytes: Int, encoding: BodyEncoding, complete: Bool) throws(RPCError) -> Int {
        let n = min(maxBytes, queue.count)
        guard encoding == .utf8 else { return n }
        switch UTF8Cut.validPrefix(queue.peek(n), allowIncompleteTail: !(complete && n == queue.count)) {
        case .valid(let length): return length
        case .invalid(let offset): throw ServiceError.bodyNotUTF8(at: offset)
        }
    }

    /// Everything unread, taken.
    func takeAll() -> [UInt8] {
        let all = Array(queue.peek(queue.count))
        removeAll()
        return all
    }

    func removeAll() {
        let n = queue.count
        queue.removeAll()
        if n > 0 { principal.buffered(-n) }
    }

    private func consume(_ n: Int) {
        queue.consume(n)
        if n > 0 { principal.buffered(-n) }
    }
}
