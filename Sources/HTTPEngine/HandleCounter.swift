/// Counts open libuv handles and runs waiters when the count reaches zero. A separate
/// object so close callbacks need not capture the engine (they may run after it is gone).
final class HandleCounter {
    private var open = 0
    private var waiters: [() -> Void] = []
    /// Handed to `UVHandle.close`. Captures the counter strongly: a close callback may
    /// run after the engine (the counter's other owner) is gone.
    var closedCallback: () -> Void { { self.closed() } }

    func opened() { open += 1 }

    func closed() {
        open -= 1
        if open == 0, !waiters.isEmpty {
            let w = waiters
            waiters = []
            for c in w { c() }
        }
    }

    /// Runs `c` when every handle is closed: now if none is open.
    func whenAllClosed(_ c: @escaping () -> Void) {
        if open == 0 { c() } else { waiters.append(c) }
    }
}
