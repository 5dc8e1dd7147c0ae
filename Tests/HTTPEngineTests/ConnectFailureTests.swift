#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPEngine

/// A refused connection is a failure with libcurl's sentence naming host and port.
@Suite struct ConnectFailureTests {
    /// A loopback port that was just bound and closed: nothing listens there.
    static func closedPort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        close(fd)
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    @Test func refusedConnectionFails() throws {
        let h = try Harness()
        let port = ConnectFailureTests.closedPort()
        let r = try h.fetch(TransferRequest(url: "http://127.0.0.1:\(port)/"))
        #expect(r.completions == 1)
        #expect(r.failure?.code == 7)  // CURLE_COULDNT_CONNECT
        // libcurl 7.88 says "Couldn't connect to server" here; the engine puts the reason back.
        #expect(r.failure?.text.hasPrefix("Failed to connect to 127.0.0.1 port \(port) after ") == true, "\(String(describing: r.failure))")
        #expect(r.failure?.text.hasSuffix(" ms: Connection refused") == true, "\(String(describing: r.failure))")
        #expect(r.order == ["done"])
        #expect(try h.finish() == [])
    }

    /// A TLS failure's text begins with "SSL" (here: TLS spoken to a plain HTTP port).
    @Test func tlsFailureTextBeginsWithSSL() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: "https://127.0.0.1:\(h.upstream.port)/"))
        #expect(r.completions == 1)
        #expect(r.failure?.code == 35)  // CURLE_SSL_CONNECT_ERROR
        #expect(r.failure?.text.hasPrefix("SSL") == true, "\(String(describing: r.failure))")
        #expect(try h.finish() == [])
    }
}
