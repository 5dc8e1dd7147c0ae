/// Why a transfer is paused. libcurl is paused while any reason holds, and each reason
/// is lifted only by its own owner, so the reasons compose: the caller's pause outlasts
/// a reader that made room, and the caller's `unpause` does not make a reader that has
/// no room take bytes (`TransferEngine+Pause.swift`).
public struct PauseReasons: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The delegate refused body bytes (its buffer or its principal's budget is full,
    /// or it throws the response away): receiving waits until `Transfer.resume()`.
    /// Sending is not held up for it.
    public static let noRoom = PauseReasons(rawValue: 1 << 0)
    /// The caller paused the transfer (`Transfer.pause()`), both directions, until
    /// `Transfer.unpause()`. Time paused this way does not count towards the timeout.
    public static let requested = PauseReasons(rawValue: 1 << 1)
}

/// Seconds a transfer has run, not counting the time the caller held it paused: the
/// clock of the whole-transfer timeout. A pure value; the engine reads the time.
struct ActiveClock {
    /// Seconds run in the stretches that ended.
    private var before = 0.0
    /// When the current stretch began; nil while stopped.
    private var since: Double?

    mutating func start(at now: Double) {
        if since == nil { since = now }
    }

    mutating func stop(at now: Double) {
        guard let s = since else { return }
        before += max(0, now - s)
        since = nil
    }

    func seconds(at now: Double) -> Double { before + (since.map { max(0, now - $0) } ?? 0) }

    /// When `timeout` seconds of running will have passed, if the clock runs; nil when
    /// it is stopped.
    func deadline(for timeout: Double) -> Double? { since.map { $0 + timeout - before } }
}

extension Transfer {
    /// The caller's pause (`PauseReasons.requested`): libcurl stops sending and
    /// receiving, and the timeout's clock stops, until `unpause()`. Harmless when the
    /// transfer is not running or already paused this way.
    public func pause() { engine?.pause(self) }

    /// Lifts the caller's pause. The transfer goes on at the next turn of the loop as far
    /// as its other reasons allow: a delegate that has no room still receives nothing
    /// until it calls `resume()`.
    public func unpause() { engine?.unpause(self) }
}
