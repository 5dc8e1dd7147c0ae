import Foundation
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
        var n = min(maxBytes, queue.count)
        let text: String
        switch encoding {
        case .base64:
            text = Base64.encode(queue.peek(n))
        case .utf8:
            let chunk = queue.peek(n)
            switch UTF8Cut.validPrefix(chunk, allowIncompleteTail: !(complete && n == queue.count)) {
            case .valid(let length):
                n = length
                text = String(decoding: chunk.prefix(length), as: UTF8.self)
            case .invalid(let offset):
                throw ServiceError.bodyNotUTF8(at: offset)
            }
        }
        consume(n)
        return (text, n)
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
