import HTTPEngine
import JSONRPC

/// Bytes a client's calls made an object keep for later, counted in its principal's
/// `bufferedBytes` with the unread and unsent bytes (`UnreadBytes`, a socket's outbound
/// queue): a request's headers, its post values, JSON body and multipart parts, the user
/// name and password of `open`, and the copy of the request a send keeps while it is
/// sent. So every channel through which a client can make the server hold bytes draws on
/// the one budget (docs/operations/budgets.md).
///
/// A call asks `hold` (or `resize`) before it stores anything: past the principal's
/// limit it is refused with `limit_exceeded` (`data.limit` `bufferedBytes`) and nothing
/// changes. The owner gives the bytes back when it drops what they measure (`open`
/// clears the headers, `close` the post values, `release` everything); and, so that no
/// path that forgets an object can keep its count, whatever is still held when the
/// object goes away is given back then.
///
/// A class, like `UnreadBytes`: giving bytes back can wake objects paused for the
/// budget, and they may look at this one from inside that call. The principal is held
/// weakly: an object can outlive it (a principal's table dropping its objects as it
/// goes), and then there is no count left to give back to.
final class HeldBytes {
    private weak var principal: Principal?
    private(set) var count = 0

    init(principal: Principal) { self.principal = principal }

    deinit { if count > 0 { principal?.stored(-count) } }

    /// What one stored entry (a header, a form field, a part, a credential) costs beyond
    /// the bytes of its strings: the strings' own headers, the collection's slot and the
    /// allocator's rounding. Counting it makes a million empty headers cost what they
    /// occupy, not nothing.
    static let perEntry = 64

    /// The bytes of a name and a value stored as one entry.
    static func entry(_ name: String, _ value: String) -> Int { perEntry + name.utf8.count + value.utf8.count }

    /// Counts `n` more bytes, or refuses (`Principal.checkRoom`) and counts nothing;
    /// `what` names the call for the message.
    func hold(_ n: Int, for what: String) throws(RPCError) {
        try principal?.checkRoom(n, for: what)
        count += n
        principal?.stored(n)
    }

    /// Makes the count `n`: growing is refused past the limit as `hold` is, shrinking
    /// always works.
    func resize(to n: Int, for what: String) throws(RPCError) {
        if n > count { try principal?.checkRoom(n - count, for: what) }
        let delta = n - count
        count = n
        if delta != 0 { principal?.stored(delta) }
    }

    /// Counts `n` more bytes without a check: bytes that arrived and cannot be refused
    /// (a response head's line), whose source stops once the budget is spent.
    func add(_ n: Int) {
        count += n
        principal?.stored(n)
    }

    /// Gives every byte back.
    func releaseAll() {
        let n = count
        count = 0
        if n > 0 { principal?.stored(-n) }
    }

    /// What a send keeps of `request` beyond the object's own fields, while it is sent
    /// and until the next `open` or `release`: the body (`send {body}`,
    /// `sendData`, the serializer's encoded bytes, a replacement's) and libcurl's copies,
    /// the header list (`curl_slist`, each line `Name: value`) and a body small enough
    /// to be copied into the handle (`TransferEngine.copiedBodyLimit`).
    static func ofSend(_ request: TransferRequest) -> Int {
        var n = request.headers.reduce(0) { $0 + entry($1.name, $1.value) }
        switch request.body {
        case .bytes(let b):
            n += b.count
            if b.count <= TransferEngine.copiedBodyLimit { n += b.count }
        case .segments(let segments):
            for case .bytes(let b) in segments { n += b.count }
        case .none, .file:
            break
        }
        return n
    }
}
