import Foundation
import SecureStream

/// The server's side of RFC 6455's opening handshake, as a pure function of the request
/// head: whether to switch protocols (and the exact 101 answer) or which HTTP error to
/// give. A `ws:` listener accepts the upgrade on any path.
///
/// Browser safety: a browser always sends `Origin`, and any page it shows may open a
/// WebSocket to any address, the user's loopback included. So a request that carries an
/// `Origin` is refused (403) unless that origin is in the allowlist (`--ws-origin`); a
/// request without one comes from a program, not a page, and is accepted.
public enum WebSocketHandshake {
    /// RFC 6455 §1.3's fixed GUID, appended to the client's key before hashing.
    static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// What to answer an upgrade request.
    public enum Outcome: Equatable, Sendable {
        /// Switch protocols: `response` is the whole 101 head to write.
        case accept(response: [UInt8])
        /// Answer `status` with `message` as the body, and close.
        case refuse(status: Int, message: String)
    }

    /// `Sec-WebSocket-Accept` for the client's `Sec-WebSocket-Key`: the base64 of the
    /// SHA-1 of the key followed by the GUID (RFC 6455 §4.2.2).
    public static func acceptKey(for key: String) -> String {
        Data(Digest.sha1(Array((key + acceptGUID).utf8))).base64EncodedString()
    }

    /// Judges `head` against the rules of RFC 6455 §4.2.1 and the origin allowlist
    /// `allowedOrigins` (compared without regard to case, as serialised origins are).
    public static func evaluate(_ head: HTTPRequestHead, allowedOrigins: [String]) -> Outcome {
        guard head.method == "GET" else {
            return .refuse(status: 405, message: "a WebSocket upgrade is a GET request")
        }
        guard hasToken(head.header("upgrade"), "websocket") else {
            return .refuse(status: 426, message: "this listener speaks WebSocket: send Upgrade: websocket")
        }
        guard hasToken(head.header("connection"), "upgrade") else {
            return .refuse(status: 400, message: "a WebSocket upgrade needs Connection: Upgrade")
        }
        guard head.header("sec-websocket-version") == "13" else {
            return .refuse(status: 426, message: "only WebSocket version 13 is spoken")
        }
        guard let key = head.header("sec-websocket-key"), let nonce = Data(base64Encoded: key), nonce.count == 16 else {
            return .refuse(status: 400, message: "Sec-WebSocket-Key must be 16 bytes in base64")
        }
        if let origin = head.header("origin") {
            let allowed = allowedOrigins.contains { normalise($0) == normalise(origin) }
            guard allowed else {
                return .refuse(status: 403, message: "origin \(origin) is not allowed (see --ws-origin)")
            }
        }
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(acceptKey(for: key))\r\n\r\n"
        return .accept(response: Array(response.utf8))
    }

    /// The whole HTTP answer for a refusal; 426 says which version is spoken.
    public static func refusalResponse(status: Int, message: String) -> [UInt8] {
        let body = message + "\n"
        var text = "HTTP/1.1 \(status) \(reason(status))\r\nContent-Type: text/plain; charset=utf-8\r\n"
        text += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if status == 426 { text += "Sec-WebSocket-Version: 13\r\n" }
        text += "\r\n" + body
        return Array(text.utf8)
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 426: "Upgrade Required"
        case 431: "Request Header Fields Too Large"
        default: "Error"
        }
    }

    /// Whether the comma-separated `value` lists `token`, ignoring case.
    private static func hasToken(_ value: String?, _ token: String) -> Bool {
        guard let value else { return false }
        return value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == token }
    }

    /// An origin as compared: lower case, without a trailing slash.
    private static func normalise(_ origin: String) -> String {
        var o = origin.trimmingCharacters(in: .whitespaces).lowercased()
        while o.hasSuffix("/") { o.removeLast() }
        return o
    }
}
