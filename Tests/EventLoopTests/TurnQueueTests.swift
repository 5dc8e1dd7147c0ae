import EventLoop
import Testing

/// `TurnQueue` on its own: first in first out, nothing kept of what it gave out, and no
/// growth under a load that never lets it empty.
@Suite struct TurnQueueTests {
    final class Item {
        let n: Int
        init(_ n: Int) { self.n = n }
    }

    @Test func takenElementsAreNotKept() {
        var q = TurnQueue<Item>()
        weak var first: Item?
        do {
            let a = Item(0)
            first = a
            q.append(a)
        }
        q.append(Item(1))
        #expect(q.first?.n == 0 && q.count == 2)
        #expect(q.popFirst()?.n == 0)
        // Taken while another waits: the queue let go of it.
        #expect(first == nil)
        #expect(q.count == 1 && q.popFirst()?.n == 1 && q.isEmpty && q.popFirst() == nil)
    }

    /// Three in, two out, 100,000 times: order is kept throughout, and the storage stays
    /// within a few times what is queued (the taken slots are dropped once they are half
    /// of it) instead of growing with every element ever appended.
    @Test func aQueueThatNeverEmptiesDoesNotGrow() {
        var q = TurnQueue<Int>()
        var next = 0
        var expected = 0
        for _ in 0..<100_000 {
            for _ in 0..<3 {
                q.append(next)
                next += 1
            }
            for _ in 0..<2 {
                #expect(q.popFirst() == expected)
                expected += 1
            }
        }
        #expect(q.count == 100_000)
        var ordered = true
        while let e = q.popFirst() {
            ordered = ordered && e == expected
            expected += 1
        }
        #expect(ordered && expected == next && q.isEmpty)

        var busy = TurnQueue<Int>()
        for k in 0..<200_000 {
            busy.append(k)
            busy.append(k)
            _ = busy.popFirst()
            _ = busy.popFirst()
            busy.append(k)
        }
        // 200,000 waiting, taken slots at most as many again (and at least 1024).
        #expect(busy.count == 200_000)
        #expect(busy.storedSlots <= 2 * busy.count + 1024)
    }
}
