import Foundation

/// Where the repository's files are, found from this file's own path, so that a test
/// runs the same from any working directory.
public enum Repository {
    /// The repository's root (…/Tests/TestSupport/Repository.swift → …).
    public static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// `Tests/Fixtures`: the upstream, the proxy and the certificate maker the tests run.
    public static let fixtures = root + "/Tests/Fixtures"
}
