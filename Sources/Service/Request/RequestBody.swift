import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// A request's body serializer: form fields (`setPostValue`, `fetch {form}`), a JSON
/// value (`setJSONBody`, `fetch {json}`) or multipart parts (`addMultipartPart`,
/// `fetch {multipart}`). The one implementation both the request object and `fetch`
/// use; a request holds one `RequestBody` and builds its bytes when it is sent.
///
/// At most one serializer per request: a call that would add a second kind is refused
/// with `invalid_params` (`clearPostValues` empties it, `open` and `close` too), and
/// a send that brings its own body (`send {body}`, `sendData`, `sendWithFile`) while
/// a serializer holds something is refused the same way, rather than one of the two
/// being dropped in silence.
///
/// What it holds counts in the principal's budget (`held`): a call that would pass it
/// is refused with `limit_exceeded` and adds nothing; `clear` gives the bytes back. A
/// JSON value is kept encoded, so what is counted is what is held.
struct RequestBody {
    enum Content {
        case form([(key: String, value: String)])
        /// The value's encoding (`setJSON`), sent as it is.
        case json([UInt8])
        case multipart([MultipartPart])

        /// How clients set it, for messages.
        var origin: String {
            switch self {
            case .form: "form fields (setPostValue, form)"
            case .json: "a JSON body (setJSONBody, json)"
            case .multipart: "multipart parts (addMultipartPart, multipart)"
            }
        }
    }

    private(set) var content: Content?
    /// The bytes `content` holds, in the principal's budget.
    let held: HeldBytes

    init(held: HeldBytes) { self.held = held }

    var isEmpty: Bool { content == nil }

    // Each addition takes the array out of `content` before appending, so that it is
    // not shared and the append does not copy it: adding n fields costs linear time.

    mutating func addFormValue(_ key: String, _ value: String) throws(RPCError) {
        switch content {
        case nil:
            try held.hold(HeldBytes.entry(key, value), for: "setPostValue")
            content = .form([(key, value)])
        case .form(var pairs):
            try held.hold(HeldBytes.entry(key, value), for: "setPostValue")
            content = nil
            pairs.append((key, value))
            content = .form(pairs)
        case let other?: throw Self.mixed("form fields", other)
        }
    }

    /// Sets (or replaces) the JSON value.
    mutating func setJSON(_ value: JSONValue) throws(RPCError) {
        switch content {
        case nil, .json:
            let bytes = JSON.encode(value)
            try held.resize(to: bytes.count, for: "setJSONBody")
            content = .json(bytes)
        case let other?: throw Self.mixed("a JSON body", other)
        }
    }

    mutating func addPart(_ part: MultipartPart) throws(RPCError) {
        switch content {
        case nil:
            try held.hold(part.heldBytes, for: "addMultipartPart")
            content = .multipart([part])
        case .multipart(var parts):
            try held.hold(part.heldBytes, for: "addMultipartPart")
            content = nil
            parts.append(part)
            content = .multipart(parts)
        case let other?: throw Self.mixed("multipart parts", other)
        }
    }

    mutating func clear() {
        content = nil
        held.releaseAll()
    }

    /// Refuses a body given beside the serializer's, naming both.
    func checkNoOtherBody(_ what: String) throws(RPCError) {
        guard let content else { return }
        throw .invalidParams("this request already has \(content.origin); it cannot also be sent with \(what) (call clearPostValues first, or send without a body)")
    }

    /// The body to send and its Content-Type, or nil when there is no serializer.
    /// Multipart file parts are confined again here and streamed from disk by the engine
    /// (`MultipartEncoding`).
    func encoded() throws(RPCError) -> (body: TransferBody, contentType: String)? {
        switch content {
        case nil:
            return nil
        case .form(let pairs):
            return (.bytes(Array(FormEncoding.encode(pairs).utf8)), "application/x-www-form-urlencoded")
        case .json(let bytes):
            return (.bytes(bytes), "application/json")
        case .multipart(let parts):
            let body = try MultipartEncoding.encode(parts)
            return (body.body, "multipart/form-data; boundary=\(body.boundary)")
        }
    }

    private static func mixed(_ adding: String, _ existing: Content) -> RPCError {
        .invalidParams("cannot add \(adding): this request already has \(existing.origin), and a request has one body serializer; call clearPostValues first")
    }
}
