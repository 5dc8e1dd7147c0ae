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
    /// The line's message: what finished.
    var event = "request finished"
}
