/// One line of the access log: a request that finished, or a socket that closed, as the
/// operator sees it. Nothing secret: the URL is redacted (`URLRedaction`), and no
/// header, body or credential is part of it.
struct AccessLogEntry: Equatable {
    var principal: String
    var method: String
    /// Without userinfo and without the values of secret query parameters.
    var url: String
    /// The final status; 0 when no response came.
    var status: Int
    /// Why no response came (the status text), when the status is 0.
    var reason: String?
    /// Response body bytes received, and request body bytes sent.
    var bytesIn: Int
    var bytesOut: Int
    var durationMs: Int
    var attempts: Int
    /// For a request, the reason word of a failure with no response (`FailureReason`,
    /// or `aborted`, `cancelled`, `refused`); nil for a socket.
    var failure: String?
    /// A TLS socket whose peer closed TCP without close_notify (`RawSocket`): logged as
    /// `truncated`, since what was read may not be all the peer sent.
    var truncated = false
    /// What `requests_total` counts it under: the status class, or the failure's word;
    /// nil for a socket, which is not a request.
    var outcome: String? {
        guard event == "request finished" else { return nil }
        if status > 0 { return Self.statusClasses[min(max(status / 100, 1), 5) - 1] }
        return failure ?? "io"
    }
    /// The status classes `outcome` names, made once rather than interpolated for every
    /// request.
    private static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]
    /// The line's message: what finished.
    var event = "request finished"
}
