#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import JSON

/// Reads a JSON-RPC response: the result, or a description of what is wrong with it.
private func resultOf(_ response: JSONValue, _ what: String) -> Result<JSONValue, UnitError> {
    guard case .object(let o) = response else { return .failure(UnitError("\(what): reply is not an object")) }
    if let error = o["error"] {
        let message = error["message"]?.stringValue ?? JSON.encodeString(error)
        let reason = error["data"]?["reason"]?.stringValue.map { " (\($0))" } ?? ""
        return .failure(UnitError("\(what): error \(error["code"]?.int64Value ?? 0)\(reason): \(message)"))
    }
    guard let result = o["result"] else { return .failure(UnitError("\(what): reply has neither result nor error")) }
    return .success(result)
}

/// An error message as a `Result` failure.
struct UnitError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// `fetch {url}` per unit; the reply must say status 200 and carry the whole body.
final class FetchWorkload: RPCWorkload {
    lazy var replies = BenchConnection.Replies.value { [unowned self] message, c in handle(message, on: c) }

    let mode = "fetch"
    private let expectedBodyBytes: Int
    private var nextID = 1
    /// `{"jsonrpc":"2.0","id":` · id · `,"method":"fetch","params":{"url":"…"}}\n`
    private let head = CallText.bytes(#"{"jsonrpc":"2.0","id":"#)
    private let tail: [UInt8]

    init(url: String, expectedBodyBytes: Int) {
        self.expectedBodyBytes = expectedBodyBytes
        tail = CallText.bytes(#","method":"fetch","params":{"url":"#) + CallText.quoted(url) + CallText.bytes("}}\n")
    }

    func startUnit(on c: BenchConnection) {
        c.output.append(contentsOf: head)
        CallText.appendDecimal(nextID, to: &c.output)
        c.output.append(contentsOf: tail)
        nextID += 1
    }

    func handle(_ message: JSONValue, on c: BenchConnection) -> UnitOutcome {
        switch resultOf(message, "fetch") {
        case .failure(let e):
            return .failed(e.message)
        case .success(let result):
            let status = result["status"]?.int64Value ?? -1
            guard status == 200 else {
                return .failed("fetch: status \(status) \(result["statusText"]?.stringValue ?? ""), expected 200")
            }
            guard let body = result["body"]?.stringValue, result["encoding"]?.stringValue == "utf8" else {
                return .failed("fetch: body missing or not utf8 (encoding \(result["encoding"].map(JSON.encodeString) ?? "none"))")
            }
            let length = body.utf8.count
            guard length == expectedBodyBytes else {
                return .failed("fetch: body of \(length) bytes, expected \(expectedBodyBytes)")
            }
            return .succeeded
        }
    }
}

/// One request through the object API per unit, in two batches:
/// `[create, open (sync, unsubscribed), send]`, whose reply arrives when the request is
/// DONE, then `[getReceiveBuffer, release]`. The body must come back whole, the request
/// released. A unit whose first batch failed still sends the second, so that nothing is
/// left behind on the server.
///
/// Ids: unit k uses k·8 + 0…4 (create, open, send, getReceiveBuffer, release), so a reply
/// names its unit and step without a table. Names are `bench-PID-k`: unique for the
/// server's one local principal across connections and rounds of this process.
final class ObjectWorkload: RPCWorkload {
    lazy var replies = BenchConnection.Replies.value { [unowned self] message, c in handle(message, on: c) }

    let mode = "object"
    private let expectedBodyBytes: Int
    private var nextUnit = 1
    private let namePrefix: [UInt8]
    /// Failures of first batches, kept until the unit's second batch answers.
    private var firstBatchFailures: [Int: String] = [:]

    // The two batch templates, cut where the id and name go.
    private let call = CallText.bytes(#"{"jsonrpc":"2.0","id":"#)
    private let create = CallText.bytes(#","method":"create","params":{"request":""#)
    private let open = CallText.bytes(#","method":"open","params":{"request":""#)
    private let openTail: [UInt8]
    private let send = CallText.bytes(#","method":"send","params":{"request":""#)
    private let read = CallText.bytes(#","method":"getReceiveBuffer","params":{"request":""#)
    private let release = CallText.bytes(#","method":"release","params":{"request":""#)
    private let end = CallText.bytes(#""}}"#)

    init(url: String, expectedBodyBytes: Int) {
        self.expectedBodyBytes = expectedBodyBytes
        namePrefix = CallText.bytes("bench-\(getpid())-")
        openTail = CallText.bytes(#"","method":"GET","url":"#) + CallText.quoted(url)
            + CallText.bytes(#","async":false,"subscribe":false}}"#)
    }

    private func appendCall(_ method: [UInt8], unit k: Int, step: Int, tail: [UInt8], to out: inout [UInt8]) {
        out.append(contentsOf: call)
        CallText.appendDecimal(k * 8 + step, to: &out)
        out.append(contentsOf: method)
        out.append(contentsOf: namePrefix)
        CallText.appendDecimal(k, to: &out)
        out.append(contentsOf: tail)
    }

    func startUnit(on c: BenchConnection) {
        let k = nextUnit
        nextUnit += 1
        c.output.append(UInt8(ascii: "["))
        appendCall(create, unit: k, step: 0, tail: end, to: &c.output)
        c.output.append(UInt8(ascii: ","))
        appendCall(open, unit: k, step: 1, tail: openTail, to: &c.output)
        c.output.append(UInt8(ascii: ","))
        appendCall(send, unit: k, step: 2, tail: end, to: &c.output)
        c.output.append(contentsOf: [UInt8(ascii: "]"), 0x0A])
    }

    private func startSecondBatch(unit k: Int, on c: BenchConnection) {
        c.output.append(UInt8(ascii: "["))
        appendCall(read, unit: k, step: 3, tail: end, to: &c.output)
        c.output.append(UInt8(ascii: ","))
        appendCall(release, unit: k, step: 4, tail: end, to: &c.output)
        c.output.append(contentsOf: [UInt8(ascii: "]"), 0x0A])
    }

    func handle(_ message: JSONValue, on c: BenchConnection) -> UnitOutcome {
        guard case .array(let replies) = message, let first = replies.first,
              let id = first["id"]?.int64Value.map(Int.init), id > 0
        else {
            return .failed("object: expected a batch reply with ids, got \(JSON.encodeString(message).prefix(300))")
        }
        let k = id / 8
        var byStep: [JSONValue?] = Array(repeating: nil, count: 5)
        for r in replies {
            if let rid = r["id"]?.int64Value.map(Int.init), rid / 8 == k, (0..<5).contains(rid % 8) { byStep[rid % 8] = r }
        }
        if id % 8 <= 2 {
            // First batch: create, open, send. Whatever happened, read and release next.
            if let problem = checkFirstBatch(byStep) { firstBatchFailures[k] = problem }
            startSecondBatch(unit: k, on: c)
            return .inProgress
        }
        let earlier = firstBatchFailures.removeValue(forKey: k)
        if let problem = checkSecondBatch(byStep) { return .failed(earlier ?? problem) }
        if let earlier { return .failed(earlier) }
        return .succeeded
    }

    private func checkFirstBatch(_ byStep: [JSONValue?]) -> String? {
        for (step, name) in [(0, "create"), (1, "open"), (2, "send")] {
            guard let reply = byStep[step] else { return "object: batch reply lacks the \(name) response" }
            switch resultOf(reply, name) {
            case .failure(let e): return "object: \(e.message)"
            case .success(let result):
                if step == 2 {
                    let status = result["status"]?.int64Value ?? -1
                    if status != 200 { return "object: send finished with status \(status), expected 200" }
                    if result["state"]?.int64Value != 5 { return "object: send answered in state \(JSON.encodeString(result))" }
                }
            }
        }
        return nil
    }

    private func checkSecondBatch(_ byStep: [JSONValue?]) -> String? {
        guard let readReply = byStep[3], let releaseReply = byStep[4] else {
            return "object: batch reply lacks the getReceiveBuffer or release response"
        }
        switch resultOf(readReply, "getReceiveBuffer") {
        case .failure(let e): return "object: \(e.message)"
        case .success(let result):
            let bytes = result["bytes"]?.int64Value ?? -1
            if bytes != Int64(expectedBodyBytes) { return "object: getReceiveBuffer gave \(bytes) bytes, expected \(expectedBodyBytes)" }
            if result["done"]?.boolValue != true { return "object: getReceiveBuffer says not done after a sync send" }
            // base64 (the default encoding) of n bytes is 4·⌈n/3⌉ characters.
            let encoded = result["data"]?.stringValue?.utf8.count ?? -1
            if encoded != (expectedBodyBytes + 2) / 3 * 4 { return "object: getReceiveBuffer data of \(encoded) base64 characters" }
        }
        switch resultOf(releaseReply, "release") {
        case .failure(let e): return "object: \(e.message)"
        case .success(let result):
            if result != .bool(true) { return "object: release answered \(JSON.encodeString(result))" }
        }
        return nil
    }
}

/// `server.info {}` per unit: the cost of the RPC path alone (framing, dispatch,
/// encoding), with no HTTP behind it.
final class InfoWorkload: RPCWorkload {
    let mode = "info-pipelined"
    private var nextID = 1
    private let head = CallText.bytes(#"{"jsonrpc":"2.0","id":"#)
    private let tail = CallText.bytes(#","method":"server.info","params":{}}"# + "\n")
    /// How every reply begins: a result naming the server.
    private static let replyStart = CallText.bytes(#"{"jsonrpc":"2.0","result":{"name":"xhrpcd","#)
    private static let idKey = CallText.bytes(#"},"id":"#)

    func startUnit(on c: BenchConnection) {
        c.output.append(contentsOf: head)
        CallText.appendDecimal(nextID, to: &c.output)
        c.output.append(contentsOf: tail)
        c.sentIDs.append(nextID)
        nextID += 1
    }

    /// Checked by its bytes, not decoded: decoding each reply into a tree cost this
    /// client 3 µs of CPU per call against the server's 2 µs to answer it, so the figure
    /// measured the client. A reply must be the server's result object and end with the
    /// id of the oldest call still unanswered on this connection (the server answers a
    /// connection's calls in order).
    lazy var replies = BenchConnection.Replies.line { [unowned self] line, c in judge(line, c) }

    private func judge(_ line: UnsafeRawBufferPointer, _ c: BenchConnection) -> UnitOutcome {
        guard let expected = c.sentIDs.popFirst() else { return .failed("server.info: a reply to no call") }
        // `…},"id":N}`: the digits of N read backwards from the closing brace.
        var i = line.count - 2
        var id = 0, scale = 1
        while i > 0, line[i] >= UInt8(ascii: "0"), line[i] <= UInt8(ascii: "9"), scale <= 1_000_000_000_000 {
            id += Int(line[i] - UInt8(ascii: "0")) * scale
            scale *= 10
            i -= 1
        }
        let key = InfoWorkload.idKey.count
        guard line.count > InfoWorkload.replyStart.count + key + 2, line.last == UInt8(ascii: "}"), scale > 1,
              id == expected, line.starts(with: InfoWorkload.replyStart),
              line[(i + 1 - key)...i].elementsEqual(InfoWorkload.idKey) else {
            return .failed("server.info: unexpected reply to call \(expected): \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
        return .succeeded
    }
}
