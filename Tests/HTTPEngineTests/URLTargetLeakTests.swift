import Testing
@testable import HTTPEngine

/// Regression, found by the fuzzer: reading a URL whose host is not ASCII leaked
/// libcurl's copy of the host. When libcurl 7.88 cannot convert a host with
/// `CURLU_PUNYCODE` (any non-ASCII name in the C locale; in the C.UTF-8 locale that
/// `TransferEngine.globalInit` sets, a name IDNA disallows, such as one with `⒈`), it
/// fills in the string anyway and fails, and `URLTarget` freed the string only on
/// success. Under `make sanitize`, LeakSanitizer fails the run if the leak comes back;
/// here the reading itself is checked, whichever locale the test process is in.
@Test(arguments: ["http://bücher.example/x", "https://fuzz.i\u{D799}:8443/", "http://例え.テスト/",
                  "http://a\u{2488}b.example/"])
func nonASCIIHostsAreReadWithoutLeaking(url: String) throws {
    let target = try URLTarget.parse(url: url)
    #expect(target.scheme == "http" || target.scheme == "https")
    #expect(!target.host.isEmpty)
    #expect(target.port == 80 || target.port == 8443)
}
