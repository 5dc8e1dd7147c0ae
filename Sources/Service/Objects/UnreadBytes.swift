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

    /// Takes up to `maxBytes` from the front and writes them as the first three members
    /// of a read's result, `data` (the text), `encoding` and `bytes` (how many were
    /// taken), straight into `object`; the caller adds its own last member (`done` for a
    /// request's body, `closed` for a socket's input). `complete` says that no more bytes
    /// will come, so a character cut at the very end is an error rather than held back.
    /// `refilling` says that the bytes' producer waits for room (a transfer or socket
    /// paused because this buffer or the principal's budget is full): it fills the buffer
    /// again as soon as this read frees it, so the buffer keeps its memory even when the
    /// read empties it, instead of growing again from nothing (a copy of everything and
    /// fresh pages each time, for a body read as fast as it arrives). Bytes that are
    /// not UTF-8 are refused (and stay unread) with `utf8`. Returns the number of bytes taken.
    func read(maxBytes: Int, encoding: BodyEncoding, complete: Bool, refilling: Bool,
              into object: inout JSONObjectWriter) throws(RPCError) -> Int {
        let n = try readableCount(maxBytes: maxBytes, encoding: encoding, complete: complete)
        queue.peek(n).withUnsafeBufferPointer { chunk in
            switch encoding {
            case .base64:
                object.add(ReadMembers.data, unescapedStringOfCount: Base64Text.encodedCount(n)) {
                    Base64Text.encode(chunk, inPieces: $0)
                }
            case .utf8:
                object.add(ReadMembers.data, utf8String: chunk)
            }
        }
        consume(n, keepingMemory: refilling)
        object.add(encoding == .base64 ? ReadMembers.base64 : ReadMembers.utf8)
        object.add(ReadMembers.bytes, int: Int64(n))
        return n
    }

    /// A read result's keys, and its `encoding` member in its two forms, written once.
    private enum ReadMembers {
        static let data = JSONKey("data")
        static let base64 = JSONConstantMembers(["encoding": .string(BodyEncoding.base64.rawValue)])
        static let utf8 = JSONConstantMembers(["encoding": .string(BodyEncoding.utf8.rawValue)])
        static let bytes = JSONKey("bytes")
    }

    /// How many of the first `maxBytes` bytes a read hands out: all of them with
    /// `base64`; with `utf8` those before a character cut at the end (unless `complete`
    /// and nothing is left after it), and none at all if they are not UTF-8 (thrown).
    /// A `maxBytes` that cuts the very first character is refused: the same call would
    /// return nothing for ever while the character waits.
    private func readableCount(maxBytes: Int, encoding: BodyEncoding, complete: Bool) throws(RPCError) -> Int {
        let n = min(maxBytes, queue.count)
        guard encoding == .utf8 else { return n }
        switch UTF8Cut.validPrefix(queue.peek(n), allowIncompleteTail: !(complete && n == queue.count)) {
        case .valid(let length):
            if length == 0, n > 0, n < queue.count {
                throw RPCError.invalidParams("maxBytes \(maxBytes) is shorter than the next character (UTF-8 takes up to 4 bytes "
                    + "a character): ask for more, or read as base64")
            }
            return length
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

    private func consume(_ n: Int, keepingMemory: Bool) {
        queue.consume(n, keepingMemory: keepingMemory)
        if n > 0 { principal.buffered(-n) }
    }
}
