/// What a transfer tells its owner. All calls happen on the loop's thread, during a turn
/// of the loop — never synchronously inside `TransferEngine.start`, `cancel`, `resume`
/// or `shutdown` — so a delegate may call any of those from inside a callback (they take
/// effect once libcurl has returned; see `TransferEngine`).
///
/// Order: `receivedHeadLine` for each line of every head, `receivedHead` at most once,
/// then `receivedBody` any number of times, then `completedWith` exactly once. `progressed` may come at any point before completion.
/// After `cancel` returns nothing at all is called.
public protocol TransferDelegate: AnyObject {
    /// The final response's head (after redirects and auth retries): called once, before
    /// any body bytes, or at completion for responses without a body (HEAD, 204, 304).
    /// A transfer that fails before its first body byte gets no head.
    func transfer(_ t: Transfer, receivedHead head: ResponseHead)
    /// Body bytes, decoded (gzip/deflate/br/zstd). Return false to refuse them: the
    /// transfer pauses (`CURL_WRITEFUNC_PAUSE`), and the same bytes are offered again
    /// after `resume()`. The bytes are valid only during the call.
    func transfer(_ t: Transfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool
    /// A line of a response head (a redirect's or an interim response's too), `bytes`
    /// long, before it is kept. Return false to refuse it for now: the transfer pauses as
    /// for a refused body, and the line is offered again after `resume()`. The default
    /// keeps every line.
    func transfer(_ t: Transfer, receivedHeadLine bytes: Int) -> Bool
    /// Upload and download progress. Called whenever a figure changed, which may be once
    /// per read: the delegate coalesces.
    func transfer(_ t: Transfer, progressed p: TransferProgress)
    /// Exactly once, last. nil = success (any HTTP status is a success here).
    func transfer(_ t: Transfer, completedWith failure: TransferFailure?)
}

extension TransferDelegate {
    public func transfer(_ t: Transfer, receivedHeadLine bytes: Int) -> Bool { true }
}

/// Bytes moved so far. A total is 0 while unknown (no `Content-Length`, chunked).
/// Download figures count the bytes on the wire, before content decoding.
public struct TransferProgress: Sendable, Equatable {
    public var uploaded, uploadTotal, downloaded, downloadTotal: Int64
    /// Builds a progress report (the engine makes them from libcurl's xferinfo callback).
    public init(uploaded: Int64, uploadTotal: Int64, downloaded: Int64, downloadTotal: Int64) {
        self.uploaded = uploaded
        self.uploadTotal = uploadTotal
        self.downloaded = downloaded
        self.downloadTotal = downloadTotal
    }
}

/// Figures about a finished transfer, read from libcurl just before its handle is
/// recycled; set on the `Transfer` before `completedWith` is called.
public struct TransferMetrics: Sendable {
    /// The URL of the last request made (after redirects).
    public var effectiveURL: String
    /// Redirects followed.
    public var redirectCount: Int
    /// Connections this transfer had to open (`CURLINFO_NUM_CONNECTS`): 0 means it
    /// reused a cached one.
    public var connectionsOpened: Int
    /// Seconds from start to completion.
    public var totalTime: Double
}
