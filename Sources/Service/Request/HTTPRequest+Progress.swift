import HTTPEngine
import JSON

/// What one connection was last told about a request's progress (`onProgress`): the
/// figures it saw, so that its next note says what moved since, and when, so that
/// notes keep to its pace (`NotificationHub`). Reset when a new send begins.
struct ProgressCursor {
    /// The connection; a cursor whose session went away (or was replaced at the same
    /// address) is not used.
    weak var session: ClientSession?
    var last: TransferProgress?
    /// Loop time (ms) of its last note.
    var sentAt: UInt64 = 0
}

extension HTTPRequest {
    /// The request body's size as `onProgress` shows it: libcurl's figure once it has
    /// one, else the size of the body planned (0 with none), or -1 for a file whose
    /// size libcurl has not said yet.
    var expectedToWrite: Int64 {
        if progress.uploadTotal > 0 { return progress.uploadTotal }
        switch planned?.body {
        case .bytes(let b)?: return Int64(b.count)
        case .file?: return -1
        default: return 0
        }
    }

    /// The response body's size as `onProgress` shows it: libcurl's figure once it has
    /// one, else the final head's `Content-Length` (0 for a response that has no body),
    /// or -1 while unknown (no head yet, or a body without a length, such as a chunked
    /// one), as NSURLSession's `NSURLSessionTransferSizeUnknown`.
    var expectedToReceive: Int64 {
        if progress.downloadTotal > 0 { return progress.downloadTotal }
        guard state == .headersReceived || state == .loading || state == .done, status > 0 else { return -1 }
        if planned?.method == "HEAD" || method == "HEAD" || status == 204 || status == 304 { return 0 }
        return Self.expectedLength(responseHeaders)
    }

    /// The `onProgress` params for a connection last told `last` (nil: nothing yet):
    /// the moves since then and the totals.
    func progressNote(since last: TransferProgress?) -> JSONValue {
        let p = progress
        // A figure that went back (a new hop of a redirect starts libcurl's count
        // again) moved by all it has now.
        func moved(_ now: Int64, _ before: Int64?) -> Int64 {
            let b = before ?? 0
            return now >= b ? now - b : now
        }
        return [
            "request": .string(handle),
            "bytesWritten": .int(moved(p.uploaded, last?.uploaded)), "totalBytesWritten": .int(p.uploaded),
            "totalBytesExpectedToWrite": .int(expectedToWrite),
            // A resumed download's first note counts from the bytes kept, which did not move.
            "bytesReceived": .int(moved(p.downloaded, last?.downloaded ?? download?.progressOffset)), "totalBytesReceived": .int(p.downloaded),
            "totalBytesExpectedToReceive": .int(expectedToReceive),
        ]
    }
}
