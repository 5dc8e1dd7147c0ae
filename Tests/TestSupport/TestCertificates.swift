import Foundation

/// The certificates of `Tests/Fixtures/certs.py`, made once per test process in a
/// private temporary directory (about 0.5 s) and removed when the process exits. A test
/// target adds what it builds from them (engine options, TLS contexts) in an extension.
public enum TestCertificates {
    /// `{name: path}` and the pin strings, as `make_all` returns them; empty when
    /// certs.py failed (the tests using it then fail on a missing path).
    private static let paths: [String: String] = make()
    private static let directory = NSTemporaryDirectory() + "xhrpc-certs-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// The path (or pin string) `make_all` gave `name`, or a path that does not exist, so
    /// that the test using it fails on it.
    public static func path(_ name: String) -> String { paths[name] ?? "/nonexistent/\(name)" }

    /// upstream.py arguments serving `cert`/`key` (names of `make_all`) over TLS.
    public static func serving(_ cert: String, _ key: String, _ extra: [String] = []) -> [String] {
        ["--tls-cert", path(cert), "--tls-key", path(key)] + extra
    }

    private static func make() -> [String: String] {
        let p = Process()
        let out = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", Repository.fixtures + "/certs.py", directory]
        p.standardOutput = out
        do { try p.run() } catch { return [:] }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        atexit { try? FileManager.default.removeItem(atPath: TestCertificates.directory) }
        guard p.terminationStatus == 0,
              let o = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return [:] }
        return o.compactMapValues { $0 as? String }
    }
}
