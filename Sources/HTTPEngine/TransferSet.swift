/// The transfers the engine holds (`TransferEngine.active`), each transfer knowing its
/// own place in the set (`Transfer.places.active`): joining and leaving take constant
/// time with no hashing, where a dictionary keyed by the transfer's identity hashed on
/// every start and every end. The order is not kept: a leaving transfer's place goes to
/// the last one. (The timed transfers, which need an order, are `TransferDeadlines`.)
struct TransferSet {
    /// The members, in no particular order; holds the strong references.
    private(set) var members: [Transfer] = []
    /// How many members are paused (`Transfer.isPaused`), kept as they join, leave and
    /// report a change (`pauseChanged`), so that metrics read it without a walk over
    /// every member (10,000 of them took a `/metrics` scrape 6 ms).
    private(set) var pausedCount = 0

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    func contains(_ t: Transfer) -> Bool { t.places.active >= 0 }

    mutating func insert(_ t: Transfer) {
        guard !contains(t) else { return }
        t.places.active = members.count
        members.append(t)
        if t.isPaused { pausedCount += 1 }
    }

    /// A member's pause began or ended (`Transfer.pauseReasons` became empty or not).
    mutating func pauseChanged(_ t: Transfer) {
        guard contains(t) else { return }
        pausedCount += t.isPaused ? 1 : -1
    }

    mutating func remove(_ t: Transfer) {
        let i = t.places.active
        guard i >= 0 else { return }
        t.places.active = -1
        if t.isPaused { pausedCount -= 1 }
        let last = members.removeLast()
        if last !== t {
            members[i] = last
            last.places.active = i
        }
    }

    mutating func removeAll() {
        for t in members { t.places.active = -1 }
        members = []
        pausedCount = 0
    }
}

extension Transfer {
    /// A transfer's index in each of the engine's sets, -1 when not in it.
    struct Places {
        /// In `TransferEngine.active` (`TransferSet`).
        var active = -1
        /// In `TransferEngine.timed` (`TransferDeadlines`).
        var timed = -1
    }
}
