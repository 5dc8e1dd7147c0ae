import Testing
@testable import HTTPEngine

/// Regression, found by the fuzzer: reading a URL whose host is not ASCII leaked
/// libcurl's copy of the host. libcurl 7.88 cannot convert such a host with
/// `CURLU_PUNYCODE` in the C locale (which the tests and xhrpcd run in), fills in the
/// string anyway and fails, and `URLTarget` freed the string only on success. Under
/// `make sanitize`, LeakSanitizer fails the run if the leak comes back; here the
/// reading itself is checked.
@Test(arguments: ["http://bücher.example/x", "https://fuzz.i\u{D799}:8443/", "http://例え.テスト/"])
func nonASCIIHostsAreReadWithoutLeaking(url: String) throws {
    let target = try URLTarget.parse(url: url)
    #expect(target.scheme == "http" || target.scheme == "https")
    #expect(!target.host.isEmpty)
    #expect(target.port == 80 || target.port == 8443)
}
