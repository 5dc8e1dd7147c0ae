import EventLoop
#if canImport(Glibc)
import Glibc
#endif

/// A fresh private directory for a test's files and Unix-domain sockets; the caller
/// removes it. Under /tmp whatever TMPDIR says, so that a socket path inside it stays
/// well within the 108 bytes of `sun_path`.
public func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/xhrpc-test-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw UVError(-errno, "mkdtemp")
    }
    return String(cString: made)
}
