import Foundation
@testable import Service

/// A clock that moves only when the test says so: lifetimes (`--request-ttl`,
/// `--detach-ttl`) then expire exactly when the test advances it past them, however
/// slowly the machine runs. Read on the server's loop thread, advanced on the test's.
final class ManualClock: @unchecked Sendable {
    // Unchecked: `seconds` is only touched with `lock` held.
    private let lock = NSLock()
    private var seconds: Double = 1000

    var clock: ServerClock { ServerClock { [self] in lock.withLock { seconds } } }

    func advance(_ by: Double) { lock.withLock { seconds += by } }
}
