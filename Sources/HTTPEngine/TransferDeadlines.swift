/// The transfers that have a timeout (`TransferEngine.timed`), kept as a binary min-heap
/// of their deadlines, each transfer knowing its place in it (`Transfer.places.timed`)
/// as `TransferSet` does: the earliest deadline is read in constant time, and a
/// transfer joining, leaving or having its deadline moved (a pause stops its clock, an
/// unpause starts it again) costs O(log n). The timeout timer used to walk every timed
/// transfer twice each time it fired: 10,000 fetches whose deadlines were spread over
/// four seconds cost xhrpcd 1.2 s of CPU to time out, and 0.9 s with the heap
/// (`Benchmarks/timeouts.py --spread 4`).
struct TransferDeadlines {
    /// The heap: `deadlines[i]` is `members[i]`'s, and no deadline is earlier than its
    /// parent's (`(i - 1) / 2`). A transfer whose clock is stopped has `.infinity`.
    private(set) var members: [Transfer] = []
    private var deadlines: [Double] = []

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    func contains(_ t: Transfer) -> Bool { t.places.timed >= 0 }

    /// The transfer with the earliest deadline, and that deadline.
    var earliest: (transfer: Transfer, deadline: Double)? {
        members.first.map { ($0, deadlines[0]) }
    }

    mutating func insert(_ t: Transfer, deadline: Double) {
        guard !contains(t) else { return move(t, to: deadline) }
        members.append(t)
        deadlines.append(deadline)
        t.places.timed = members.count - 1
        siftUp(members.count - 1)
    }

    /// Gives a member a new deadline.
    mutating func move(_ t: Transfer, to deadline: Double) {
        let i = t.places.timed
        guard i >= 0 else { return }
        let before = deadlines[i]
        deadlines[i] = deadline
        if deadline < before { siftUp(i) } else { siftDown(i) }
    }

    mutating func remove(_ t: Transfer) {
        let i = t.places.timed
        guard i >= 0 else { return }
        t.places.timed = -1
        let last = members.count - 1
        if i != last {
            members.swapAt(i, last)
            deadlines.swapAt(i, last)
            members[i].places.timed = i
        }
        members.removeLast()
        deadlines.removeLast()
        if i < members.count {
            siftDown(i)
            siftUp(i)
        }
    }

    mutating func removeAll() {
        for t in members { t.places.timed = -1 }
        members = []
        deadlines = []
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard deadlines[i] < deadlines[parent] else { break }
            exchange(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let left = 2 * i + 1
            guard left < members.count else { return }
            let right = left + 1
            let child = right < members.count && deadlines[right] < deadlines[left] ? right : left
            guard deadlines[child] < deadlines[i] else { return }
            exchange(i, child)
            i = child
        }
    }

    private mutating func exchange(_ a: Int, _ b: Int) {
        members.swapAt(a, b)
        deadlines.swapAt(a, b)
        members[a].places.timed = a
        members[b].places.timed = b
    }
}
