/// Settings every request inherits from the server's configuration.
struct RequestSettings {
    var maxBufferBytes: Int
    var maxRedirects: Int
    /// Body bytes one response may have; nil: no limit.
    var maxResponseBytes: Int?
}
