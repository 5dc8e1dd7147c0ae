import Foundation
import JSON

/// A plain blocking JSON-RPC client over a Unix socket, as a user's program would be:
/// it writes requests, reads lines, and keeps the notifications that arrive between
/// responses. Every wait has a deadline.
final class TestClient {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Bytes of `buffer` already searched for a newline.
    private var scanned = 0
    private var chunk = [UInt8](repeating: 0, count: 1 << 20)
    private var nextID: Int64 = 1
    /// Notifications received and not yet taken, in arrival order.
    var notifications: [JSONValue] = []

    struct Timeout: Error {}
    struct Closed: Error {}
    struct RPCFailure: Error, CustomStringConvertible {
        let error: JSONValue
        var code: Int64? { error["code"]?.int64Value }
        var reason: String? { error["data"]?["reason"]?.stringValue }
        var description: String { JSON.encodeString(error) }
    }

    init(unixPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(unixPath.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    deinit { close(fd) }

    func sendRaw(_ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            off += n
        }
    }

    func sendRaw(_ text: String) { sendRaw(Array(text.utf8)) }

    /// Shuts the socket for writing (the server reads the end of input) and keeps
    /// reading.
    func shutdownWriting() { _ = shutdown(fd, Int32(SHUT_WR)) }

    /// Sends a request and returns its id.
    @discardableResult
    func send(_ method: String, _ params: JSONValue = [:]) -> Int64 {
        let id = nextID
        nextID += 1
        sendRaw(JSON.encode(["jsonrpc": "2.0", "method": .string(method), "params": params, "id": .int(id)]) + [10])
        return id
    }

    /// The next message from the server.
    func readMessage(timeout: Double = 10) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            // memchr, not firstIndex: this runs over multi-megabyte lines in debug builds.
            let nl: Int? = buffer.withUnsafeBytes { raw in
                guard scanned < raw.count, let p = memchr(raw.baseAddress! + scanned, 10, raw.count - scanned) else { return nil }
                return raw.baseAddress!.distance(to: UnsafeRawPointer(p))
            }
            if let nl {
                let message = try buffer.withUnsafeBytes { try JSON.decode(UnsafeRawBufferPointer(rebasing: $0[..<nl])) }
                buffer.removeSubrange(...nl)
                scanned = 0
                return message
            }
            scanned = buffer.count
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw Timeout() }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(min(left, 1) * 1000) + 1) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Closed() }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// Waits for the response with `id`, keeping notifications that come first.
    func response(_ id: Int64, timeout: Double = 10) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let m = try readMessage(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if m["id"]?.int64Value == id { return m }
            if m["method"] != nil, m["id"] == nil { notifications.append(m) }
        }
    }

    /// Calls a method and returns its result, or throws its error.
    @discardableResult
    func call(_ method: String, _ params: JSONValue = [:], timeout: Double = 10) throws -> JSONValue {
        let r = try response(send(method, params), timeout: timeout)
        if let e = r["error"] { throw RPCFailure(error: e) }
        return r["result"] ?? .null
    }

    /// Waits for a notification matching `predicate` and takes it out of
    /// `notifications`; the others stay, in order.
    func waitNotification(timeout: Double = 10, _ predicate: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let i = notifications.firstIndex(where: predicate) {
                return notifications.remove(at: i)
            }
            let m = try readMessage(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if m["method"] != nil, m["id"] == nil { notifications.append(m) }
        }
    }

    /// The state names notified for `request`, up to and including DONE.
    func statesUntilDone(_ request: String, timeout: Double = 30) throws -> [String] {
        var states: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while states.last != "DONE" {
            let n = try waitNotification(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
                $0["method"] == "onStateChange" && $0["params"]?["request"]?.stringValue == request
            }
            states.append(n["params"]?["stateName"]?.stringValue ?? "?")
        }
        return states
    }

    /// Reads the whole body of a request with getReceiveBuffer until `done`.
    func readBody(_ request: String, maxBytes: Int? = nil, timeout: Double = 120) throws -> [UInt8] {
        var body: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var params: JSONObject = ["request": .string(request)]
            if let maxBytes { params["maxBytes"] = .int(Int64(maxBytes)) }
            let r = try call("getReceiveBuffer", .object(params))
            if let d = Data(base64Encoded: r["data"]?.stringValue ?? "") { body += d }
            if r["done"] == true { return body }
            if r["bytes"] == 0 { usleep(2000) }
        }
        throw Timeout()
    }
}
