import CCurl
import SeededRandom
import Testing
@testable import HTTPEngine

/// `TransferEngine.plainHTTPTarget`, the one-pass check that spares common URLs a parse
/// with `curl_url`: whatever it accepts, the libcurl in use accepts with the same
/// scheme; what it does not recognise still goes to libcurl. No I/O.
@Suite struct URLFastPathTests {
    static let rounds = 20_000
    /// What the slow path of `validate` sees: libcurl's verdict and scheme.
    func libcurlScheme(_ url: String) -> String? {
        guard let u = curl_url() else { return nil }
        defer { curl_url_cleanup(u) }
        guard curl_url_set(u, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK else { return nil }
        var p: UnsafeMutablePointer<CChar>? = nil
        guard curl_url_get(u, CURLUPART_SCHEME, &p, 0) == CURLUE_OK, let p else { return nil }
        defer { curl_free(p) }
        return String(cString: p)
    }

    @Test func commonURLsTakeTheFastPath() {
        for url in [
            "http://127.0.0.1:8080/1k", "https://example.com", "https://example.com/",
            "http://a/b?c=d&e=%20f#g", "http://my_host.local:65535/x", "https://xn--bcher-kva.example/",
            "http://localhost:1/", "http://10.0.0.1?q", "http://h#frag", "https://EXAMPLE.com/A/B",
        ] {
            #expect(TransferEngine.plainHTTPTarget(url)?.scheme != nil, "\(url)")
            #expect(TransferEngine.plainHTTPTarget(url)?.scheme == libcurlScheme(url), "\(url)")
        }
    }

    @Test func unusualURLsTakeTheSlowPath() throws {
        for url in [
            "HTTP://example.com/", "http://", "http:///x", "http://user:pw@host/", "http://[::1]:80/",
            "http://host:/", "http://host:0/", "http://host:080/", "http://host:65536/", "http://host:123456/",
            "http://host/a b", "http://host/\\", "http://hôst/", "http://host/é", "http:/host", "http:host",
            "ftp://host/", "not a url", "", "https:", "http://host\t/", "http://host%41/",
        ] {
            #expect(TransferEngine.plainHTTPTarget(url)?.scheme == nil, "\(url)")
        }
        // And the slow path still answers for them as libcurl does.
        #expect(try TransferEngine.validate(url: "HTTP://example.com/") == URLTarget(scheme: "http", host: "example.com", port: 80))
        #expect(try TransferEngine.validate(url: "http://user:pw@host/") == URLTarget(scheme: "http", host: "host", port: 80))
        #expect(try TransferEngine.validate(url: "http://[::1]:80/") == URLTarget(scheme: "http", host: "[::1]", port: 80))
        #expect(throws: TransferFailure.self) { try TransferEngine.validate(url: "http://") }
        #expect(throws: TransferFailure.self) { try TransferEngine.validate(url: "http://host:65536/") }
    }

    /// Random URLs made of the pieces the check looks at, and of the bytes around its
    /// edges: every one it accepts, libcurl accepts with the same scheme.
    @Test func neverAcceptsWhatLibcurlRefuses() {
        var rng = SplitMix64(seed: 0x5EED)
        let schemes = ["http", "https", "http", "https", "HTTP", "htt", "httpss", "hxxp"]
        let separators = ["://", "://", "://", ":/", ":///", "//", ""]
        let hostBytes = Array("abcXYZ019-._:@[]%!$&'()*+,;=~ \t/?#\\\"<>^`{|}".utf8) + [0x7F, 0x00, 0xC3, 0xA9]
        let restBytes = Array("abc/?#%&=+;:@!$'()*,~-._[]{}|\\^` \"<>".utf8) + [0x7F, 0x01, 0x0A, 0xE2, 0x82]
        var accepted = 0
        for _ in 0..<URLFastPathTests.rounds {
            var bytes = Array((schemes.randomElement(using: &rng)! + separators.randomElement(using: &rng)!).utf8)
            for _ in 0..<Int.random(in: 0...6, using: &rng) {
                // Mostly plain host bytes, sometimes anything.
                bytes.append(Bool.random(using: &rng) ? UInt8(ascii: "h") : hostBytes.randomElement(using: &rng)!)
            }
            if Int.random(in: 0..<3, using: &rng) == 0 {
                bytes.append(UInt8(ascii: ":"))
                for _ in 0..<Int.random(in: 0...6, using: &rng) {
                    bytes.append(UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &rng))
                }
            }
            if Bool.random(using: &rng) {
                bytes.append(Array("/?#".utf8).randomElement(using: &rng)!)
                for _ in 0..<Int.random(in: 0...8, using: &rng) {
                    bytes.append(Bool.random(using: &rng) ? UInt8(ascii: "p") : restBytes.randomElement(using: &rng)!)
                }
            }
            // libcurl takes a C string: an embedded NUL would cut it short, so leave those out.
            guard !bytes.contains(0) else { continue }
            let url = String(decoding: bytes, as: UTF8.self)
            if let fast = TransferEngine.plainHTTPTarget(url) {
                accepted += 1
                #expect(libcurlScheme(url) == fast.scheme, "\(url.debugDescription)")
                // The host and port the egress policy checks are libcurl's too.
                let slow = try? URLTarget.parse(url: url)
                #expect(slow?.port == fast.port, "\(url.debugDescription)")
                #expect(slow?.host == fast.host || (slow.flatMap { IPAddress.parseLiteral($0.host) } != nil
                    && IPAddress.parseLiteral(fast.host) == slow.flatMap { IPAddress.parseLiteral($0.host) }),
                        "\(url.debugDescription)")
            }
        }
        #expect(accepted > 500)  // the generator exercises the accepting side too
    }
}
