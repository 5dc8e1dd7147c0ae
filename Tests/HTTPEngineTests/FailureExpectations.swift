import Testing
@testable import HTTPEngine

/// Expects that `r` failed with libcurl's `code` and a text that begins with `prefix` and
/// ends with `suffix`: TLS failures carry the OpenSSL version and error number in the
/// middle, which vary between builds.
func expectFailure(_ r: Recorder, code: Int32, prefix: String, suffix: String,
                   sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.failure?.code == code, sourceLocation: sourceLocation)
    let text = r.failure?.text ?? ""
    #expect(text.hasPrefix(prefix), "\(text)", sourceLocation: sourceLocation)
    #expect(text.hasSuffix(suffix), "\(text)", sourceLocation: sourceLocation)
}
